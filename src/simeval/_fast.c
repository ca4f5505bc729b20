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

/* Sort terms by hash: quicksort with insertion sort for short runs. Inline comparisons; libc's
 * qsort (a merge sort with a temporary buffer and a call per comparison) took a third of the
 * time of vectorising a 100-word text. Hashes are distinct, so stability does not matter. */
static void sort_terms(Term *t, size_t n) {
    while (n > 16) {
        uint64_t a = t[0].hash, b = t[n / 2].hash, c = t[n - 1].hash;
        uint64_t pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        size_t i = 0, j = n - 1;
        for (;;) {
            while (t[i].hash < pivot) i++;
            while (t[j].hash > pivot) j--;
            if (i >= j) break;
            Term tmp = t[i];
            t[i] = t[j];
            t[j] = tmp;
            i++;
            j--;
        }
        /* recurse into the smaller side, loop on the larger */
        size_t left = j + 1;
        if (left < n - left) {
            sort_terms(t, left);
            t += left;
            n -= left;
        } else {
            sort_terms(t + left, n - left);
            n = left;
        }
    }
    for (size_t i = 1; i < n; i++) {
        Term x = t[i];
        size_t j = i;
        while (j > 0 && t[j - 1].hash > x.hash) {
            t[j] = t[j - 1];
            j--;
        }
        t[j] = x;
    }
}

/* vectorize(tokens: list[str], table: dict, miss: callable, sublinear: bool) -> bytes
 * `table` maps a token to its entry, 16 bytes packing (uint64 hash, double idf) in native
 * order, or None (a stop word); `miss(token)` computes and stores the entry for a token the
 * table lacks and returns it. Bytes, not a tuple of Python numbers: unpacking those costs more
 * than the rest of the loop. */
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
        if (!PyBytes_Check(entry) || PyBytes_GET_SIZE(entry) != 16) {
            Py_XDECREF(owned);
            PyErr_SetString(PyExc_TypeError, "table entries must be 16-byte packed (hash, idf)");
            goto fail;
        }
        uint64_t h;
        double idf;
        memcpy(&h, PyBytes_AS_STRING(entry), 8);
        memcpy(&idf, PyBytes_AS_STRING(entry) + 8, 8);
        Py_XDECREF(owned);
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
    sort_terms(terms, used);
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


/* ---- Tokenizer: a C version of analyzer.TOKEN_PATTERN, r"\d+(?:[.,]\d+)*|\w+" ----------
 * Same character classes as Python's re on str patterns: \d is Py_UNICODE_ISDECIMAL, \w is
 * Py_UNICODE_ISALNUM or '_'. A token starting with a decimal digit is a number: digits, then
 * any number of ('.' or ',') followed by digits; the regex takes that alternative first, so
 * "10am" is "10", "am". The tests compare both on random Unicode text. */

/* ASCII classes from a table: the Unicode predicates are several calls per character. */
#define C_WORD 1
#define C_DEC 2
static const unsigned char ascii_class[128] = {
    ['0'] = 3, ['1'] = 3, ['2'] = 3, ['3'] = 3, ['4'] = 3, ['5'] = 3, ['6'] = 3, ['7'] = 3,
    ['8'] = 3, ['9'] = 3, ['_'] = 1,
    ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1,
    ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1,
    ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1,
    ['y'] = 1, ['z'] = 1,
    ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1,
    ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1,
    ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1,
    ['Y'] = 1, ['Z'] = 1,
};

static inline int is_word(Py_UCS4 c) {
    return c < 128 ? (ascii_class[c] & C_WORD) : Py_UNICODE_ISALNUM(c);
}
static inline int is_dec(Py_UCS4 c) {
    return c < 128 ? (ascii_class[c] & C_DEC) : Py_UNICODE_ISDECIMAL(c);
}

/* Scan one token starting at or after *pos; returns 0 when the text is exhausted. */
static int next_token(int kind, const void *data, Py_ssize_t len, Py_ssize_t *pos,
                      Py_ssize_t *start, Py_ssize_t *end) {
    Py_ssize_t i = *pos;
    while (i < len && !is_word(PyUnicode_READ(kind, data, i))) i++;
    if (i >= len) return 0;
    *start = i;
    Py_UCS4 c = PyUnicode_READ(kind, data, i);
    if (is_dec(c)) {
        while (i < len && is_dec(PyUnicode_READ(kind, data, i))) i++;
        while (i + 1 < len) {
            Py_UCS4 sep = PyUnicode_READ(kind, data, i);
            if ((sep == '.' || sep == ',') && is_dec(PyUnicode_READ(kind, data, i + 1))) {
                i += 1;
                while (i < len && is_dec(PyUnicode_READ(kind, data, i))) i++;
            } else {
                break;
            }
        }
    } else {
        while (i < len && is_word(PyUnicode_READ(kind, data, i))) i++;
    }
    *end = i;
    *pos = i;
    return 1;
}

