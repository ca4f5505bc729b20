/*
 * The hot path of the scorer: token list -> packed term vector, and the cosine of two packed
 * vectors. Everything else (analysis, IDF tables, explanations) lives in Python; this file
 * exists because the scorer is the product and pure Python is 3x slower on it (see
 * `simeval bench speed`). `simeval/_vector.py` holds the same algorithm in Python, and the
 * tests hold both to the same numbers.
 *
 * A packed vector is a bytes object of `Term` records sorted by `hash`: the 64-bit term hash,
 * the term-frequency weight (raw count or 1 + ln(count)) and the term's IDF. Sorting by a hash
 * of the term text (not by a process-local id) fixes the summation order, so a score is the same
 * in every process and on every machine, and cosine(a, b) == cosine(b, a) exactly.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t hash;
    double tfw;
    double idf;
} Term;

typedef struct {
    uint64_t hash;
    double count;
    double idf;
    int used;
} Slot;

static int cmp_term(const void *a, const void *b) {
    uint64_t x = ((const Term *)a)->hash, y = ((const Term *)b)->hash;
    return (x > y) - (x < y);
}

/* vectorize(tokens: list[str], table: dict, miss: callable, sublinear: bool) -> bytes
 * `table` maps a token to (hash, idf) or None (a stop word); `miss(token)` computes and stores
 * the entry for a token the table lacks and returns it. */
static PyObject *vectorize(PyObject *self, PyObject *args) {
    PyObject *tokens, *table, *miss;
    int sublinear;
    if (!PyArg_ParseTuple(args, "O!O!Op", &PyList_Type, &tokens, &PyDict_Type, &table, &miss,
                          &sublinear))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(tokens);
    size_t cap = 16;
    while (cap < (size_t)n * 2) cap <<= 1;
    Slot *slots = PyMem_Calloc(cap, sizeof(Slot));
    if (!slots) return PyErr_NoMemory();
    size_t used = 0, mask = cap - 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *tok = PyList_GET_ITEM(tokens, i);
        PyObject *entry = PyDict_GetItemWithError(table, tok); /* borrowed */
        PyObject *owned = NULL;
        if (entry == NULL) {
            if (PyErr_Occurred()) goto fail;
            owned = PyObject_CallOneArg(miss, tok);
            if (owned == NULL) goto fail;
            entry = owned;
        }
        if (entry == Py_None) {
            Py_XDECREF(owned);
            continue;
        }
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2) {
            Py_XDECREF(owned);
            PyErr_SetString(PyExc_TypeError, "table entries must be (hash, idf) tuples");
            goto fail;
        }
        uint64_t h = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(entry, 0));
        double idf = PyFloat_AsDouble(PyTuple_GET_ITEM(entry, 1));
        Py_XDECREF(owned);
        if (PyErr_Occurred()) goto fail;
        size_t k = (size_t)(h ^ (h >> 29)) & mask;
        while (slots[k].used && slots[k].hash != h) k = (k + 1) & mask;
        if (!slots[k].used) {
            slots[k].used = 1;
            slots[k].hash = h;
            slots[k].idf = idf;
            used++;
        }
        slots[k].count += 1.0;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(used * sizeof(Term)));
    if (!out) goto fail;
    Term *terms = (Term *)PyBytes_AS_STRING(out);
    size_t j = 0;
    for (size_t k = 0; k < cap; k++) {
        if (!slots[k].used) continue;
        terms[j].hash = slots[k].hash;
        terms[j].tfw = sublinear ? 1.0 + log(slots[k].count) : slots[k].count;
        terms[j].idf = slots[k].idf;
        j++;
    }
    qsort(terms, used, sizeof(Term), cmp_term);
    PyMem_Free(slots);
    return out;
fail:
    PyMem_Free(slots);
    return NULL;
}

/* The smoothed two-document IDF of scikit-learn: ln((1 + n) / (1 + df)) + 1 with n = 2. */
#define PAIR_IDF_ONE 1.4054651081081644 /* ln(3/2) + 1 */
#define PAIR_IDF_TWO 1.0                /* ln(3/3) + 1 */

static double cosine_packed(const Term *a, size_t na, const Term *b, size_t nb, int pair) {
    if (na == 0 || nb == 0) return 0.0;
    if (na == nb && memcmp(a, b, na * sizeof(Term)) == 0) return 1.0;
    double dot = 0.0, sa = 0.0, sb = 0.0;
    size_t i = 0, j = 0;
    while (i < na || j < nb) {
        if (j >= nb || (i < na && a[i].hash < b[j].hash)) {
            double w = a[i].tfw * (pair ? PAIR_IDF_ONE : a[i].idf);
            sa += w * w;
            i++;
        } else if (i >= na || b[j].hash < a[i].hash) {
            double w = b[j].tfw * (pair ? PAIR_IDF_ONE : b[j].idf);
            sb += w * w;
            j++;
        } else {
            double wa = a[i].tfw * (pair ? PAIR_IDF_TWO : a[i].idf);
            double wb = b[j].tfw * (pair ? PAIR_IDF_TWO : b[j].idf);
            sa += wa * wa;
            sb += wb * wb;
            dot += wa * wb;
            i++;
            j++;
        }
    }
    if (sa <= 0.0 || sb <= 0.0) return 0.0;
    double s = dot / (sqrt(sa) * sqrt(sb));
    return s < 0.0 ? 0.0 : (s > 1.0 ? 1.0 : s);
}

/* cosine(a: bytes, b: bytes, pair: bool) -> float */
static PyObject *cosine(PyObject *self, PyObject *args) {
    Py_buffer a, b;
    int pair;
    if (!PyArg_ParseTuple(args, "y*y*p", &a, &b, &pair)) return NULL;
    double s = cosine_packed((const Term *)a.buf, (size_t)a.len / sizeof(Term),
                             (const Term *)b.buf, (size_t)b.len / sizeof(Term), pair);
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    return PyFloat_FromDouble(s);
}

/* best(a: bytes, refs: sequence[bytes], pair: bool) -> (score, index)
 * The best match of one vector against many prepared ones, first index on ties. */
static PyObject *best(PyObject *self, PyObject *args) {
    Py_buffer a;
    PyObject *refs;
    int pair;
    if (!PyArg_ParseTuple(args, "y*Op", &a, &refs, &pair)) return NULL;
    PyObject *seq = PySequence_Fast(refs, "refs must be a sequence of bytes");
    if (!seq) {
        PyBuffer_Release(&a);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    double top = -1.0;
    Py_ssize_t at = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyBytes_Check(r)) {
            PyErr_SetString(PyExc_TypeError, "refs must be bytes");
            Py_DECREF(seq);
            PyBuffer_Release(&a);
            return NULL;
        }
        double s = cosine_packed((const Term *)a.buf, (size_t)a.len / sizeof(Term),
                                 (const Term *)PyBytes_AS_STRING(r),
                                 (size_t)PyBytes_GET_SIZE(r) / sizeof(Term), pair);
        if (s > top) {
            top = s;
            at = i;
        }
    }
    Py_DECREF(seq);
    PyBuffer_Release(&a);
    return Py_BuildValue("(dn)", at < 0 ? 0.0 : top, at);
}

static PyMethodDef methods[] = {
    {"vectorize", vectorize, METH_VARARGS, "Pack a token list into a sorted term vector."},
    {"cosine", cosine, METH_VARARGS, "Cosine of two packed term vectors."},
    {"best", best, METH_VARARGS, "Best cosine of one packed vector against many."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fast", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fast(void) { return PyModule_Create(&module); }
