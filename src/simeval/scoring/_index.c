/*
 * An exact inverted index over prepared reference vectors: one output scored against every
 * reference of a set of evals at once (capture with 1,000 active evals, data-set runs).
 *
 * `_fast.c`'s cosine_packed walks the two sorted vectors side by side. For one reference the
 * dot product it returns is the sum, in increasing term-hash order, of wa * wb over the shared
 * terms, and the norms are sums of squares in the same order. The index visits the output's
 * terms in that same order and adds wa * wb to each reference that has the term, so every
 * reference receives the same additions in the same order: the scores are bit-identical to
 * cosine_packed (non-pair IDF), not merely close. The reference norms are computed once, the
 * same way. References the output shares no term with cost nothing.
 *
 * The question's terms (input_weight) and negation follow Scorer.best_vector's formula: a
 * reference that contains one of the question's terms has its norm changed by the question, so
 * it is scored by the full merged walk with the question's weights (cosine_packed of
 * _cosine.h, the function _fast.c scores with); the others share the index pass, with the output's norm taken with
 * the question's weights. The negation factor is applied next, as score_packed does, and the
 * `bands` curve (when given) last, per reference, as _fast.best does.
 *
 * Index(prepared: sequence[bytes], offsets: bytes, negators: bytes = b"", negation: float = 1,
 *       curve: bytes = b"")
 *   offsets are int32 [n_evals + 1]: the references of eval e are
 *   prepared[offsets[e]:offsets[e + 1]]; negators are sorted uint64 hashes.
 * Index.best(vec: bytes, demote: bytes = b"", input_weight: float = 1, curve: bytes = b"")
 *   -> (scores: bytes of float64, at: bytes of int32), one per eval: the best score and the
 *   first reference reaching it, as `_fast.best` gives. `curve`, when not empty, replaces the
 *   index's curve for this call: a question-answer pair's (twelve float64, the answer knots
 *   last), under which each reference's coverage is accumulated beside its dot product.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_cosine.h"

typedef struct {
    uint64_t hash;
    uint32_t start; /* first posting */
    uint32_t count; /* 0: empty slot */
} Bucket;

typedef struct {
    PyObject_HEAD
    PyObject *refs;      /* tuple of the prepared bytes, kept alive for the equality check */
    Py_ssize_t nrefs;
    Py_ssize_t nevals;
    int32_t *offsets;    /* nevals + 1 */
    double *root_sb;     /* sqrt of each reference's sum of squares */
    double *sb;          /* the sum itself: zero means "no weight" as in cosine_packed */
    Bucket *table;
    size_t mask;
    uint32_t *post_ref;
    double *post_w;
    double *acc;         /* scratch: one dot product per reference */
    double *cov;         /* scratch: per reference, its squared weight the output holds */
    double *prec;        /* scratch: per reference, the output's squared weight on its terms */
    unsigned char *mark; /* scratch: references holding a term of the question */
    unsigned char *neg;  /* per reference: it has a negator term */
    uint64_t *negators;
    size_t nneg;
    double negation;
    Bands bands; /* the `bands` scale applied to each reference's score (off: the cosine) */
} Index;

typedef struct {
    uint64_t hash;
    uint32_t ref;
    double w;
} Triple;

static int triple_cmp(const void *x, const void *y) {
    const Triple *a = x, *b = y;
    if (a->hash != b->hash) return a->hash < b->hash ? -1 : 1;
    return a->ref < b->ref ? -1 : (a->ref > b->ref);
}

static void index_free(Index *ix) {
    Py_CLEAR(ix->refs);
    PyMem_Free(ix->offsets);
    PyMem_Free(ix->root_sb);
    PyMem_Free(ix->sb);
    PyMem_Free(ix->table);
    PyMem_Free(ix->post_ref);
    PyMem_Free(ix->post_w);
    PyMem_Free(ix->acc);
    PyMem_Free(ix->cov);
    PyMem_Free(ix->prec);
    PyMem_Free(ix->mark);
    PyMem_Free(ix->neg);
    PyMem_Free(ix->negators);
    ix->mark = ix->neg = NULL;
    ix->negators = NULL;
    ix->nneg = 0;
    ix->offsets = NULL;
    ix->root_sb = ix->sb = ix->post_w = ix->acc = ix->cov = ix->prec = NULL;
    ix->table = NULL;
    ix->post_ref = NULL;
}

