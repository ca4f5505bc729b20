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

#include "_cosine.h"

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

static int hash_set(Py_buffer *buf, HashSet *out) {
    if (buf->obj == NULL) {
        out->h = NULL;
        out->n = 0;
        return 0;
    }
    if (buf->len % 8) {
        PyErr_SetString(PyExc_ValueError, "a hash set is packed uint64 values");
        return -1;
    }
    out->h = (const uint64_t *)buf->buf;
    out->n = (size_t)buf->len / 8;
    return 0;
}

/* Parse (pair, demote=None, input_weight=1.0, negators=None, negation=1.0, curve=None) after
 * the vectors; curve: the packed `bands` curve (None or b"": the raw cosine). */
#define COS_FORMAT "p|z*dz*dz*"

static int curve_of(Py_buffer *buf, Bands *out) {
    if (bands_from(buf->obj ? buf->buf : NULL, buf->obj ? (size_t)buf->len : 0, out) < 0) {
        PyErr_SetString(PyExc_ValueError, "a bands curve is 9 or 17 packed float64");
        return -1;
    }
    return 0;
}

static void release(Py_buffer *b) {
    if (b->obj != NULL) PyBuffer_Release(b);
}

/* An argument read as bytes: a bytes object directly (the usual case, and no buffer to
 * release), None as nothing when `none_ok`, anything else through the buffer protocol. */
static int arg_buffer(PyObject *obj, Py_buffer *view, int none_ok, const char *what) {
    if (PyBytes_Check(obj)) {
        view->obj = NULL; /* nothing to release */
        view->buf = PyBytes_AS_STRING(obj);
        view->len = PyBytes_GET_SIZE(obj);
        return 0;
    }
    if (obj == Py_None && none_ok) {
        view->obj = NULL;
        view->buf = NULL;
        view->len = 0;
        return 0;
    }
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0) {
        PyErr_Format(PyExc_TypeError, "cosine() argument '%s' must be a bytes-like object%s",
                     what, none_ok ? " or None" : "");
        return -1;
    }
    return 0;
}

/* As hash_set, for a view from arg_buffer. */
static int hash_set_of(const Py_buffer *buf, HashSet *out) {
    if (buf->len % 8) {
        PyErr_SetString(PyExc_ValueError, "a hash set is packed uint64 values");
        return -1;
    }
    out->h = (const uint64_t *)buf->buf;
    out->n = (size_t)buf->len / 8;
    return 0;
}

/* cosine(a, b, pair, demote=None, input_weight=1.0, negators=None, negation=1.0,
 * curve=None) -> float. Called once per pair by Scorer.score: its arguments are read without
 * PyArg_ParseTuple, whose format parsing and buffer requests cost more than a short pair's
 * cosine. */
static PyObject *cosine(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    static const char *names[] = {"a", "b", "demote", "negators", "curve"};
    if (nargs < 3 || nargs > 8) {
        PyErr_Format(PyExc_TypeError, "cosine() takes from 3 to 8 arguments (%zd given)", nargs);
        return NULL;
    }
    Py_buffer v[5] = {{0}}; /* a, b, demote, negators, curve */
    PyObject *src[5] = {args[0], args[1], nargs > 3 ? args[3] : Py_None,
                        nargs > 5 ? args[5] : Py_None, nargs > 7 ? args[7] : Py_None};
    CosOpts o = {0, {NULL, 0}, 1.0, {NULL, 0}, 1.0};
    Bands bands;
    PyObject *out = NULL;
    int got = 0;
    for (; got < 5; got++)
        if (arg_buffer(src[got], &v[got], got >= 2, names[got]) < 0) goto done;
    o.pair = PyObject_IsTrue(args[2]);
    if (o.pair < 0) goto done;
    if (nargs > 4) {
        o.input_weight = PyFloat_AsDouble(args[4]);
        if (o.input_weight == -1.0 && PyErr_Occurred()) goto done;
    }
    if (nargs > 6) {
        o.negation = PyFloat_AsDouble(args[6]);
        if (o.negation == -1.0 && PyErr_Occurred()) goto done;
    }
    if (hash_set_of(&v[2], &o.demote) < 0 || hash_set_of(&v[3], &o.negators) < 0) goto done;
    if (bands_from(v[4].buf, (size_t)v[4].len, &bands) < 0) {
        PyErr_SetString(PyExc_ValueError, "a bands curve is 9 or 17 packed float64");
        goto done;
    }
    size_t na = (size_t)v[0].len / sizeof(Term), nb = (size_t)v[1].len / sizeof(Term);
    Cover cv;
    double s = score_packed((const Term *)v[0].buf, na, (const Term *)v[1].buf, nb, &o, -1, &cv);
    out = PyFloat_FromDouble(final_score(s, &cv, na, nb, &bands));
done:
    for (int i = 0; i < got; i++) release(&v[i]);
    return out;
}

