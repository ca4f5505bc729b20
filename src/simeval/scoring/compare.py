"""A/B comparison of two sets of results: per eval, is side B better or worse than side A?

The statistics, stated so they can be checked by hand (``tests/scoring/test_compare.py`` does):

- Each side is a list of cases per eval: a score in [0, 1], a pass/fail verdict, and a pairing
  key (the case id, else the input). Cases whose key appears on both sides are *paired*, by
  key plus occurrence: a key repeated on a side pairs in order (the 2nd "hi" of A with the
  2nd "hi" of B; ``repeated_pairs`` counts the pairs past a key's first, ``PAIRING`` says it).
- The difference is B − A, of the mean score and of the pass rate. When at least half of the
  smaller side's cases are paired, the test is paired: the differences ``d = b − a`` of the
  paired cases are resampled, and B − A is that of the paired subset (``pairs`` cases).
  Otherwise each side is resampled on its own and B − A is that of the whole sides.
- Bootstrap, up to ``EXACT_CASES`` cases (paired: the pairs; unpaired: each side):
  ``rng = numpy.random.default_rng(seed)``; paired: the case indices
  ``rng.integers(0, n, size=(R, n))`` and the statistic is the row mean of the resampled
  differences; unpaired: ``ia = rng.integers(0, na, (R, na))`` then
  ``ib = rng.integers(0, nb, (R, nb))``, statistic ``mean(b[ib]) − mean(a[ia])`` per row. The
  same resamples serve the score and the pass rate. The index matrices are drawn a few rows at
  a time (the same numbers as one draw: memory stays bounded).
- Above ``EXACT_CASES`` the same bootstrap is drawn by counts, each statistic on its own (the
  score, then the pass rate; paired: of the differences, unpaired: of A then of B): a
  resample's mean depends only on how many times each value is drawn, and those counts are
  ``rng.multinomial(n, counts / n, size=R)`` over the column's distinct values — the same
  distribution as drawing indices, at a cost that does not grow with n. A column of more than
  ``BINS`` distinct values (continuous scores) is cut into ``BINS`` bins of equal count of its
  sorted values; a bin drawn ``c`` times adds ``c`` times its mean plus a normal term of
  variance ``c`` times its within-bin variance (``rng.standard_normal((R, BINS))``), so the
  resampled mean keeps the exact variance of the index bootstrap (the bins change only its
  shape inside a bin, with ~n / BINS values each). A pass/fail column has at most 3 distinct
  values: its draw is exact.
- The 95% interval is ``numpy.percentile(stats, [2.5, 97.5])`` (linear interpolation).
- McNemar (paired only): ``f`` = pass→fail flips, ``g`` = fail→pass flips; exact two-sided
  binomial p-value ``min(1, 2·Σ_{k≤min(f,g)} C(f+g, k) / 2^(f+g))`` (summed in logarithms past
  ``MCNEMAR_EXACT`` flips, where the integers would have hundreds of thousands of digits).
- Listed cases: the paired cases B scored lower (or flipped pass→fail), flips first then the
  largest drops ("regressed"); and the other way round ("improved"); among equals, in A's order.
- Verdict: "B worse" when the score interval or the pass-rate interval lies wholly below 0, or
  McNemar has p < 0.05 with more pass→fail flips; "B better" the other way round; "mixed" when
  signs disagree; otherwise "no clear difference". When the two pass rates are equal (as many
  pass→fail as fail→pass flips) a score interval alone is no regression: "lower scores, same
  pass rate" (or "higher scores, same pass rate"), never "B worse". Fewer than 2 cases on a
  side: "not enough data".

A side's cases are given as ``Case`` lists (small sides, hand-made ones) or column by column
as ``Cases`` (numpy arrays: what the service reads from a large store, without an object per
result); the work is done on columns either way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0
ALPHA = 0.05
EXACT_CASES = 10_000  # cases (pairs, or a side's) resampled by index; more: by counts
BINS = 128  # bins of a column with more distinct values, above EXACT_CASES
MCNEMAR_EXACT = 2000  # discordant pairs summed as exact integers; more: in logarithms
_CHUNK = 4_000_000  # index entries drawn at once by the exact bootstrap (32 MB)
PAIRING = (
    "paired by case id (else input) plus occurrence: a key repeated on a side pairs in order, "
    "its 1st case in A with its 1st in B, its 2nd with its 2nd"
)
LOWER_SAME_PASS = "lower scores, same pass rate"
HIGHER_SAME_PASS = "higher scores, same pass rate"


@dataclass
class Case:
    """One result on one side of a comparison."""

    key: str | None  # what pairs it with the other side (case id or input); None: unpaired
    name: str  # how it is shown
    score: float
    passed: bool
    output: str | None = None
    missing: list[str] | None = None
    # computes the missing terms when they are not stored (captured results), only for the
    # cases a report lists
    explain: Callable[[], list[str]] | None = field(default=None, repr=False)
    ref: str | None = None  # the result id, for a link


@dataclass
class Cases:
    """One eval's cases on one side, column by column (the cases at positions ``idx`` in
    full: ``detail(idx)``)."""

    keys: np.ndarray  # int64 key numbers, the same on both sides; -1: no key (never paired)
    scores: np.ndarray  # float64
    passed: np.ndarray  # bool
    # the cases in full (name, output, missing terms, ref): made only for the cases listed
    detail: Callable[[Sequence[int]], list[Case]] = field(repr=False)
    # the result ids alone (what a listed case shows of side A), when cheaper than ``detail``
    refs: Callable[[Sequence[int]], list[str | None]] | None = field(default=None, repr=False)

    def light(self, idx: Sequence[int]) -> list[Case]:
        """The cases at ``idx`` as far as side A of a listed case shows them: score,
        verdict and result id (``detail`` when there is no ``refs``)."""
        if self.refs is None:
            return self.detail(idx)
        return [
            Case(None, "", float(self.scores[i]), bool(self.passed[i]), ref=r)
            for i, r in zip(idx, self.refs(idx), strict=True)
        ]

    def __len__(self) -> int:
        return int(self.keys.shape[0])

    @classmethod
    def of(cls, cases: Sequence[Case], number: Callable[[str], int]) -> Cases:
        """``cases`` as columns, keys numbered by ``number`` (the same for both sides)."""
        n = len(cases)
        keys = np.fromiter((-1 if c.key is None else number(c.key) for c in cases), np.int64, n)
        scores = np.fromiter((c.score for c in cases), np.float64, n)
        passed = np.fromiter((bool(c.passed) for c in cases), np.bool_, n)
        return cls(keys, scores, passed, lambda idx: [cases[i] for i in idx])


@dataclass
class Side:
    """One side's cases, per eval name (``Case`` lists or ``Cases`` columns)."""

    label: str
    evals: dict[str, Any] = field(default_factory=dict)  # name -> list[Case] | Cases

    def add(self, eval_name: str, case: Case) -> None:
        self.evals.setdefault(eval_name, []).append(case)


