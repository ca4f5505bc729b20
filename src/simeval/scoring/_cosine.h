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
/* The reference's share found in the output, from the shared and the whole squared weight. */
static double coverage_of(double shared, double whole) {
    if (whole <= 0.0) return 0.0;
    double c = shared / whole;
    return c < 0.0 ? 0.0 : (c > 1.0 ? 1.0 : c);
}

typedef struct {
    int pair;
    HashSet demote;
    double input_weight;
    HashSet negators;
    double negation;
} CosOpts;

/* What the answer score of a question-answer pair reads beside the cosine: `cov`, the share
 * of the reference `b`'s squared weight whose terms the output `a` holds, the question's own
 * terms left out (unless the reference has no other), and `prec`, the share of `a`'s squared
 * weight on terms of `b` (question weights as in the cosine). */
typedef struct {
    double cov, prec;
} Cover;

static double cosine_cov(const Term *a, size_t na, const Term *b, size_t nb, const CosOpts *o,
                         Cover *cv) {
    if (cv) cv->cov = cv->prec = 0.0;
    if (na == 0 || nb == 0) return 0.0;
    if (na == nb && memcmp(a, b, na * sizeof(Term)) == 0) {
        if (cv) cv->cov = cv->prec = 1.0;
        return 1.0;
    }
    int pair = o->pair;
    /* the input's terms, walked in step with the merge (hashes only grow) */
    const uint64_t *dem = o->demote.h;
    size_t nd = o->input_weight != 1.0 ? o->demote.n : 0, d = 0;
    double iw = o->input_weight;
    /* sh, ph: the shared terms' part of sb and sa; sn, sq: sb and sh off the question's terms
     * (repeating the question's own words is no sign of a right answer) */
    double dot = 0.0, sa = 0.0, sb = 0.0, sh = 0.0, ph = 0.0, sn = 0.0, sq = 0.0;
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
            else sn += w * w;
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
            sh += wb * wb;
            ph += wa * wa;
            if (!demoted) {
                sn += wb * wb;
                sq += wb * wb;
            }
            dot += wa * wb;
            i++;
            j++;
        }
    }
    if (sa <= 0.0 || sb <= 0.0) return 0.0;
    if (cv) {
        cv->cov = sn > 0.0 ? coverage_of(sq, sn) : coverage_of(sh, sb);
        cv->prec = coverage_of(ph, sa);
    }
    double s = dot / (sqrt(sa) * sqrt(sb));
    return s < 0.0 ? 0.0 : (s > 1.0 ? 1.0 : s);
}

static double cosine_packed(const Term *a, size_t na, const Term *b, size_t nb,
                            const CosOpts *o) {
    return cosine_cov(a, na, b, nb, o, NULL);
}

/* The score: the cosine, times the negation factor when exactly one vector has a negator.
 * `neg_a`: whether `a` has one (-1: not known yet). */
static double score_packed(const Term *a, size_t na, const Term *b, size_t nb, const CosOpts *o,
                           int neg_a, Cover *cv) {
    double s = cosine_cov(a, na, b, nb, o, cv);
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
    /* a question-answer pair's curve (bands.Curve.answer_packed): its cosine knots `ck`, the
     * answer knots `ak`, the precision below which the answer score falls in proportion
     * (`prec_floor`) and the most reference terms the answer score is read for (`max_terms`) */
    int answer;
    double ck[3], ak[3];
    double prec_floor, max_terms;
} Bands;

#define BANDS_N 9   /* float64 of a plain curve */
#define ANSWER_N 17 /* float64 of a question-answer pair's: the nine, ck, ak, floor, terms */

/* A curve from its packed floats (`n` bytes); none (the raw cosine) when `n` is 0; BANDS_N
 * float64 for a pair without a question, ANSWER_N for a question-answer pair. Returns -1 for
 * another length. */
static int bands_from(const void *buf, size_t n, Bands *b) {
    b->on = 0;
    b->answer = 0;
    if (n == 0) return 0;
    if (n != BANDS_N * sizeof(double) && n != ANSWER_N * sizeof(double)) return -1;
    double v[ANSWER_N];
    memcpy(v, buf, n);
    if (n == ANSWER_N * sizeof(double)) {
        b->answer = 1;
        for (int i = 0; i < 3; i++) {
            b->ck[i] = v[9 + i];
            b->ak[i] = v[12 + i];
        }
        b->prec_floor = v[15];
        b->max_terms = v[16];
    }
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

/* The piecewise-linear map through (0, 0), (k[i], y[i]), (1, 1): the curve once its knots are
 * placed (bands_score's, a question-answer pair's cosine and answer score). */
static double piecewise(double c, const double *k, const double *y) {
    if (c <= 0.0) return 0.0;
    if (c >= 1.0) return 1.0;
    double lo, hi, ylo, yhi;
    if (c >= k[2]) {
        lo = k[2], hi = 1.0, ylo = y[2], yhi = 1.0;
    } else if (c >= k[1]) {
        lo = k[1], hi = k[2], ylo = y[1], yhi = y[2];
    } else if (c >= k[0]) {
        lo = k[0], hi = k[1], ylo = y[0], yhi = y[1];
    } else {
        lo = 0.0, hi = k[0], ylo = 0.0, yhi = y[0];
    }
    return ylo + (yhi - ylo) * (c - lo) / (hi - lo);
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
    double x[3] = {h * b->k[0], h * b->k[1], h * b->k[2]};
    return piecewise(c, x, b->y);
}


/* The score of a pair from its cosine `s` (after negation): through the curve; for a
 * question-answer pair through its cosine knots, and for a reference of at most `max_terms`
 * terms the better of that and the answer score, the coverage times min(1, prec /
 * prec_floor) through the answer knots. */
static double final_score(double s, const Cover *cv, size_t n_out, size_t n_ref, const Bands *b) {
    if (!(b->on && b->answer)) return bands_score(s, n_out, n_ref, b);
    double out = piecewise(s, b->ck, b->y);
    if ((double)n_ref <= b->max_terms) {
        double a = cv->cov;
        if (cv->prec < b->prec_floor) a = a * (cv->prec / b->prec_floor);
        double ans = piecewise(a, b->ak, b->y);
        if (ans > out) out = ans;
    }
    return out;
}

#endif