/* bands(cosine, n_out, n_ref, curve) -> float: the `bands` score of a cosine. */
static PyObject *py_bands(PyObject *self, PyObject *args) {
    double c;
    Py_ssize_t n_out, n_ref;
    Py_buffer cur = {0};
    Bands bands;
    if (!PyArg_ParseTuple(args, "dnnz*", &c, &n_out, &n_ref, &cur)) return NULL;
    PyObject *out = NULL;
    if (curve_of(&cur, &bands) == 0)
        out = PyFloat_FromDouble(bands_score(c, n_out > 0 ? (size_t)n_out : 0,
                                             n_ref > 0 ? (size_t)n_ref : 0, &bands));
    release(&cur);
    return out;
}

/* best(a, refs, pair, demote=None, input_weight=1.0, negators=None, negation=1.0, curve=None)
 * -> (score, index): the best match of one vector against many prepared ones, first index on
 * ties. */
static PyObject *best(PyObject *self, PyObject *args) {
    Py_buffer a, dem = {0}, neg = {0}, cur = {0};
    PyObject *refs, *result = NULL, *seq = NULL;
    CosOpts o = {0, {NULL, 0}, 1.0, {NULL, 0}, 1.0};
    Bands bands;
    if (!PyArg_ParseTuple(args, "y*O" COS_FORMAT, &a, &refs, &o.pair, &dem, &o.input_weight, &neg,
                          &o.negation, &cur))
        return NULL;
    if (hash_set(&dem, &o.demote) < 0 || hash_set(&neg, &o.negators) < 0 ||
        curve_of(&cur, &bands) < 0)
        goto done;
    seq = PySequence_Fast(refs, "refs must be a sequence of bytes");
    if (!seq) goto done;
    const Term *ta = (const Term *)a.buf;
    size_t na = (size_t)a.len / sizeof(Term);
    int neg_a = o.negation != 1.0 && o.negators.n ? has_any(ta, na, o.negators) : 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    double top = -1.0;
    Py_ssize_t at = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyBytes_Check(r)) {
            PyErr_SetString(PyExc_TypeError, "refs must be bytes");
            goto done;
        }
        size_t nb = (size_t)PyBytes_GET_SIZE(r) / sizeof(Term);
        Cover cv;
        double s = score_packed(ta, na, (const Term *)PyBytes_AS_STRING(r), nb, &o, neg_a, &cv);
        s = final_score(s, &cv, na, nb, &bands);
        if (s > top) {
            top = s;
            at = i;
        }
    }
    result = Py_BuildValue("(dn)", at < 0 ? 0.0 : top, at);
done:
    Py_XDECREF(seq);
    PyBuffer_Release(&a);
    release(&dem);
    release(&neg);
    release(&cur);
    return result;
}

/* has_any(vec: bytes, hashes: bytes) -> bool: whether the vector has one of the hashes. */
static PyObject *py_has_any(PyObject *self, PyObject *args) {
    Py_buffer a, s;
    if (!PyArg_ParseTuple(args, "y*y*", &a, &s)) return NULL;
    HashSet hs;
    PyObject *out = NULL;
    if (hash_set(&s, &hs) == 0)
        out = PyBool_FromLong(has_any((const Term *)a.buf, (size_t)a.len / sizeof(Term), hs));
    PyBuffer_Release(&a);
    PyBuffer_Release(&s);
    return out;
}

/* absent(vec: bytes, hashes: bytes, top: int) -> list[int]: the positions in `hashes` (packed
 * uint64, any order: a reference's terms ranked for "missing terms") of the first `top` hashes
 * the vector does not have, in that order; a binary search of the vector's sorted records per
 * hash. `_vector.absent_py` is the reference. */
static PyObject *py_absent(PyObject *self, PyObject *args) {
    Py_buffer a, h;
    Py_ssize_t top;
    if (!PyArg_ParseTuple(args, "y*y*n", &a, &h, &top)) return NULL;
    const Term *t = (const Term *)a.buf;
    size_t n = (size_t)a.len / sizeof(Term);
    const uint64_t *want = (const uint64_t *)h.buf;
    size_t m = (size_t)h.len / sizeof(uint64_t);
    PyObject *out = PyList_New(0);
    for (size_t i = 0; out != NULL && i < m && PyList_GET_SIZE(out) < top; i++) {
        uint64_t x = want[i];
        size_t lo = 0, hi = n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (t[mid].hash < x) lo = mid + 1;
            else hi = mid;
        }
        if (lo < n && t[lo].hash == x) continue;
        PyObject *pos = PyLong_FromSize_t(i);
        if (pos == NULL || PyList_Append(out, pos) < 0) Py_CLEAR(out);
        Py_XDECREF(pos);
    }
    PyBuffer_Release(&a);
    PyBuffer_Release(&h);
    return out;
}

/* rank(vec: bytes, words: dict) -> (bytes, list): the vector's term hashes (packed uint64)
 * and their words (words[hash], a str each), heaviest first by tf x idf, ties by word: the
 * order of Python's sorted((-tfw * idf, word, hash)). Names a reference's missing terms. */
typedef struct {
    double w;
    PyObject *word; /* borrowed from the dict */
    uint64_t h;
} RankItem;