/* tokenize(text: str) -> list[str]: the tokens, for tests and the explanation path. */
static PyObject *tokenize(PyObject *self, PyObject *arg) {
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "text must be str");
        return NULL;
    }
    int kind = PyUnicode_KIND(arg);
    const void *data = PyUnicode_DATA(arg);
    Py_ssize_t len = PyUnicode_GET_LENGTH(arg), pos = 0, a, b;
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    while (next_token(kind, data, len, &pos, &a, &b)) {
        PyObject *t = PyUnicode_Substring(arg, a, b);
        if (!t || PyList_Append(out, t) < 0) {
            Py_XDECREF(t);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(t);
    }
    return out;
}

/* ---- Vectorizer: tokenizer + a C hash table from token text to (term hash, idf) ---------
 * The table caches what the Python analyzer computes (stemming, truncation, stop words, IDF)
 * per distinct token, keyed by the token's code points: a hit costs no Python object at all.
 * That is what makes a warm score faster than tokenising with the regex alone. */

enum { EMPTY = 0, TERM = 1, STOP = 2 };

typedef struct {
    uint64_t key_hash;
    uint64_t short_key; /* a token of <= 8 Latin-1 characters, packed: no arena read to check */
    uint32_t off, len;  /* the token's code points in the arena */
    uint64_t term_hash;
    double idf;
    int state;
} Cell;

typedef struct {
    PyObject_HEAD
    PyObject *miss;
    Cell *cells;
    size_t cap, used, limit;
    Py_UCS4 *arena;
    size_t arena_len, arena_cap;
    Slot *scratch; /* the per-text term counter, kept zeroed between calls */
    size_t scratch_cap;
    int busy;
} Vectorizer;

/* FNV-1a over code points; *short_key gets the packed token when it is <= 8 Latin-1
 * characters, else UINT64_MAX (no such packing exists: 0xFF x 8 would need 8 chars ÿ). */
static uint64_t key_hash(int kind, const void *data, Py_ssize_t a, Py_ssize_t b,
                         uint64_t *short_key) {
    uint64_t h = 1469598103934665603ULL, packed = 0;
    int packable = (b - a) <= 8;
    for (Py_ssize_t i = a; i < b; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        h ^= (uint64_t)c;
        h *= 1099511628211ULL;
        if (c > 255 || c == 0) packable = 0;
        packed = (packed << 8) | (c & 0xFF);
    }
    *short_key = packable ? packed : UINT64_MAX;
    return h ^ (h >> 32);
}

static int vz_alloc(Vectorizer *v, size_t cap) {
    Cell *cells = PyMem_Calloc(cap, sizeof(Cell));
    if (!cells) return -1;
    PyMem_Free(v->cells);
    v->cells = cells;
    v->cap = cap;
    v->used = 0;
    v->arena_len = 0;
    return 0;
}

static int vz_grow(Vectorizer *v) {
    size_t cap = v->cap * 2, mask = cap - 1;
    Cell *cells = PyMem_Calloc(cap, sizeof(Cell));
    if (!cells) return -1;
    for (size_t k = 0; k < v->cap; k++) {
        if (v->cells[k].state == EMPTY) continue;
        size_t j = (size_t)v->cells[k].key_hash & mask;
        while (cells[j].state != EMPTY) j = (j + 1) & mask;
        cells[j] = v->cells[k];
    }
    PyMem_Free(v->cells);
    v->cells = cells;
    v->cap = cap;
    return 0;
}

