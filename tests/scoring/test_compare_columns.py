"""The columnar compare (issue 22): the bootstrap drawn by counts against a plain-loop
bootstrap on generated data, the exact bootstrap drawn in chunks against one draw, McNemar in
logarithms against exact integers, and pairing and listing against the plain Python rules."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simeval.scoring import compare as cmp
from simeval.scoring.compare import Case, Cases, compare_eval, mcnemar_p, pair_indices


def loop_paired_interval(d: list[float], seed: int, resamples: int) -> tuple[float, float]:
    """The percentile bootstrap of a mean, one index at a time (the reference)."""
    rng = np.random.default_rng(seed)
    n = len(d)
    stats = []
    for _ in range(resamples):
        total = 0.0
        for _ in range(n):
            total += d[int(rng.integers(0, n))]
        stats.append(total / n)
    lo, hi = np.percentile(stats, [2.5, 97.5])
    return float(lo), float(hi)


def cases(scores: np.ndarray, threshold: float, prefix: str = "c") -> list[Case]:
    return [
        Case(f"{prefix}{i}", f"{prefix}{i}", float(s), s >= threshold) for i, s in enumerate(scores)
    ]


@pytest.mark.parametrize("bins", [8, 128])
def test_the_count_bootstrap_matches_a_plain_loop(bins: int) -> None:
    # continuous scores (every difference distinct: the binned draw) and a skewed shift
    gen = np.random.default_rng(5)
    a = gen.uniform(0.2, 1.0, 400)
    b = np.clip(a - gen.exponential(0.05, 400) + 0.02, 0, 1)
    out = compare_eval(cases(a, 0.6), cases(b, 0.6), seed=1, resamples=3000, exact=0, bins=bins)
    assert out["paired"] and out["pairs"] == 400
    d = (b - a).tolist()
    sigma = float(np.std(d) / math.sqrt(len(d)))  # the bootstrap's standard error
    ref = loop_paired_interval(d, seed=2, resamples=1500)
    # two Monte Carlo estimates of the same quantiles: a few hundredths of sigma apart
    assert out["score_ci"] == pytest.approx(list(ref), abs=0.5 * sigma)
    assert out["score_diff"] == pytest.approx(float(np.mean(d)), abs=1e-12)
    pd = (b >= 0.6).astype(float) - (a >= 0.6).astype(float)
    p_sigma = float(np.std(pd) / math.sqrt(len(pd)))
    ref_p = loop_paired_interval(pd.tolist(), seed=3, resamples=1500)
    assert out["pass_rate_ci"] == pytest.approx(list(ref_p), abs=0.5 * p_sigma + 1e-9)


def test_the_binned_draw_keeps_the_variance_of_the_index_bootstrap() -> None:
    # 2 bins of a uniform column: the bins' means alone would lose a quarter of the
    # variance (13% of the standard error); the within-bin term gives it back
    x = np.random.default_rng(8).uniform(0, 1, 3000)
    drawn = cmp._count_means(x, 20000, np.random.default_rng(0), bins=2)
    expected = float(np.std(x) / math.sqrt(x.shape[0]))
    assert float(np.std(drawn)) == pytest.approx(expected, rel=0.03)
    assert float(np.mean(drawn)) == pytest.approx(float(np.mean(x)), abs=0.1 * expected)
    # few distinct values: the exact multinomial over them, the same mean and variance
    y = np.random.default_rng(9).integers(0, 3, 5000).astype(float) - 1
    exact = cmp._count_means(y, 8000, np.random.default_rng(0))
    assert float(np.std(exact)) == pytest.approx(float(np.std(y) / math.sqrt(5000)), rel=0.03)


def test_the_same_seed_gives_the_same_answer() -> None:
    gen = np.random.default_rng(3)
    a, b = gen.uniform(0, 1, 3000), gen.uniform(0, 1, 3000)
    one = compare_eval(cases(a, 0.5), cases(b, 0.5), seed=9, exact=100)
    two = compare_eval(cases(a, 0.5), cases(b, 0.5), seed=9, exact=100)
    other = compare_eval(cases(a, 0.5), cases(b, 0.5), seed=10, exact=100)
    assert one == two and one["score_ci"] != other["score_ci"]


def test_the_exact_bootstrap_drawn_in_chunks_is_one_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    gen = np.random.default_rng(4)
    x = gen.uniform(0, 1, (37, 2))
    whole = x[np.random.default_rng(6).integers(0, 37, size=(500, 37))].mean(axis=1)
    monkeypatch.setattr(cmp, "_CHUNK", 100)  # 2 rows of 37 a step: 250 steps
    chunked = cmp._index_means(x, 500, np.random.default_rng(6))
    assert np.array_equal(whole, chunked)


def test_mcnemar_in_logarithms_matches_exact_integers() -> None:
    for f, g in [(1200, 1300), (1000, 1600), (5, 2500), (1400, 1401)]:
        n, k = f + g, min(f, g)
        exact = min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n)
        assert n > cmp.MCNEMAR_EXACT
        assert mcnemar_p(f, g) == pytest.approx(exact, rel=1e-9, abs=1e-300)


def test_pairing_and_listing_follow_the_plain_rules() -> None:
    gen = np.random.default_rng(11)
    keys_a = [f"k{int(x)}" for x in gen.integers(0, 60, 200)]  # repeated keys
    keys_b = [f"k{int(x)}" for x in gen.integers(0, 60, 200)]
    sa = np.round(gen.uniform(0, 1, 200), 1)  # rounded: ties among the drops
    sb = np.round(gen.uniform(0, 1, 200), 1)
    a = [
        Case(k, f"a{i}", float(s), s >= 0.5)
        for i, (k, s) in enumerate(zip(keys_a, sa, strict=True))
    ]
    b = [
        Case(k, f"b{i}", float(s), s >= 0.5)
        for i, (k, s) in enumerate(zip(keys_b, sb, strict=True))
    ]
    # the plain rule: the k-th "x" of A with the k-th "x" of B, in A's order
    seen: dict[str, list[int]] = {}
    for j, c in enumerate(b):
        seen.setdefault(c.key or "", []).append(j)
    used: dict[str, int] = {}
    pairs = []
    for i, c in enumerate(a):
        n = used.get(c.key or "", 0)
        used[c.key or ""] = n + 1
        if n < len(seen.get(c.key or "", [])):
            pairs.append((i, seen[c.key or ""][n]))
    numbers: dict[str, int] = {}
    ca = Cases.of(a, lambda k: numbers.setdefault(k, len(numbers)))
    cb = Cases.of(b, lambda k: numbers.setdefault(k, len(numbers)))
    ia, ib = pair_indices(ca.keys, cb.keys)
    assert list(zip(ia.tolist(), ib.tolist(), strict=True)) == pairs
    out = compare_eval(a, b, resamples=100, keep=15)
    worst = sorted(
        (p for p in pairs if sb[p[1]] < sa[p[0]] or (a[p[0]].passed and not b[p[1]].passed)),
        key=lambda p: (not (a[p[0]].passed and not b[p[1]].passed), sb[p[1]] - sa[p[0]]),
    )
    assert out["regressed_count"] == len(worst)
    assert [c["case"] for c in out["regressed"]] == [f"b{j}" for _, j in worst[:15]]
    best = sorted(
        (p for p in pairs if sb[p[1]] > sa[p[0]] or (b[p[1]].passed and not a[p[0]].passed)),
        key=lambda p: (not (b[p[1]].passed and not a[p[0]].passed), sa[p[0]] - sb[p[1]]),
    )
    assert [c["case"] for c in out["improved"]] == [f"b{j}" for _, j in best[:15]]