static int rank_cmp(const void *x, const void *y) {
    const RankItem *a = x, *b = y;
    if (a->w != b->w) return a->w > b->w ? -1 : 1;
    int c = PyUnicode_Compare(a->word, b->word); /* two str: no error */
    if (c != 0) return c;
    return (a->h > b->h) - (a->h < b->h);
}

static PyObject *py_rank(PyObject *self, PyObject *args) {
    Py_buffer a;
    PyObject *words, *packed = NULL, *list = NULL;
    if (!PyArg_ParseTuple(args, "y*O!", &a, &PyDict_Type, &words)) return NULL;
    const Term *t = (const Term *)a.buf;
    size_t n = (size_t)a.len / sizeof(Term);
    RankItem *items = PyMem_Malloc((n ? n : 1) * sizeof(RankItem));
    if (!items) {
        PyBuffer_Release(&a);
        return PyErr_NoMemory();
    }
    for (size_t i = 0; i < n; i++) {
        PyObject *key = PyLong_FromUnsignedLongLong(t[i].hash);
        PyObject *word = key ? PyDict_GetItemWithError(words, key) : NULL;
        if (word == NULL && key != NULL && !PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, key);
        Py_XDECREF(key);
        if (word == NULL) goto done;
        if (!PyUnicode_Check(word)) {
            PyErr_SetString(PyExc_TypeError, "words must map each term hash to a str");
            goto done;
        }
        items[i].w = t[i].tfw * t[i].idf;
        items[i].word = word;
        items[i].h = t[i].hash;
    }
    qsort(items, n, sizeof(RankItem), rank_cmp);
    packed = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * sizeof(uint64_t)));
    list = PyList_New((Py_ssize_t)n);
    if (!packed || !list) goto done;
    uint64_t *out = (uint64_t *)PyBytes_AS_STRING(packed);
    for (size_t i = 0; i < n; i++) {
        out[i] = items[i].h;
        Py_INCREF(items[i].word);
        PyList_SET_ITEM(list, (Py_ssize_t)i, items[i].word);
    }
    PyMem_Free(items);
    PyBuffer_Release(&a);
    return Py_BuildValue("(NN)", packed, list);
done:
    Py_XDECREF(packed);
    Py_XDECREF(list);
    PyMem_Free(items);
    PyBuffer_Release(&a);
    return NULL;
}

/* ---- Characters ---------------------------------------------------------------------------
 * What the tokenizer and the normaliser need to know of a code point comes from
 * analyzer.char_info (Python's unicodedata, so both sides read the same Unicode version),
 * asked once per code point and kept in a two-level table. The flags have the values of
 * analyzer.CI_*; KNOWN marks a filled entry. ASCII is answered from a static table. */
#define CI_MAP 0x1FFFFFu
#define CI_SIMPLE (1u << 21)
#define CI_WORD (1u << 22)
#define CI_DEC (1u << 23)
#define CI_CJK (1u << 24)
#define CI_SYM (1u << 25)
#define CI_KNOWN (1u << 31)
#define CI_PAGES (0x110000 >> 8)

/* ASCII classes: \w and \d of Python's re. */
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

enum { EMPTY = 0, TERM = 1, STOP = 2 };

typedef struct {
    uint64_t key_hash;
    uint64_t short_key; /* a token of <= 8 Latin-1 characters, packed: no arena read to check */
    uint32_t off, len;  /* the token's code points in the arena */
    uint64_t term_hash;
    double idf;
    int state;
} Cell;

/* The buffers of one call. */
typedef struct {
    Slot *scratch; /* the per-text term counter, kept zeroed between calls */
    size_t scratch_cap;
    void *norm;      /* the normalised text: Py_UCS1 for ASCII input, else Py_UCS4 */
    size_t norm_cap; /* bytes */
} Buf;

typedef struct {
    PyObject_HEAD
    PyObject *miss;      /* token -> 16 packed bytes (term hash, idf) or None */
    PyObject *char_info; /* code point -> flags (analyzer.char_info) */
    PyObject *fold;      /* str -> its normalised form (analyzer.normalize) */
    int unicode_tokens;  /* the `unicode` tokenizer (else `words`) */
    Cell *cells;
    size_t cap, used, limit;
    Py_UCS4 *arena;
    size_t arena_len, arena_cap;
    Buf buf;          /* kept between calls; a call made while it is in use (another thread,
                         during a Python callback) gets buffers of its own */
    uint32_t **pages; /* char_info per code point, 256 to a page */
    int busy;
} Vectorizer;

static void buf_trim(Buf *b, int all);

/* The char_info of a non-ASCII code point; 0 with an exception set on error. */
static uint32_t vz_info(Vectorizer *v, Py_UCS4 c) {
    uint32_t *page = v->pages ? v->pages[c >> 8] : NULL;
    if (page && (page[c & 0xFF] & CI_KNOWN)) return page[c & 0xFF];
    if (!v->pages) {
        v->pages = PyMem_Calloc(CI_PAGES, sizeof(uint32_t *));
        if (!v->pages) {
            PyErr_NoMemory();
            return 0;
        }
    }
    if (!page) {
        page = v->pages[c >> 8] = PyMem_Calloc(256, sizeof(uint32_t));
        if (!page) {
            PyErr_NoMemory();
            return 0;
        }
    }
    PyObject *r = PyObject_CallFunction(v->char_info, "I", (unsigned int)c);
    if (!r) return 0;
    unsigned long x = PyLong_AsUnsignedLong(r);
    Py_DECREF(r);
    if (x == (unsigned long)-1 && PyErr_Occurred()) return 0;
    page[c & 0xFF] = ((uint32_t)x & ~CI_KNOWN) | CI_KNOWN;
    return page[c & 0xFF];
}

