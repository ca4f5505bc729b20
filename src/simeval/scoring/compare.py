"""A/B comparison of two sets of results: per eval, is side B better or worse than side A?

The statistics, stated so they can be checked by hand (``tests/scoring/test_compare.py`` does):

- Each side is a list of cases per eval: a score in [0, 1], a pass/fail verdict, and a pairing
  key (the case id, else the input). Cases whose key appears on both sides are *paired*;
  repeated keys pair up in order (the 2nd "hi" of A with the 2nd "hi" of B).
- The difference is B − A, of the mean score and of the pass rate. When at least half of the
  smaller side's cases are paired, the test is paired: the differences ``d = b − a`` of the
  paired cases are resampled. Otherwise each side is resampled on its own.
- Bootstrap: ``rng = numpy.random.default_rng(seed)``; paired: one matrix
  ``rng.integers(0, n, size=(R, n))`` of case indices and the statistic is the row mean of the
  resampled differences; unpaired: ``ia = rng.integers(0, na, (R, na))`` then
  ``ib = rng.integers(0, nb, (R, nb))``, statistic ``mean(b[ib]) − mean(a[ia])`` per row. The
  same resamples serve the score and the pass rate. The 95% interval is
  ``numpy.percentile(stats, [2.5, 97.5])`` (linear interpolation).
- McNemar (paired only): ``f`` = pass→fail flips, ``g`` = fail→pass flips; exact two-sided
  binomial p-value ``min(1, 2·Σ_{k≤min(f,g)} C(f+g, k) / 2^(f+g))``.
- Listed cases: the paired cases B scored lower (or flipped pass→fail), flips first then the
  largest drops ("regressed"); and the other way round ("improved").
- Verdict: "B worse" when the score interval or the pass-rate interval lies wholly below 0, or
  McNemar has p < 0.05 with more pass→fail flips; "B better" the other way round; "mixed" when
  signs disagree; otherwise "no clear difference". Fewer than 2 cases on a side: "not enough
  data".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0
ALPHA = 0.05


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
class Side:
    """One side's cases, per eval name."""

    label: str
    evals: dict[str, list[Case]] = field(default_factory=dict)

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
    tail = sum(math.comb(n, i) for i in range(k + 1))
    return min(1.0, 2 * tail / 2**n)


