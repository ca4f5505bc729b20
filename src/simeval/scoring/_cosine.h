/*
 * What the scorer's two C modules share: the packed term record and the score of two packed
 * vectors. `_fast.c` (the scorer's hot path) and `_index.c` (the eval-set index) both include
 * this file, so a score computed by either is the same function of the same floats, not a copy
 * to keep in step. Included once per module: every function is static.
 */
#ifndef SIMEVAL_COSINE_H
#define SIMEVAL_COSINE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* A packed vector is a bytes object of `Term` records sorted by `hash`: the 64-bit term hash,
 * the term-frequency weight (raw count or 1 + ln(count)) and the term's IDF. */
typedef struct {
    uint64_t hash;
    double tfw;
    double idf;
} Term;

/* The smoothed two-document IDF of scikit-learn: ln((1 + n) / (1 + df)) + 1 with n = 2. */
#define PAIR_IDF_ONE 1.4054651081081644 /* ln(3/2) + 1 */
#define PAIR_IDF_TWO 1.0                /* ln(3/3) + 1 */

/* A set of term hashes: sorted uint64 values, packed (the input's terms, the negators). */
typedef struct {
    const uint64_t *h;
    size_t n;
} HashSet;

/* Whether a vector has a term whose hash is in the set: both are sorted, one merge. */
static int has_any(const Term *a, size_t na, HashSet s) {
    size_t i = 0, k = 0;
    while (i < na && k < s.n) {
        if (a[i].hash < s.h[k]) i++;
        else if (s.h[k] < a[i].hash) k++;
        else return 1;
    }
    return 0;
}

/* The options that change the cosine: the input's term hashes with their weight, and the
 * negator hashes with their factor (see Scorer.best_vector for the formula). */
typedef struct {
    int pair;
    HashSet demote;
    double input_weight;
    HashSet negators;
    double negation;
} CosOpts;

static double cosine_packed(const Term *a, size_t na, const Term *b, size_t nb,
                            const CosOpts *o) {
    if (na == 0 || nb == 0) return 0.0;
    if (na == nb && memcmp(a, b, na * sizeof(Term)) == 0) return 1.0;
    int pair = o->pair;
    /* the input's terms, walked in step with the merge (hashes only grow) */
    const uint64_t *dem = o->demote.h;
    size_t nd = o->input_weight != 1.0 ? o->demote.n : 0, d = 0;
    double iw = o->input_weight;
    double dot = 0.0, sa = 0.0, sb = 0.0;
    size_t i = 0, j = 0;
    while (i < na || j < nb) {
        uint64_t h;
        int side; /* 1: a only, 2: b only, 3: both */
        if (j >= nb || (i < na && a[i].hash < b[j].hash)) {
            h = a[i].hash;
            side = 1;
        } else if (i >= na || b[j].hash < a[i].hash) {
            h = b[j].hash;
            side = 2;
        } else {
            h = a[i].hash;
            side = 3;
        }
        int demoted = 0;
        if (nd) {
            while (d < nd && dem[d] < h) d++;
            demoted = d < nd && dem[d] == h;
        }
        if (side == 1) {
            double w = a[i].tfw * (pair ? PAIR_IDF_ONE : a[i].idf);
            if (demoted) w *= iw;
            sa += w * w;
            i++;
        } else if (side == 2) {
            double w = b[j].tfw * (pair ? PAIR_IDF_ONE : b[j].idf);
            if (demoted) w *= iw;
            sb += w * w;
            j++;
        } else {
            double wa = a[i].tfw * (pair ? PAIR_IDF_TWO : a[i].idf);
            double wb = b[j].tfw * (pair ? PAIR_IDF_TWO : b[j].idf);
            if (demoted) {
                wa *= iw;
                wb *= iw;
            }
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

/* The score: the cosine, times the negation factor when exactly one vector has a negator.
 * `neg_a`: whether `a` has one (-1: not known yet). */
static double score_packed(const Term *a, size_t na, const Term *b, size_t nb, const CosOpts *o,
                           int neg_a) {
    double s = cosine_packed(a, na, b, nb, o);
    if (o->negation != 1.0 && o->negators.n && s > 0.0) {
        if (neg_a < 0) neg_a = has_any(a, na, o->negators);
        if (neg_a != has_any(b, nb, o->negators)) s *= o->negation;
    }
    return s;
}

/* The calibrated scale `bands` (simeval.scoring.bands gives the rule; _vector.bands_py is the
 * same operations in the same order): nine float64 as packed by bands.Curve.packed. */
typedef struct {
    int on;
    double k[3];
    double y[3];
    double allowance, exponent, floor;
} Bands;

/* A curve from its packed floats (`n` bytes); none (the raw cosine) when `n` is 0. Returns -1
 * for a length that is not nine float64. */
static int bands_from(const void *buf, size_t n, Bands *b) {
    b->on = 0;
    if (n == 0) return 0;
    if (n != 9 * sizeof(double)) return -1;
    double v[9];
    memcpy(v, buf, sizeof v);
    for (int i = 0; i < 3; i++) {
        b->k[i] = v[i];
        b->y[i] = v[3 + i];
    }
    b->allowance = v[6];
    b->exponent = v[7];
    b->floor = v[8];
    b->on = 1;
    return 0;
}

/* The score of cosine `c` for a pair of `n_out` and `n_ref` distinct terms. */
static double bands_score(double c, size_t n_out, size_t n_ref, const Bands *b) {
    if (!b->on) return c;
    if (c <= 0.0) return 0.0;
    if (c >= 1.0) return 1.0;
    double no = n_out > 1 ? (double)n_out : 1.0;
    double nr = n_ref > 1 ? (double)n_ref : 1.0;
    double r = b->allowance * nr / no;
    double h = 1.0;
    if (r < 1.0) {
        h = pow(r, b->exponent);
        if (h < b->floor) h = b->floor;
    }
    double x1 = h * b->k[0], x2 = h * b->k[1], x3 = h * b->k[2];
    double lo, hi, ylo, yhi;
    if (c >= x3) {
        lo = x3, hi = 1.0, ylo = b->y[2], yhi = 1.0;
    } else if (c >= x2) {
        lo = x2, hi = x3, ylo = b->y[1], yhi = b->y[2];
    } else if (c >= x1) {
        lo = x1, hi = x2, ylo = b->y[0], yhi = b->y[1];
    } else {
        lo = 0.0, hi = x1, ylo = 0.0, yhi = b->y[0];
    }
    return ylo + (yhi - ylo) * (c - lo) / (hi - lo);
}

#endif