/* The tokenizer's flags of a code point (CI_WORD, CI_DEC, CI_CJK, CI_SYM); 0 on error too. */
static inline uint32_t vz_flags(Vectorizer *v, Py_UCS4 c) {
    if (c < 128) {
        unsigned char k = ascii_class[c];
        return ((k & C_WORD) ? CI_WORD : 0) | ((k & C_DEC) ? CI_DEC : 0);
    }
    return vz_info(v, c);
}

static int norm_reserve(Buf *v, size_t bytes) {
    if (bytes <= v->norm_cap) return 0;
    size_t cap = v->norm_cap ? v->norm_cap : 4096;
    while (cap < bytes) cap *= 2;
    void *p = PyMem_Realloc(v->norm, cap);
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
    v->norm = p;
    v->norm_cap = cap;
    return 0;
}

/* Normalise `text` into v->norm, equal to analyzer.normalize(text): ASCII is lowered; a simple
 * character (CI_SIMPLE) becomes the character char_info gives; a run of other characters, with
 * the character before it, goes through `fold` (so only the pieces that need NFKC pay for
 * it). Sets *kind (1 or 4) and *len; -1 on error. */
static int vz_normalize(Vectorizer *v, Buf *buf, PyObject *text, int *kind, Py_ssize_t *len) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (PyUnicode_IS_ASCII(text)) {
        if (norm_reserve(buf, (size_t)n + 1) < 0) return -1;
        const Py_UCS1 *src = PyUnicode_1BYTE_DATA(text);
        Py_UCS1 *dst = buf->norm;
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_UCS1 c = src[i];
            dst[i] = (c >= 'A' && c <= 'Z') ? (Py_UCS1)(c + 32) : c;
        }
        *kind = PyUnicode_1BYTE_KIND;
        *len = n;
        return 0;
    }
    int sk = PyUnicode_KIND(text);
    const void *src = PyUnicode_DATA(text);
    size_t cap = (size_t)n + 16, out = 0;
    if (norm_reserve(buf, cap * sizeof(Py_UCS4)) < 0) return -1;
    for (Py_ssize_t i = 0; i < n;) {
        Py_UCS4 c = PyUnicode_READ(sk, src, i);
        if (c < 128) {
            ((Py_UCS4 *)buf->norm)[out++] = (c >= 'A' && c <= 'Z') ? c + 32 : c;
            i++;
            continue;
        }
        uint32_t info = vz_info(v, c);
        if (!info) return -1;
        if (info & CI_SIMPLE) {
            ((Py_UCS4 *)buf->norm)[out++] = info & CI_MAP;
            i++;
            continue;
        }
        /* a piece: the character before (always simple, one character out) and the run */
        Py_ssize_t start = i, j = i + 1;
        if (i > 0) {
            start = i - 1;
            out--;
        }
        while (j < n) {
            Py_UCS4 d = PyUnicode_READ(sk, src, j);
            if (d < 128) break;
            uint32_t di = vz_info(v, d);
            if (!di) return -1;
            if (di & CI_SIMPLE) break;
            j++;
        }
        PyObject *piece = PyUnicode_Substring(text, start, j);
        if (!piece) return -1;
        PyObject *folded = PyObject_CallOneArg(v->fold, piece);
        Py_DECREF(piece);
        if (!folded) return -1;
        if (!PyUnicode_Check(folded)) {
            Py_DECREF(folded);
            PyErr_SetString(PyExc_TypeError, "fold() must return str");
            return -1;
        }
        Py_ssize_t m = PyUnicode_GET_LENGTH(folded);
        size_t need = out + (size_t)m + (size_t)(n - j) + 16;
        if (need > cap) {
            cap = need * 2;
            if (norm_reserve(buf, cap * sizeof(Py_UCS4)) < 0) {
                Py_DECREF(folded);
                return -1;
            }
        }
        int fk = PyUnicode_KIND(folded);
        const void *fd = PyUnicode_DATA(folded);
        for (Py_ssize_t q = 0; q < m; q++) ((Py_UCS4 *)buf->norm)[out++] = PyUnicode_READ(fk, fd, q);
        Py_DECREF(folded);
        i = j;
    }
    *kind = PyUnicode_4BYTE_KIND;
    *len = (Py_ssize_t)out;
    return 0;
}

/* ---- Tokenizer: the C version of analyzer.split_tokens ------------------------------------
 * `words`: r"\d+(?:[.,]\d+)*|\w+". `unicode`: a number; one CJK character; a run of other word
 * characters, an English "n't" after it read as "not"; one non-ASCII symbol. The tests compare both on random text. */