def bootstrap_paired(diffs: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Row means of ``diffs`` resampled with replacement: one statistic per resample.
    ``diffs`` may be 2-D (one column per statistic); the same resamples serve each column."""
    n = diffs.shape[0]
    idx = rng.integers(0, n, size=(resamples, n))
    return np.asarray(diffs[idx].mean(axis=1))


def bootstrap_unpaired(
    a: np.ndarray, b: np.ndarray, resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """``mean(b*) − mean(a*)`` per resample, each side resampled on its own."""
    ia = rng.integers(0, a.shape[0], size=(resamples, a.shape[0]))
    ib = rng.integers(0, b.shape[0], size=(resamples, b.shape[0]))
    return np.asarray(b[ib].mean(axis=1) - a[ia].mean(axis=1))


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


def _pairs(a: list[Case], b: list[Case]) -> list[tuple[Case, Case]]:
    def keyed(cases: list[Case]) -> dict[tuple[str, int], Case]:
        seen: dict[str, int] = {}
        out: dict[tuple[str, int], Case] = {}
        for c in cases:
            if c.key is None:
                continue
            n = seen.get(c.key, 0)
            seen[c.key] = n + 1
            out[(c.key, n)] = c
        return out

    ka, kb = keyed(a), keyed(b)
    return [(ka[k], kb[k]) for k in ka if k in kb]


def _side_stats(cases: list[Case]) -> dict[str, Any]:
    n = len(cases)
    return {
        "n": n,
        "pass_rate": (sum(c.passed for c in cases) / n) if n else None,
        "mean_score": (sum(c.score for c in cases) / n) if n else None,
    }


def _verdict(
    score_ci: tuple[float, float],
    pass_ci: tuple[float, float],
    mcnemar: float | None,
    to_fail: int,
    to_pass: int,
) -> str:
    worse = score_ci[1] < 0 or pass_ci[1] < 0
    better = score_ci[0] > 0 or pass_ci[0] > 0
    if mcnemar is not None and mcnemar < ALPHA:
        worse = worse or to_fail > to_pass
        better = better or to_pass > to_fail
    if worse and better:
        return "mixed"
    if worse:
        return "B worse"
    if better:
        return "B better"
    return "no clear difference"


def _case_out(a: Case, b: Case) -> dict[str, Any]:
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


def histogram(cases: Iterable[Case], bins: int = 10) -> list[int]:
    """Counts of scores in ``bins`` equal bins over [0, 1]; a score of 1.0 falls in the last."""
    counts = [0] * bins
    for c in cases:
        counts[min(bins - 1, max(0, int(c.score * bins)))] += 1
    return counts


def compare_eval(
    a: list[Case],
    b: list[Case],
    seed: int = DEFAULT_SEED,
    resamples: int = DEFAULT_RESAMPLES,
    keep: int = 20,
) -> dict[str, Any]:
    """The comparison of one eval's cases on the two sides (see the module docstring)."""
    out: dict[str, Any] = {"a": _side_stats(a), "b": _side_stats(b)}
    out["a"]["histogram"] = histogram(a)
    out["b"]["histogram"] = histogram(b)
    pairs = _pairs(a, b)
    to_fail = sum(1 for x, y in pairs if x.passed and not y.passed)
    to_pass = sum(1 for x, y in pairs if y.passed and not x.passed)
    paired = len(pairs) >= 2 and 2 * len(pairs) >= min(len(a), len(b))
    out.update(paired=paired, pairs=len(pairs), flips_to_fail=to_fail, flips_to_pass=to_pass)
    rng = np.random.default_rng(seed)
    if paired:
        d = np.array([[y.score - x.score, float(y.passed) - float(x.passed)] for x, y in pairs])
        stats = bootstrap_paired(d, resamples, rng)
        diff = d.mean(axis=0)
        mc: float | None = mcnemar_p(to_fail, to_pass)
    elif len(a) >= 2 and len(b) >= 2:
        va = np.array([[c.score, float(c.passed)] for c in a])
        vb = np.array([[c.score, float(c.passed)] for c in b])
        stats = bootstrap_unpaired(va, vb, resamples, rng)
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
        verdict=_verdict(score_ci, pass_ci, mc, to_fail, to_pass),
    )
    # cases on both sides, most regressed first (a pass→fail flip before a mere drop)
    worst = sorted(
        (p for p in pairs if p[1].score < p[0].score or (p[0].passed and not p[1].passed)),
        key=lambda p: (not (p[0].passed and not p[1].passed), p[1].score - p[0].score),
    )
    out["regressed_count"] = len(worst)
    out["regressed"] = [_case_out(x, y) for x, y in worst[:keep]]
    # and the other way round: most improved first (a fail→pass flip before a mere gain)
    best = sorted(
        (p for p in pairs if p[1].score > p[0].score or (p[1].passed and not p[0].passed)),
        key=lambda p: (not (p[1].passed and not p[0].passed), p[0].score - p[1].score),
    )
    out["improved_count"] = len(best)
    out["improved"] = [_case_out(x, y) for x, y in best[:keep]]
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
    verdicts = {e["verdict"] for e in evals}
    if "B worse" in verdicts:
        overall = "B worse"
    elif "B better" in verdicts and "mixed" not in verdicts:
        overall = "B better"
    elif "mixed" in verdicts:
        overall = "mixed"
    elif evals and verdicts <= {"not enough data"}:
        overall = "not enough data"
    else:
        overall = "no clear difference"
    return {
        "a": a.label,
        "b": b.label,
        "seed": seed,
        "resamples": resamples,
        "verdict": overall,
        "worse": any(e["verdict"] == "B worse" for e in evals),
        "evals": evals,
    }