def mcnemar_p(flips_to_fail: int, flips_to_pass: int) -> float:
    """Exact two-sided McNemar p-value on the discordant pairs.

    >>> mcnemar_p(0, 0), round(mcnemar_p(8, 0), 4), mcnemar_p(3, 3)
    (1.0, 0.0078, 1.0)
    """
    n = flips_to_fail + flips_to_pass
    if n == 0:
        return 1.0
    k = min(flips_to_fail, flips_to_pass)
    if n <= MCNEMAR_EXACT:
        tail = sum(math.comb(n, i) for i in range(k + 1))
        return min(1.0, float(2 * tail / 2**n))
    # log C(n, i) for i = 0..k by the running sum of log((n - i + 1) / i), then log-sum-exp
    i = np.arange(1, k + 1, dtype=np.float64)
    logc = np.concatenate(([0.0], np.cumsum(np.log(n - i + 1) - np.log(i))))
    top = float(logc.max())
    log_tail = top + math.log(float(np.exp(logc - top).sum()))
    return min(1.0, math.exp(math.log(2) + log_tail - n * math.log(2)))


def _index_means(x: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Means of ``x`` (rows; 2-D: per column) over ``resamples`` index draws, the draws made
    a few rows of the (resamples, n) index matrix at a time: the numbers of one draw."""
    n = x.shape[0]
    step = max(1, _CHUNK // max(1, n))
    parts = []
    for start in range(0, resamples, step):
        idx = rng.integers(0, n, size=(min(step, resamples - start), n))
        parts.append(x[idx].mean(axis=1))
    return np.concatenate(parts)


def _count_means(
    x: np.ndarray, resamples: int, rng: np.random.Generator, bins: int = BINS
) -> np.ndarray:
    """Means of the 1-D ``x`` over ``resamples`` bootstrap draws, drawn by counts (see the
    module docstring): exact over at most ``bins`` distinct values, binned beyond."""
    n = x.shape[0]
    lo, hi = float(x.min()), float(x.max())
    if hi - lo < bins and bool(np.all(x == np.floor(x))):
        # whole numbers in a short range (a verdict's 0/1, a difference's -1/0/1): counted
        counts = np.bincount((x - lo).astype(np.int64))
        values = lo + np.flatnonzero(counts)
        counts = counts[counts > 0]
    else:
        ordered = np.sort(x)
        starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
        values, counts = ordered[starts], np.diff(np.r_[starts, n])
    if values.shape[0] <= bins:
        drawn = rng.multinomial(n, counts / n, size=resamples)
        return np.asarray(drawn @ values / n)
    edges = np.linspace(0, n, bins + 1).astype(np.int64)  # equal-count bins, none empty
    size = np.diff(edges)
    means = np.add.reduceat(ordered, edges[:-1]) / size
    dev = ordered - np.repeat(means, size)
    var = np.add.reduceat(dev * dev, edges[:-1]) / size
    drawn = rng.multinomial(n, size / n, size=resamples)
    noise = rng.standard_normal((resamples, bins))
    total = drawn @ means + (np.sqrt(drawn * var) * noise).sum(axis=1)
    return np.asarray(total / n)


def bootstrap_paired(
    diffs: np.ndarray,
    resamples: int,
    rng: np.random.Generator,
    exact: int = EXACT_CASES,
    bins: int = BINS,
) -> np.ndarray:
    """Row means of ``diffs`` resampled with replacement: one statistic per resample.
    ``diffs`` may be 2-D (one column per statistic); up to ``exact`` rows the same resamples
    serve each column, beyond it each column is drawn by counts (module docstring)."""
    n = diffs.shape[0]
    if n <= exact:
        return _index_means(diffs, resamples, rng)
    if diffs.ndim == 1:
        return _count_means(diffs, resamples, rng, bins)
    cols = [_count_means(diffs[:, j], resamples, rng, bins) for j in range(diffs.shape[1])]
    return np.column_stack(cols)


def bootstrap_unpaired(
    a: np.ndarray,
    b: np.ndarray,
    resamples: int,
    rng: np.random.Generator,
    exact: int = EXACT_CASES,
    bins: int = BINS,
) -> np.ndarray:
    """``mean(b*) − mean(a*)`` per resample, each side resampled on its own (by counts when
    either side has more than ``exact`` rows)."""
    # every A draw first, then B's: one stream
    if a.shape[0] <= exact and b.shape[0] <= exact:
        mean_a = _index_means(a, resamples, rng)
        return np.asarray(_index_means(b, resamples, rng) - mean_a)
    mean_a = bootstrap_paired(a, resamples, rng, 0, bins)
    return np.asarray(bootstrap_paired(b, resamples, rng, 0, bins) - mean_a)


def interval(stats: np.ndarray) -> tuple[float, float]:
    lo, hi = np.percentile(stats, [100 * ALPHA / 2, 100 * (1 - ALPHA / 2)], axis=0)
    return float(lo), float(hi)


def wilson(passes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``passes / n`` (95% by default).

    >>> [round(x, 4) for x in wilson(8, 10)]
    [0.4902, 0.9433]
    """
    if n <= 0:
        return 0.0, 1.0
    p = passes / n
    scale = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / scale
    half = z / scale * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def pass_rate_diff_interval(
    passes_a: int, n_a: int, passes_b: int, n_b: int
) -> tuple[float, float, float]:
    """B − A of two pass rates known only by their counts, with its 95% interval:
    Newcombe's hybrid score interval (his method 10, from the two Wilson intervals; his
    example 56/70 against 48/80 gives [0.0524, 0.3339]), for
    sums without their cases (the trend rollup), where the bootstrap has nothing to resample.

    >>> [round(x, 4) for x in pass_rate_diff_interval(56, 70, 48, 80)]
    [-0.2, -0.3339, -0.0524]
    """
    pa, pb = passes_a / n_a, passes_b / n_b
    la, ua = wilson(passes_a, n_a)
    lb, ub = wilson(passes_b, n_b)
    d = pb - pa
    lo = d - math.sqrt((pb - lb) ** 2 + (ua - pa) ** 2)
    hi = d + math.sqrt((ub - pb) ** 2 + (pa - la) ** 2)
    return d, lo, hi


def _occurrences(keys: np.ndarray) -> np.ndarray:
    """For each entry, how many entries before it have the same key (0 for the first)."""
    n = keys.shape[0]
    out = np.zeros(n, np.int64)
    if n == 0:
        return out
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    at = np.arange(n)
    starts = np.r_[True, ordered[1:] != ordered[:-1]]
    out[order] = at - np.maximum.accumulate(np.where(starts, at, 0))
    return out


def pair_indices(ka: np.ndarray, kb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The paired positions (in A, in B), in A's order: equal keys (not -1), the k-th
    occurrence of a key on A with its k-th occurrence on B."""
    oa, ob = _occurrences(ka), _occurrences(kb)
    width = int(max(oa.max(initial=0), ob.max(initial=0))) + 1
    va, vb = np.flatnonzero(ka >= 0), np.flatnonzero(kb >= 0)
    ca, cb = ka[va] * width + oa[va], kb[vb] * width + ob[vb]
    _, xa, xb = np.intersect1d(ca, cb, assume_unique=True, return_indices=True)
    ia, ib = va[xa], vb[xb]
    order = np.argsort(ia, kind="stable")
    return ia[order], ib[order]


def _side_stats(c: Cases) -> dict[str, object]:
    n = len(c)
    return {
        "n": n,
        "pass_rate": float(c.passed.mean()) if n else None,
        "mean_score": float(c.scores.mean()) if n else None,
    }


def _verdict(
    score_ci: tuple[float, float],
    pass_ci: tuple[float, float],
    mcnemar: float | None,
    to_fail: int,
    to_pass: int,
    same_pass_rate: bool = False,
) -> str:
    worse = score_ci[1] < 0 or pass_ci[1] < 0
    better = score_ci[0] > 0 or pass_ci[0] > 0
    if mcnemar is not None and mcnemar < ALPHA:
        worse = worse or to_fail > to_pass
        better = better or to_pass > to_fail
    if same_pass_rate and worse != better:
        # only the scores moved: every case passes or fails as it did in number, so a gate
        # on "B worse" does not fail on it
        return LOWER_SAME_PASS if worse else HIGHER_SAME_PASS
    if worse and better:
        return "mixed"
    if worse:
        return "B worse"
    if better:
        return "B better"
    return "no clear difference"


def _case_out(a: Case, b: Case) -> dict[str, object]:
    missing = b.missing
    if missing is None and b.explain is not None:
        missing = b.explain()
    return {
        "case": b.name,
        "score_a": a.score,
        "score_b": b.score,
        "delta": b.score - a.score,
        "passed_a": a.passed,
        "passed_b": b.passed,
        "missing_terms": missing or [],
        "output_b": _cut(b.output),
        "result_a": a.ref,
        "result_b": b.ref,
    }


def _cut(text: str | None, n: int = 300) -> str | None:
    if text is None or len(text) <= n:
        return text
    return text[: n - 1] + "…"


def histogram(cases: Iterable[Case] | np.ndarray, bins: int = 10) -> list[int]:
    """Counts of scores in ``bins`` equal bins over [0, 1]; a score of 1.0 falls in the last.
    ``cases``: cases, or their scores as an array."""
    scores = (
        cases
        if isinstance(cases, np.ndarray)
        else np.fromiter((c.score for c in cases), np.float64)
    )
    at = np.clip((scores * bins).astype(np.int64), 0, bins - 1)
    return [int(x) for x in np.bincount(at, minlength=bins)]


def _first(positions: np.ndarray, flips: np.ndarray, gain: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` first of ``positions`` (ascending) ordered by (not a flip, ``gain``),
    equals in their order: what a stable sort gives, without sorting them all."""
    is_flip = flips[positions]
    out = [positions[:0]]
    left = k
    for group in (positions[is_flip], positions[~is_flip]):
        if left <= 0:
            break
        g = gain[group]
        if group.shape[0] > left:
            # the left-th smallest gain, then every candidate up to it (ties included)
            cut = np.partition(g, left - 1)[left - 1]
            sel = np.flatnonzero(g <= cut)
            group, g = group[sel], g[sel]
        order = np.argsort(g, kind="stable")[:left]
        out.append(group[order])
        left -= int(order.shape[0])
    return np.concatenate(out)


def _columns(a: Sequence[Case] | Cases, b: Sequence[Case] | Cases) -> tuple[Cases, Cases]:
    """Both sides as columns; ``Case`` lists numbered together (a side given as columns
    numbers its keys with the other's: a list beside it must be empty)."""
    numbers: dict[str, int] = {}

    def number(key: str) -> int:
        return numbers.setdefault(key, len(numbers))

    out = []
    for x in (a, b):
        if not isinstance(x, Cases):
            if len(x) and (isinstance(a, Cases) or isinstance(b, Cases)):
                raise TypeError("compare Cases columns with Cases, not with a list of Case")
            x = Cases.of(x, number)
        out.append(x)
    return out[0], out[1]


def compare_eval(
    a: Sequence[Case] | Cases,
    b: Sequence[Case] | Cases,
    seed: int = DEFAULT_SEED,
    resamples: int = DEFAULT_RESAMPLES,
    keep: int = 20,
    exact: int = EXACT_CASES,
    bins: int = BINS,
    pairs: tuple[np.ndarray, np.ndarray] | None = None,
) -> dict[str, Any]:
    """The comparison of one eval's cases on the two sides (see the module docstring).
    ``exact`` and ``bins``: where the bootstrap draws by counts, and its bins; ``pairs``:
    ``pair_indices`` of the two sides' keys when the caller has them (the evals of one
    capture share their keys)."""
    ca, cb = _columns(a, b)
    out: dict[str, Any] = {"a": _side_stats(ca), "b": _side_stats(cb)}
    out["a"]["histogram"] = histogram(ca.scores)
    out["b"]["histogram"] = histogram(cb.scores)
    ia, ib = pair_indices(ca.keys, cb.keys) if pairs is None else pairs
    sa, sb = ca.scores[ia], cb.scores[ib]
    pa, pb = ca.passed[ia], cb.passed[ib]
    fail_flip, pass_flip = pa & ~pb, pb & ~pa
    to_fail, to_pass = int(fail_flip.sum()), int(pass_flip.sum())
    npairs = int(ia.shape[0])
    paired = npairs >= 2 and 2 * npairs >= min(len(ca), len(cb))
    repeated = int((_occurrences(ca.keys)[ia] > 0).sum())
    out.update(paired=paired, pairs=npairs, flips_to_fail=to_fail, flips_to_pass=to_pass)
    out["repeated_pairs"] = repeated
    rng = np.random.default_rng(seed)
    if paired:
        d = np.column_stack((sb - sa, pb.astype(np.float64) - pa.astype(np.float64)))
        stats = bootstrap_paired(d, resamples, rng, exact, bins)
        diff = d.mean(axis=0)
        mc: float | None = mcnemar_p(to_fail, to_pass)
    elif len(ca) >= 2 and len(cb) >= 2:
        va = np.column_stack((ca.scores, ca.passed.astype(np.float64)))
        vb = np.column_stack((cb.scores, cb.passed.astype(np.float64)))
        stats = bootstrap_unpaired(va, vb, resamples, rng, exact, bins)
        diff = vb.mean(axis=0) - va.mean(axis=0)
        mc = None
    else:
        out.update(
            score_diff=None,
            score_ci=None,
            pass_rate_diff=None,
            pass_rate_ci=None,
            mcnemar_p=None,
            verdict="not enough data",
            regressed=[],
            improved=[],
        )
        return out
    score_ci = interval(stats[:, 0])
    pass_ci = interval(stats[:, 1])
    out.update(
        score_diff=float(diff[0]),
        score_ci=list(score_ci),
        pass_rate_diff=float(diff[1]),
        pass_rate_ci=list(pass_ci),
        mcnemar_p=mc,
        verdict=_verdict(score_ci, pass_ci, mc, to_fail, to_pass, abs(diff[1]) < 1e-12),
    )
    delta = sb - sa

    def listed(at: np.ndarray) -> list[dict[str, object]]:
        olds, news = ca.light(ia[at].tolist()), cb.detail(ib[at].tolist())
        return [_case_out(x, y) for x, y in zip(olds, news, strict=True)]

    # cases on both sides, most regressed first (a pass→fail flip before a mere drop)
    worse = np.flatnonzero((sb < sa) | fail_flip)
    out["regressed_count"] = int(worse.shape[0])
    out["regressed"] = listed(_first(worse, fail_flip, delta, keep))
    # and the other way round: most improved first (a fail→pass flip before a mere gain)
    better = np.flatnonzero((sb > sa) | pass_flip)
    out["improved_count"] = int(better.shape[0])
    out["improved"] = listed(_first(better, pass_flip, sa - sb, keep))
    return out


def compare_sides(
    a: Side,
    b: Side,
    seed: int = DEFAULT_SEED,
    resamples: int = DEFAULT_RESAMPLES,
    keep: int = 20,
) -> dict[str, Any]:
    """Every eval present on either side, compared (``compare_eval``), with an overall verdict:
    "B worse" when B is significantly worse on any eval."""
    names = sorted(set(a.evals) | set(b.evals))
    evals = []
    for name in names:
        row = compare_eval(a.evals.get(name, []), b.evals.get(name, []), seed, resamples, keep)
        evals.append({"eval": name, **row})
    return sides_report(a.label, b.label, evals, seed, resamples)


def sides_report(
    a: str, b: str, evals: list[dict[str, Any]], seed: int, resamples: int
) -> dict[str, Any]:
    """The report of sides labelled ``a`` and ``b`` from their evals compared (each
    ``{"eval": name, **compare_eval(...)}``), with the overall verdict."""
    verdicts = {e["verdict"] for e in evals}
    if "B worse" in verdicts:
        overall = "B worse"
    elif "B better" in verdicts and not verdicts & {"mixed", LOWER_SAME_PASS}:
        overall = "B better"
    elif verdicts & {"mixed", "B better"} or {LOWER_SAME_PASS, HIGHER_SAME_PASS} <= verdicts:
        overall = "mixed"  # (B better on one eval, lower scores on another)
    elif LOWER_SAME_PASS in verdicts:
        overall = LOWER_SAME_PASS
    elif HIGHER_SAME_PASS in verdicts:
        overall = HIGHER_SAME_PASS
    elif evals and verdicts <= {"not enough data"}:
        overall = "not enough data"
    else:
        overall = "no clear difference"
    return {
        "a": a,
        "b": b,
        "seed": seed,
        "resamples": resamples,
        "verdict": overall,
        "worse": any(e["verdict"] == "B worse" for e in evals),
        "pairing": PAIRING,
        "evals": evals,
    }