typedef struct {
    Py_ssize_t a, b;     /* the span in the normalised text, or */
    const Py_UCS4 *word; /* a fixed word ("not") of `wlen` characters */
    Py_ssize_t wlen;
} Tok;

static const Py_UCS4 W_NOT[] = {'n', 'o', 't'};

typedef struct {
    Vectorizer *v;
    int kind;
    const void *data;
    Py_ssize_t len, pos;
    Tok pending; /* the "not" of a contraction, emitted after its first part */
    int has_pending;
} Scan;

/* The next token into *t: 1, 0 at the end, -1 on error. */
static int next_token(Scan *s, Tok *t) {
    if (s->has_pending) {
        *t = s->pending;
        s->has_pending = 0;
        return 1;
    }
    int kind = s->kind, uni = s->v->unicode_tokens;
    const void *data = s->data;
    Py_ssize_t len = s->len, i = s->pos;
    uint32_t f = 0;
    uint32_t start_mask = uni ? (CI_WORD | CI_SYM) : CI_WORD;
    for (; i < len; i++) {
        f = vz_flags(s->v, PyUnicode_READ(kind, data, i));
        if (!f && PyErr_Occurred()) return -1;
        if (f & start_mask) break;
    }
    if (i >= len) {
        s->pos = len;
        return 0;
    }
    t->word = NULL;
    t->a = i;
    if (!(f & CI_WORD)) { /* a symbol */
        t->b = s->pos = i + 1;
        return 1;
    }
    if (f & CI_DEC) {
        while (i < len && (vz_flags(s->v, PyUnicode_READ(kind, data, i)) & CI_DEC)) i++;
        while (i + 1 < len) {
            Py_UCS4 sep = PyUnicode_READ(kind, data, i);
            if ((sep == '.' || sep == ',') &&
                (vz_flags(s->v, PyUnicode_READ(kind, data, i + 1)) & CI_DEC)) {
                i += 1;
                while (i < len && (vz_flags(s->v, PyUnicode_READ(kind, data, i)) & CI_DEC)) i++;
            } else {
                break;
            }
        }
        if (PyErr_Occurred()) return -1;
        t->b = s->pos = i;
        return 1;
    }
    if (uni && (f & CI_CJK)) {
        t->b = s->pos = i + 1;
        return 1;
    }
    uint32_t stop = uni ? CI_CJK : 0;
    for (;;) {
        i++;
        if (i >= len) break;
        uint32_t g = vz_flags(s->v, PyUnicode_READ(kind, data, i));
        if (!g && PyErr_Occurred()) return -1;
        if (!(g & CI_WORD) || (g & stop)) break;
    }
    t->b = s->pos = i;
    if (uni && i + 1 < len && PyUnicode_READ(kind, data, i - 1) == 'n' &&
        PyUnicode_READ(kind, data, i + 1) == 't') {
        Py_UCS4 ap = PyUnicode_READ(kind, data, i);
        if (ap == '\'' || ap == 0x2019) {
            uint32_t g = i + 2 < len ? vz_flags(s->v, PyUnicode_READ(kind, data, i + 2)) : 0;
            if (!g && PyErr_Occurred()) return -1;
            if (!(g & CI_WORD)) { /* "n't": the word (with its n), then "not" */
                s->pos = i + 2;
                s->pending.word = W_NOT;
                s->pending.wlen = 3;
                s->has_pending = 1;
            }
        }
    }
    return 1;
}

/* ---- Vectorizer: tokenizer + a C hash table from token text to (term hash, idf) ---------
 * The table caches what the Python analyzer computes (stemming, truncation, stop words, IDF)
 * per distinct token, keyed by the token's code points: a hit costs no Python object at all.
 * That is what makes a warm score faster than tokenising with the regex alone. */

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
    PyObject *miss, *char_info, *fold;
    Py_ssize_t limit = 2000000;
    int unicode_tokens = 1;
    static char *names[] = {"miss", "char_info", "fold", "limit", "unicode_tokens", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|np", names, &miss, &char_info, &fold, &limit,
                                     &unicode_tokens))
        return -1;
    if (!PyCallable_Check(miss) || !PyCallable_Check(char_info) || !PyCallable_Check(fold)) {
        PyErr_SetString(PyExc_TypeError, "miss, char_info and fold must be callable");
        return -1;
    }
    Py_XSETREF(v->miss, Py_NewRef(miss));
    Py_XSETREF(v->char_info, Py_NewRef(char_info));
    Py_XSETREF(v->fold, Py_NewRef(fold));
    v->unicode_tokens = unicode_tokens;
    v->limit = (size_t)limit;
    return vz_alloc(v, 1024);
}

static void vz_dealloc(Vectorizer *v) {
    Py_XDECREF(v->miss);
    Py_XDECREF(v->char_info);
    Py_XDECREF(v->fold);
    PyMem_Free(v->cells);
    PyMem_Free(v->arena);
    buf_trim(&v->buf, 1);
    if (v->pages) {
        for (size_t p = 0; p < CI_PAGES; p++) PyMem_Free(v->pages[p]);
        PyMem_Free(v->pages);
    }
    Py_TYPE(v)->tp_free((PyObject *)v);
}