static int index_init(Index *ix, PyObject *args, PyObject *kwds) {
    PyObject *prepared;
    Py_buffer off, negb = {0}, cur = {0};
    double negation = 1.0;
    if (!PyArg_ParseTuple(args, "Oy*|y*dy*", &prepared, &off, &negb, &negation, &cur)) return -1;
    index_free(ix);
    ix->negation = negation;
    int rc = -1;
    Triple *triples = NULL;
    if (bands_from(cur.obj ? cur.buf : NULL, cur.obj ? (size_t)cur.len : 0, &ix->bands) < 0) {
        PyErr_SetString(PyExc_ValueError, "a bands curve is 9 or 17 packed float64");
        goto done;
    }
    ix->refs = PySequence_Tuple(prepared);
    if (!ix->refs) goto done;
    ix->nrefs = PyTuple_GET_SIZE(ix->refs);
    if (off.len % sizeof(int32_t) != 0 || off.len < (Py_ssize_t)sizeof(int32_t)) {
        PyErr_SetString(PyExc_ValueError, "offsets must be int32 [n_evals + 1]");
        goto done;
    }
    ix->nevals = off.len / (Py_ssize_t)sizeof(int32_t) - 1;
    ix->offsets = PyMem_Malloc(off.len);
    if (!ix->offsets) goto nomem;
    memcpy(ix->offsets, off.buf, off.len);
    if (ix->offsets[0] != 0 || ix->offsets[ix->nevals] != ix->nrefs) {
        PyErr_SetString(PyExc_ValueError, "offsets must start at 0 and end at len(prepared)");
        goto done;
    }
    for (Py_ssize_t e = 0; e < ix->nevals; e++) {
        if (ix->offsets[e + 1] < ix->offsets[e]) {
            PyErr_SetString(PyExc_ValueError, "offsets must not decrease");
            goto done;
        }
    }
    size_t nref = (size_t)ix->nrefs;
    ix->root_sb = PyMem_Malloc((nref + 1) * sizeof(double));
    ix->sb = PyMem_Malloc((nref + 1) * sizeof(double));
    ix->acc = PyMem_Calloc(nref + 1, sizeof(double));
    ix->cov = PyMem_Calloc(nref + 1, sizeof(double));
    ix->prec = PyMem_Calloc(nref + 1, sizeof(double));
    ix->mark = PyMem_Calloc(nref + 1, 1);
    ix->neg = PyMem_Calloc(nref + 1, 1);
    if (!ix->root_sb || !ix->sb || !ix->acc || !ix->cov || !ix->prec || !ix->mark || !ix->neg) goto nomem;
    if (negb.obj != NULL && negb.len > 0) {
        if (negb.len % 8) {
            PyErr_SetString(PyExc_ValueError, "negators must be packed uint64 hashes");
            goto done;
        }
        ix->nneg = (size_t)negb.len / 8;
        ix->negators = PyMem_Malloc(negb.len);
        if (!ix->negators) goto nomem;
        memcpy(ix->negators, negb.buf, negb.len);
    }
    size_t total = 0;
    for (size_t r = 0; r < nref; r++) {
        PyObject *b = PyTuple_GET_ITEM(ix->refs, r);
        if (!PyBytes_Check(b) || PyBytes_GET_SIZE(b) % sizeof(Term) != 0) {
            PyErr_SetString(PyExc_TypeError, "prepared vectors must be packed bytes");
            goto done;
        }
        total += (size_t)PyBytes_GET_SIZE(b) / sizeof(Term);
    }
    if (total >= UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "too many reference terms for one index");
        goto done;
    }
    triples = PyMem_Malloc((total + 1) * sizeof(Triple));
    if (!triples) goto nomem;
    size_t k = 0;
    for (size_t r = 0; r < nref; r++) {
        PyObject *b = PyTuple_GET_ITEM(ix->refs, r);
        const Term *t = (const Term *)PyBytes_AS_STRING(b);
        size_t n = (size_t)PyBytes_GET_SIZE(b) / sizeof(Term);
        double sb = 0.0;
        for (size_t j = 0; j < n; j++) {
            /* the same expression and order as cosine_packed */
            double w = t[j].tfw * t[j].idf;
            sb += w * w;
            triples[k].hash = t[j].hash;
            triples[k].ref = (uint32_t)r;
            triples[k].w = w;
            k++;
        }
        ix->sb[r] = sb;
        ix->root_sb[r] = sqrt(sb);
        ix->neg[r] = ix->nneg ? (unsigned char)has_any(t, n, (HashSet){ix->negators, ix->nneg}) : 0;
    }
    qsort(triples, total, sizeof(Triple), triple_cmp);
    size_t distinct = 0;
    for (size_t i = 0; i < total; i++)
        if (i == 0 || triples[i].hash != triples[i - 1].hash) distinct++;
    size_t cap = 16;
    while (cap < distinct * 2) cap <<= 1;
    ix->mask = cap - 1;
    ix->table = PyMem_Calloc(cap, sizeof(Bucket));
    ix->post_ref = PyMem_Malloc((total + 1) * sizeof(uint32_t));
    ix->post_w = PyMem_Malloc((total + 1) * sizeof(double));
    if (!ix->table || !ix->post_ref || !ix->post_w) goto nomem;
    for (size_t i = 0; i < total;) {
        size_t j = i;
        uint64_t h = triples[i].hash;
        while (j < total && triples[j].hash == h) {
            ix->post_ref[j] = triples[j].ref;
            ix->post_w[j] = triples[j].w;
            j++;
        }
        size_t slot = (size_t)(h ^ (h >> 29)) & ix->mask;
        while (ix->table[slot].count != 0) slot = (slot + 1) & ix->mask;
        ix->table[slot].hash = h;
        ix->table[slot].start = (uint32_t)i;
        ix->table[slot].count = (uint32_t)(j - i);
        i = j;
    }
    rc = 0;
    goto done;