static int vz_init(Vectorizer *v, PyObject *args, PyObject *kw) {
    PyObject *miss;
    Py_ssize_t limit = 2000000;
    static char *names[] = {"miss", "limit", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|n", names, &miss, &limit)) return -1;
    if (!PyCallable_Check(miss)) {
        PyErr_SetString(PyExc_TypeError, "miss must be callable");
        return -1;
    }
    Py_XSETREF(v->miss, Py_NewRef(miss));
    v->limit = (size_t)limit;
    return vz_alloc(v, 1024);
}

static void vz_dealloc(Vectorizer *v) {
    Py_XDECREF(v->miss);
    PyMem_Free(v->cells);
    PyMem_Free(v->arena);
    PyMem_Free(v->scratch);
    Py_TYPE(v)->tp_free((PyObject *)v);
}

/* The cell of token text[a:b], computing it through `miss` on first sight; NULL on error. */
static Cell *vz_lookup(Vectorizer *v, PyObject *text, int kind, const void *data, Py_ssize_t a,
                       Py_ssize_t b) {
    uint64_t sk;
    uint64_t h = key_hash(kind, data, a, b, &sk);
    size_t mask = v->cap - 1, k = (size_t)h & mask;
    uint32_t n = (uint32_t)(b - a);
    while (v->cells[k].state != EMPTY) {
        Cell *c = &v->cells[k];
        if (c->key_hash == h && c->len == n) {
            if (sk != UINT64_MAX) {
                if (c->short_key == sk) return c;
                k = (k + 1) & mask;
                continue;
            }
            const Py_UCS4 *key = v->arena + c->off;
            Py_ssize_t i = 0;
            while (i < n && key[i] == PyUnicode_READ(kind, data, a + i)) i++;
            if (i == n) return c;
        }
        k = (k + 1) & mask;
    }
    /* a miss: ask Python, then store */
    PyObject *tok = PyUnicode_Substring(text, a, b);
    if (!tok) return NULL;
    PyObject *entry = PyObject_CallOneArg(v->miss, tok);
    Py_DECREF(tok);
    if (!entry) return NULL;
    int state;
    uint64_t th = 0;
    double idf = 0.0;
    if (entry == Py_None) {
        state = STOP;
    } else if (PyBytes_Check(entry) && PyBytes_GET_SIZE(entry) == 16) {
        state = TERM;
        memcpy(&th, PyBytes_AS_STRING(entry), 8);
        memcpy(&idf, PyBytes_AS_STRING(entry) + 8, 8);
    } else {
        Py_DECREF(entry);
        PyErr_SetString(PyExc_TypeError, "miss() must return 16 packed bytes or None");
        return NULL;
    }
    Py_DECREF(entry);
    if (v->used >= v->limit) { /* bounded memory: start over rather than grow forever */
        if (vz_alloc(v, 1024) < 0) return NULL;
    }
    if ((v->used + 1) * 2 > v->cap) {
        if (vz_grow(v) < 0) return NULL;
    }
    if (v->arena_len + n > v->arena_cap) {
        size_t cap = v->arena_cap ? v->arena_cap : 65536;
        while (cap < v->arena_len + n) cap *= 2;
        Py_UCS4 *arena = PyMem_Realloc(v->arena, cap * sizeof(Py_UCS4));
        if (!arena) {
            PyErr_NoMemory();
            return NULL;
        }
        v->arena = arena;
        v->arena_cap = cap;
    }
    for (uint32_t i = 0; i < n; i++) v->arena[v->arena_len + i] = PyUnicode_READ(kind, data, a + i);
    mask = v->cap - 1;
    k = (size_t)h & mask;
    while (v->cells[k].state != EMPTY) k = (k + 1) & mask;
    Cell *c = &v->cells[k];
    c->key_hash = h;
    c->short_key = sk;
    c->off = (uint32_t)v->arena_len;
    c->len = n;
    c->term_hash = th;
    c->idf = idf;
    c->state = state;
    v->arena_len += n;
    v->used++;
    return c;
}

/* Vectorizer.vector(text: str, sublinear: bool) -> bytes: the packed vector of a normalised
 * text, identical to vectorize(TOKEN_PATTERN.findall(text), table, miss, sublinear). */
static PyObject *vz_vector(Vectorizer *v, PyObject *args) {
    PyObject *text;
    int sublinear;
    if (!PyArg_ParseTuple(args, "Up", &text, &sublinear)) return NULL;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t len = PyUnicode_GET_LENGTH(text), pos = 0, a, b;
    /* The scratch counter is reused (and left zeroed) across calls; a re-entrant call (from
     * the miss callback) gets a fresh one. */
    int own = !v->busy;
    size_t cap = own && v->scratch ? v->scratch_cap : 256;
    Slot *slots = own && v->scratch ? v->scratch : PyMem_Calloc(cap, sizeof(Slot));
    if (!slots) return PyErr_NoMemory();
    if (own) {
        v->scratch = slots;
        v->scratch_cap = cap;
        v->busy = 1;
    }
    PyObject *out = NULL;
    size_t used = 0, mask = cap - 1;
    while (next_token(kind, data, len, &pos, &a, &b)) {
        Cell *c = vz_lookup(v, text, kind, data, a, b);
        if (!c) goto done;
        if (c->state != TERM) continue;
        uint64_t h = c->term_hash;
        size_t k = (size_t)(h ^ (h >> 29)) & mask;
        while (slots[k].used && slots[k].hash != h) k = (k + 1) & mask;
        if (!slots[k].used) {
            slots[k].used = 1;
            slots[k].hash = h;
            slots[k].idf = c->idf;
            used++;
            if (used * 2 > cap) { /* keep the load under 1/2 */
                size_t ncap = cap * 2, nmask = ncap - 1;
                Slot *ns = PyMem_Calloc(ncap, sizeof(Slot));
                if (!ns) {
                    PyErr_NoMemory();
                    goto done;
                }
                for (size_t q = 0; q < cap; q++) {
                    if (!slots[q].used) continue;
                    uint64_t hh = slots[q].hash;
                    size_t j = (size_t)(hh ^ (hh >> 29)) & nmask;
                    while (ns[j].used) j = (j + 1) & nmask;
                    ns[j] = slots[q];
                    if (q == k) k = j;
                }
                PyMem_Free(slots);
                slots = ns;
                cap = ncap;
                mask = nmask;
                if (own) {
                    v->scratch = slots;
                    v->scratch_cap = cap;
                }
            }
        }
        slots[k].count += 1.0;
    }
    out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(used * sizeof(Term)));
    if (!out) goto done;
    Term *terms = (Term *)PyBytes_AS_STRING(out);
    size_t j = 0;
    for (size_t k = 0; k < cap && j < used; k++) {
        if (!slots[k].used) continue;
        terms[j].hash = slots[k].hash;
        terms[j].tfw = sublinear ? 1.0 + log(slots[k].count) : slots[k].count;
        terms[j].idf = slots[k].idf;
        slots[k].used = 0;
        slots[k].count = 0.0;
        j++;
    }
    sort_terms(terms, used);
done:
    if (own) {
        if (out == NULL) memset(slots, 0, cap * sizeof(Slot)); /* an error left it dirty */
        if (cap > 65536) { /* don't keep the counter of a huge text */
            PyMem_Free(slots);
            v->scratch = NULL;
            v->scratch_cap = 0;
        }
        v->busy = 0;
    } else {
        PyMem_Free(slots);
    }
    return out;
}