/* The cell of a token (characters a..b of kind/data), computing it through `miss` on first
 * sight; NULL on error. */
static Cell *vz_lookup(Vectorizer *v, int kind, const void *data, Py_ssize_t a, Py_ssize_t b) {
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
    PyObject *tok = PyUnicode_FromKindAndData(kind, (const char *)data + a * kind, b - a);
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

static Cell *tok_lookup(Vectorizer *v, const Scan *s, const Tok *t) {
    if (t->word) return vz_lookup(v, PyUnicode_4BYTE_KIND, t->word, 0, t->wlen);
    return vz_lookup(v, s->kind, s->data, t->a, t->b);
}

static PyObject *tok_str(const Scan *s, const Tok *t) {
    if (t->word) return PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, t->word, t->wlen);
    return PyUnicode_FromKindAndData(s->kind, (const char *)s->data + t->a * s->kind,
                                     t->b - t->a);
}

/* Buffers above these sizes are not kept after a call: a huge text must not leave a big
 * table that every later small text pays to scan (or a big normalised copy in memory). */
#define SCRATCH_KEEP 1024
#define NORM_KEEP (1 << 16)

static void buf_trim(Buf *b, int all) {
    if (all || b->norm_cap > NORM_KEEP) {
        PyMem_Free(b->norm);
        b->norm = NULL;
        b->norm_cap = 0;
    }
    if (all || b->scratch_cap > SCRATCH_KEEP) {
        PyMem_Free(b->scratch);
        b->scratch = NULL;
        b->scratch_cap = 0;
    }
}

/* The buffers for a call: the kept ones, or fresh ones when those are in use. */
static Buf *buf_take(Vectorizer *v, Buf *local) {
    if (v->busy) {
        memset(local, 0, sizeof(Buf));
        return local;
    }
    v->busy = 1;
    return &v->buf;
}

static void buf_give(Vectorizer *v, Buf *b) {
    if (b == &v->buf) {
        buf_trim(b, 0);
        v->busy = 0;
    } else {
        buf_trim(b, 1);
    }
}

/* Vectorizer.vector(text: str, sublinear: bool) -> bytes: the packed vector of a text (raw:
 * normalised here), identical to vectorize(analyzer.tokens(text), table, miss, sublinear). */
static PyObject *vz_vector(Vectorizer *v, PyObject *args) {
    PyObject *text;
    int sublinear;
    if (!PyArg_ParseTuple(args, "Up", &text, &sublinear)) return NULL;
    Buf local, *buf = buf_take(v, &local);
    Scan s = {v, 0, NULL, 0, 0, {0}, 0};
    PyObject *out = NULL;
    if (vz_normalize(v, buf, text, &s.kind, &s.len) < 0) {
        buf_give(v, buf);
        return NULL;
    }
    s.data = buf->norm;
    if (!buf->scratch) { /* the counter is left zeroed by every call */
        buf->scratch = PyMem_Calloc(256, sizeof(Slot));
        if (!buf->scratch) {
            buf_give(v, buf);
            return PyErr_NoMemory();
        }
        buf->scratch_cap = 256;
    }
    Slot *slots = buf->scratch;
    size_t cap = buf->scratch_cap, used = 0, mask = cap - 1;
    Tok t;
    int r;
    while ((r = next_token(&s, &t)) > 0) {
        Cell *c = tok_lookup(v, &s, &t);
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
                slots = buf->scratch = ns;
                cap = buf->scratch_cap = ncap;
                mask = nmask;
            }
        }
        slots[k].count += 1.0;
    }
    if (r < 0) goto done;
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
    if (out == NULL) memset(slots, 0, cap * sizeof(Slot)); /* an error left it dirty */
    buf_give(v, buf);
    return out;
}

/* Vectorizer.normalize(text) -> str and Vectorizer.tokens(text) -> list[str]: the two steps
 * of `vector` on their own, for the tests (against analyzer.normalize and Analyzer.tokens). */
static PyObject *vz_normalize_py(Vectorizer *v, PyObject *text) {
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "text must be str");
        return NULL;
    }
    int kind;
    Py_ssize_t len;
    Buf local, *buf = buf_take(v, &local);
    PyObject *out = NULL;
    if (vz_normalize(v, buf, text, &kind, &len) == 0)
        out = PyUnicode_FromKindAndData(kind, buf->norm, len);
    buf_give(v, buf);
    return out;
}

/* Adds token t to the list `out` (tokens) or, when its term is not in the dict `out` yet,
 * its term hash -> the token (first words); -1 on error. */
static int add_token(Vectorizer *v, const Scan *s, const Tok *t, PyObject *out, int words) {
    if (!words) {
        PyObject *w = tok_str(s, t);
        int r = w ? PyList_Append(out, w) : -1;
        Py_XDECREF(w);
        return r;
    }
    Cell *c = tok_lookup(v, s, t);
    if (!c) return -1;
    if (c->state != TERM) return 0;
    PyObject *key = PyLong_FromUnsignedLongLong(c->term_hash);
    int has = key ? PyDict_Contains(out, key) : -1;
    if (has == 0) {
        PyObject *w = tok_str(s, t);
        if (!w || PyDict_SetItem(out, key, w) < 0) has = -1;
        Py_XDECREF(w);
    }
    Py_XDECREF(key);
    return has < 0 ? -1 : 0;
}