nomem:
    PyErr_NoMemory();
done:
    PyMem_Free(triples);
    PyBuffer_Release(&off);
    if (negb.obj != NULL) PyBuffer_Release(&negb);
    if (cur.obj != NULL) PyBuffer_Release(&cur);
    if (rc != 0) index_free(ix);
    return rc;
}

static void index_dealloc(Index *ix) {
    index_free(ix);
    Py_TYPE(ix)->tp_free((PyObject *)ix);
}

static const Bucket *lookup(const Index *ix, uint64_t h) {
    size_t slot = (size_t)(h ^ (h >> 29)) & ix->mask;
    while (ix->table[slot].count != 0) {
        if (ix->table[slot].hash == h) return &ix->table[slot];
        slot = (slot + 1) & ix->mask;
    }
    return NULL;
}

static PyObject *index_best(Index *ix, PyObject *args) {
    Py_buffer a, demb = {0}, curb = {0};
    double iw = 1.0;
    if (!ix->offsets) {
        PyErr_SetString(PyExc_RuntimeError, "Index not initialised");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "y*|y*dy*", &a, &demb, &iw, &curb)) return NULL;
    /* a curve given here (a question-answer pair's, with its answer knots) replaces the
     * index's own for this call */
    Bands bands = ix->bands;
    if (curb.obj != NULL) {
        int bad = curb.len > 0 && bands_from(curb.buf, (size_t)curb.len, &bands) < 0;
        PyBuffer_Release(&curb);
        if (bad) {
            PyErr_SetString(PyExc_ValueError, "a bands curve is 9 or 17 packed float64");
            PyBuffer_Release(&a);
            if (demb.obj != NULL) PyBuffer_Release(&demb);
            return NULL;
        }
    }
    int answering = bands.on && bands.answer;
    HashSet dem = {NULL, 0};
    if (demb.obj != NULL) {
        if (demb.len % 8) {
            PyErr_SetString(PyExc_ValueError, "demote must be packed uint64 hashes");
            PyBuffer_Release(&a);
            PyBuffer_Release(&demb);
            return NULL;
        }
        dem.h = (const uint64_t *)demb.buf;
        dem.n = (size_t)demb.len / 8;
    }
    int demoting = iw != 1.0 && dem.n > 0;
    /* the merged walk of _cosine.h for the references holding a term of the question; the
     * negation factor is applied below for every reference alike */
    CosOpts opts = {0, dem, iw, {NULL, 0}, 1.0};
    const Term *t = (const Term *)a.buf;
    size_t na = (size_t)a.len / sizeof(Term);
    size_t nref = (size_t)ix->nrefs;
    double *acc = ix->acc;
    memset(acc, 0, nref * sizeof(double));
    double *cv = ix->cov, *pv = ix->prec;
    if (answering) {
        memset(cv, 0, nref * sizeof(double));
        memset(pv, 0, nref * sizeof(double));
    }
    if (demoting) {
        /* the references holding a term of the question: scored by the full walk below */
        memset(ix->mark, 0, nref);
        for (size_t k = 0; k < dem.n; k++) {
            const Bucket *bk = lookup(ix, dem.h[k]);
            if (!bk) continue;
            for (uint32_t p = 0; p < bk->count; p++) ix->mark[ix->post_ref[bk->start + p]] = 1;
        }
    }
    double sa = 0.0;
    size_t d = 0;
    for (size_t i = 0; i < na; i++) {
        double wa = t[i].tfw * t[i].idf;
        uint64_t h = t[i].hash;
        if (demoting) {
            while (d < dem.n && dem.h[d] < h) d++;
            if (d < dem.n && dem.h[d] == h) wa *= iw;
        }
        sa += wa * wa;
        const Bucket *bk = lookup(ix, h);
        if (bk) {
            const uint32_t *pr = ix->post_ref + bk->start;
            const double *pw = ix->post_w + bk->start;
            uint32_t c = bk->count;
            for (uint32_t p = 0; p < c; p++) acc[pr[p]] += wa * pw[p];
            if (answering) {
                double wa2 = wa * wa;
                for (uint32_t p = 0; p < c; p++) {
                    cv[pr[p]] += pw[p] * pw[p];
                    pv[pr[p]] += wa2;
                }
            }
        }
    }
    double root_sa = sqrt(sa);
    int negating = ix->negation != 1.0 && ix->nneg > 0;
    int neg_a = negating ? has_any(t, na, (HashSet){ix->negators, ix->nneg}) : 0;
    PyObject *scores = PyBytes_FromStringAndSize(NULL, ix->nevals * (Py_ssize_t)sizeof(double));
    PyObject *at = PyBytes_FromStringAndSize(NULL, ix->nevals * (Py_ssize_t)sizeof(int32_t));
    if (!scores || !at) {
        Py_XDECREF(scores);
        Py_XDECREF(at);
        PyBuffer_Release(&a);
        if (demb.obj != NULL) PyBuffer_Release(&demb);
        return NULL;
    }
    double *out = (double *)PyBytes_AS_STRING(scores);
    int32_t *where = (int32_t *)PyBytes_AS_STRING(at);
    for (Py_ssize_t e = 0; e < ix->nevals; e++) {
        double top = -1.0;
        int32_t best_at = -1;
        for (int32_t r = ix->offsets[e]; r < ix->offsets[e + 1]; r++) {
            PyObject *b = PyTuple_GET_ITEM(ix->refs, r);
            const Term *tb = (const Term *)PyBytes_AS_STRING(b);
            size_t nb = (size_t)PyBytes_GET_SIZE(b) / sizeof(Term);
            double s;
            Cover cov = {0.0, 0.0};
            if (demoting && ix->mark[r]) {
                s = cosine_cov(t, na, tb, nb, &opts, &cov);
            } else if (na == 0 || nb == 0) {
                s = 0.0;
            } else if (na == nb && memcmp(t, tb, na * sizeof(Term)) == 0) {
                s = 1.0;
                cov.cov = cov.prec = 1.0;
            } else if (sa <= 0.0 || ix->sb[r] <= 0.0) {
                s = 0.0;
            } else {
                s = acc[r] / (root_sa * ix->root_sb[r]);
                s = s < 0.0 ? 0.0 : (s > 1.0 ? 1.0 : s);
                if (answering) {
                    cov.cov = coverage_of(cv[r], ix->sb[r]);
                    cov.prec = coverage_of(pv[r], sa);
                }
            }
            if (negating && s > 0.0 && neg_a != ix->neg[r]) s *= ix->negation;
            s = final_score(s, &cov, na, nb, &bands);
            if (s > top) {
                top = s;
                best_at = r - ix->offsets[e];
            }
        }
        out[e] = best_at < 0 ? 0.0 : top;
        where[e] = best_at;
    }
    PyBuffer_Release(&a);
    if (demb.obj != NULL) PyBuffer_Release(&demb);
    return Py_BuildValue("(NN)", scores, at);
}

static Py_ssize_t index_len(Index *ix) { return ix->nevals; }

static PyMethodDef index_methods[] = {
    {"best", (PyCFunction)index_best, METH_VARARGS,
     "best(vec, demote=b'', input_weight=1.0) -> (scores, at): per eval, the best score "
     "(float64) and its reference (int32)."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods index_seq = {.sq_length = (lenfunc)index_len};

static PyTypeObject IndexType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "simeval.scoring._index.Index",
    .tp_basicsize = sizeof(Index),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)index_init,
    .tp_dealloc = (destructor)index_dealloc,
    .tp_methods = index_methods,
    .tp_as_sequence = &index_seq,
    .tp_doc = "Index(prepared, offsets): an exact inverted index over prepared references.",
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_index", NULL, -1, NULL};

PyMODINIT_FUNC PyInit__index(void) {
    if (PyType_Ready(&IndexType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "Index", (PyObject *)&IndexType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