static PyObject *vz_clear(Vectorizer *v, PyObject *unused) {
    if (vz_alloc(v, 1024) < 0) return NULL;
    Py_RETURN_NONE;
}

static Py_ssize_t vz_len(Vectorizer *v) { return (Py_ssize_t)v->used; }

static PyMethodDef vz_methods[] = {
    {"vector", (PyCFunction)vz_vector, METH_VARARGS, "Packed vector of a normalised text."},
    {"clear", (PyCFunction)vz_clear, METH_NOARGS, "Forget every cached token."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods vz_seq = {.sq_length = (lenfunc)vz_len};

static PyTypeObject VectorizerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "simeval._fast.Vectorizer",
    .tp_basicsize = sizeof(Vectorizer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)vz_init,
    .tp_dealloc = (destructor)vz_dealloc,
    .tp_methods = vz_methods,
    .tp_as_sequence = &vz_seq,
    .tp_doc = "Vectorizer(miss, limit=2000000): tokenizer with a C token cache.",
};

static PyMethodDef methods[] = {
    {"vectorize", vectorize, METH_VARARGS, "Pack a token list into a sorted term vector."},
    {"cosine", cosine, METH_VARARGS, "Cosine of two packed term vectors."},
    {"best", best, METH_VARARGS, "Best cosine of one packed vector against many."},
    {"tokenize", tokenize, METH_O, "Tokens of a normalised text (analyzer.TOKEN_PATTERN)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fast", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fast(void) {
    if (PyType_Ready(&VectorizerType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "Vectorizer", (PyObject *)&VectorizerType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