/* The tokens of a text (a list), or the first token of each of its terms by term hash (a
 * dict, in the order the terms first appear, stop words left out: what naming a vector's
 * terms needs). */
static PyObject *vz_scan(Vectorizer *v, PyObject *text, int words) {
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "text must be str");
        return NULL;
    }
    Buf local, *buf = buf_take(v, &local);
    Scan s = {v, 0, NULL, 0, 0, {0}, 0};
    if (vz_normalize(v, buf, text, &s.kind, &s.len) < 0) {
        buf_give(v, buf);
        return NULL;
    }
    s.data = buf->norm;
    PyObject *out = words ? PyDict_New() : PyList_New(0);
    Tok t;
    int r;
    while (out && (r = next_token(&s, &t)) != 0) {
        if (r < 0 || add_token(v, &s, &t, out, words) < 0) Py_CLEAR(out);
    }
    buf_give(v, buf);
    return out;
}

static PyObject *vz_tokens(Vectorizer *v, PyObject *text) { return vz_scan(v, text, 0); }

static PyObject *vz_words(Vectorizer *v, PyObject *text) { return vz_scan(v, text, 1); }

static PyObject *vz_clear(Vectorizer *v, PyObject *unused) {
    if (vz_alloc(v, 1024) < 0) return NULL;
    Py_RETURN_NONE;
}

static Py_ssize_t vz_len(Vectorizer *v) { return (Py_ssize_t)v->used; }

/* Vectorizer.sizes() -> (token cells, scratch slots, normalised-text bytes): for the tests. */
static PyObject *vz_sizes(Vectorizer *v, PyObject *unused) {
    return Py_BuildValue("(nnn)", (Py_ssize_t)v->cap, (Py_ssize_t)v->buf.scratch_cap,
                         (Py_ssize_t)v->buf.norm_cap);
}

static PyMethodDef vz_methods[] = {
    {"vector", (PyCFunction)vz_vector, METH_VARARGS, "Packed vector of a text."},
    {"normalize", (PyCFunction)vz_normalize_py, METH_O, "The normalised text."},
    {"tokens", (PyCFunction)vz_tokens, METH_O, "The tokens of a text."},
    {"words", (PyCFunction)vz_words, METH_O, "The first token of each term of a text."},
    {"clear", (PyCFunction)vz_clear, METH_NOARGS, "Forget every cached token."},
    {"sizes", (PyCFunction)vz_sizes, METH_NOARGS, "Sizes of the tables (for the tests)."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods vz_seq = {.sq_length = (lenfunc)vz_len};

static PyTypeObject VectorizerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "simeval.scoring._fast.Vectorizer",
    .tp_basicsize = sizeof(Vectorizer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)vz_init,
    .tp_dealloc = (destructor)vz_dealloc,
    .tp_methods = vz_methods,
    .tp_as_sequence = &vz_seq,
    .tp_doc = "Vectorizer(miss, char_info, fold, limit=2000000, unicode_tokens=True): "
              "normaliser and tokenizer with a C token cache.",
};

/* ``written.unglue`` in C (the regular expressions there are the reference, compared on
 * random text by the tests): a space at every glue point, the century before the short end of
 * a span of years, the text itself when there is neither. */
#define LOWER(c) ((c) >= 'a' && (c) <= 'z')
#define UPPER(c) ((c) >= 'A' && (c) <= 'Z')
#define DIGIT(c) ((c) >= '0' && (c) <= '9')
#define AT(i) PyUnicode_READ(kind, data, (i))
/* a character a year may not follow: it would be part of a longer number or a decimal */
#define IN_NUMBER(c) (DIGIT(c) || (c) == '.' || (c) == ',')

/* Bing's citation mark glued to a year ("in 19731."): a year 1500-2099 at i-4..i-1 that no
 * digit, point or comma precedes, then one digit 1-9 at i that ends the word */
static int citation_at(int kind, const void *data, Py_ssize_t n, Py_ssize_t i) {
    if (i < 4) return 0;
    Py_UCS4 c = AT(i), y0 = AT(i - 4), y1 = AT(i - 3);
    if (c < '1' || c > '9' || !DIGIT(AT(i - 1)) || !DIGIT(AT(i - 2))) return 0;
    if (!((y0 == '1' && y1 >= '5' && y1 <= '9') || (y0 == '2' && y1 == '0'))) return 0;
    if (i >= 5 && IN_NUMBER(AT(i - 5))) return 0;
    if (i + 1 < n) {
        Py_UCS4 d = AT(i + 1);
        if (DIGIT(d) || LOWER(d) || UPPER(d)) return 0;
    }
    return 1;
}

/* a span of years written short ("1979-80"): the two digits of the century to put at i (the
 * short end's first digit, after a hyphen or an en dash), 0 when i is not one */
static int century_at(int kind, const void *data, Py_ssize_t n, Py_ssize_t i) {
    if (i < 5 || i + 1 >= n) return 0;
    Py_UCS4 dash = AT(i - 1);
    if (dash != '-' && dash != 0x2013) return 0;
    Py_UCS4 e0 = AT(i), e1 = AT(i + 1), y0 = AT(i - 5), y1 = AT(i - 4), y2 = AT(i - 3),
            y3 = AT(i - 2);
    if (!(DIGIT(e0) && DIGIT(e1) && DIGIT(y1) && DIGIT(y2) && DIGIT(y3))) return 0;
    if (!(y0 == '1' || (y0 == '2' && y1 == '0'))) return 0;
    if (i + 2 < n && DIGIT(AT(i + 2))) return 0;
    if (i >= 6 && IN_NUMBER(AT(i - 6))) return 0;
    int century = (int)(y0 - '0') * 10 + (int)(y1 - '0');
    int start = (int)(y2 - '0') * 10 + (int)(y3 - '0'), end = (int)(e0 - '0') * 10 + (int)(e1 - '0');
    return century + (end < start); /* the end is never before the start: 1999-00 is 2000 */
}

static int glue_at(int kind, const void *data, Py_ssize_t n, Py_ssize_t i) {
    Py_UCS4 p = AT(i - 1), c = AT(i);
    if (LOWER(p)) {
        if (UPPER(c)) return 1;
        return DIGIT(c) && i >= 2 && LOWER(AT(i - 2));
    }
    if (DIGIT(p) && DIGIT(c)) return citation_at(kind, data, n, i);
    if (!DIGIT(p) || !LOWER(c)) return 0;
    Py_ssize_t j = i;
    while (j < n && LOWER(AT(j))) j++;
    if (j - i < 2) return 0;
    if (j - i == 2) { /* an ordinal ending stays on its number */
        Py_UCS4 a = c, b = AT(i + 1);
        if ((a == 's' && b == 't') || (a == 'n' && b == 'd') || (a == 'r' && b == 'd') ||
            (a == 't' && b == 'h'))
            return 0;
    }
    return 1;
}

/* what goes in before character i: 0 nothing, 1 a space, 10-21 those two century digits */
static int insert_at(int kind, const void *data, Py_ssize_t n, Py_ssize_t i) {
    Py_UCS4 p = AT(i - 1);
    if (p == '-' || p == 0x2013) return century_at(kind, data, n, i);
    return glue_at(kind, data, n, i);
}

static PyObject *py_unglue(PyObject *self, PyObject *text) {
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "unglue() takes a str");
        return NULL;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), k = 0;
    if (kind == PyUnicode_1BYTE_KIND) { /* the usual case: a byte per character */
        const Py_UCS1 *d = (const Py_UCS1 *)data;
        for (Py_ssize_t i = 1; i < n; i++) {
            Py_UCS1 p = d[i - 1], c = d[i];
            if ((LOWER(p) && (UPPER(c) || DIGIT(c))) || (DIGIT(p) && (LOWER(c) || DIGIT(c))) ||
                (p == '-' && DIGIT(c))) {
                int what = insert_at(kind, data, n, i);
                k += what > 1 ? 2 : what;
            }
        }
    } else {
        for (Py_ssize_t i = 1; i < n; i++) {
            int what = insert_at(kind, data, n, i);
            k += what > 1 ? 2 : what;
        }
    }
    if (!k) return Py_NewRef(text);
    PyObject *out = PyUnicode_New(n + k, PyUnicode_MAX_CHAR_VALUE(text));
    if (!out) return NULL;
    int ok = PyUnicode_KIND(out);
    void *od = PyUnicode_DATA(out);
    Py_ssize_t o = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int what = i ? insert_at(kind, data, n, i) : 0;
        if (what == 1) {
            PyUnicode_WRITE(ok, od, o++, ' ');
        } else if (what > 1) {
            PyUnicode_WRITE(ok, od, o++, (Py_UCS4)('0' + what / 10));
            PyUnicode_WRITE(ok, od, o++, (Py_UCS4)('0' + what % 10));
        }
        PyUnicode_WRITE(ok, od, o++, AT(i));
    }
    return out;
}

static PyMethodDef methods[] = {
    {"vectorize", vectorize, METH_VARARGS, "Pack a token list into a sorted term vector."},
    {"cosine", (PyCFunction)(void (*)(void))cosine, METH_FASTCALL,
     "Score of two packed term vectors."},
    {"best", best, METH_VARARGS, "Best score of one packed vector against many."},
    {"bands", py_bands, METH_VARARGS, "The bands score of a cosine for a pair's term counts."},
    {"has_any", py_has_any, METH_VARARGS, "Whether a packed vector has one of the hashes."},
    {"absent", py_absent, METH_VARARGS, "Positions of the first hashes a vector lacks."},
    {"rank", py_rank, METH_VARARGS, "A vector's terms and words, heaviest first."},
    {"unglue", py_unglue, METH_O, "A text with the words run together read apart."},
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
