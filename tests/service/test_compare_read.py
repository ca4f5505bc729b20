"""Reading compare sides by columns (issue 22): packed results as numpy columns equal
``unpack_results`` blob by blob, whatever mix of layouts; a side's sample levels nest."""

from __future__ import annotations

import numpy as np

from simeval.service.compare_read import KeyBook, SideColumns, packed_columns
from simeval.store import pack_results, unpack_results


def entries(blobs: list[bytes]) -> list[tuple[int, int, float, float, bool]]:
    out = []
    for at, blob in enumerate(blobs):
        for eid, _, score, ok, thr, _, _ in unpack_results(blob).rows():
            out.append((at, eid, score, thr, ok))
    return out


def columns_of(blobs: list[bytes]) -> list[tuple[int, int, float, float, bool]]:
    cols = packed_columns(blobs)
    got = zip(
        cols.case.tolist(),
        cols.eval_ids.tolist(),
        cols.scores.tolist(),
        cols.thresholds.tolist(),
        cols.passed.tolist(),
        strict=True,
    )
    return list(got)


def test_packed_columns_equal_unpacking_each_blob() -> None:
    gen = np.random.default_rng(2)

    def blob(evals: list[int], fps: list[str]) -> bytes:
        return pack_results(
            (e, 1, float(gen.uniform()), bool(gen.uniform() < 0.5), 0.5, 0, fps[k % len(fps)])
            for k, e in enumerate(evals)
        )

    same = [blob([3, 5, 9], ["a" * 16]) for _ in range(7)]
    # one layout, one eval list: eval by eval, each in capture order
    got = columns_of(same)
    assert sorted(got) == sorted(entries(same))
    assert [e for _, e, *_ in got] == [3] * 7 + [5] * 7 + [9] * 7
    assert [c for c, *_ in got][:7] == list(range(7))
    # layouts of other lengths and counts (other evals, fingerprints) and an empty one:
    # every entry, in capture order
    mixed = [*same[:2], blob([5, 3], ["b" * 8]), blob([7], ["c" * 4, "d" * 4]), same[2]]
    mixed.append(pack_results([]))
    mixed.append(blob([3, 5, 9], ["e" * 16]))  # same length, another fingerprint
    assert columns_of(mixed) == entries(mixed)


def test_a_deeper_sample_keeps_a_subset_of_the_cases() -> None:
    book = KeyBook(seed=4)
    side = SideColumns("a", book, limit=10**9)
    n = 4000
    keys = np.array([book.number(f"case-{i}") for i in range(n)], np.int64)
    evals = np.zeros(n, np.int32) + side.eval_number(1, "e")
    side.add(keys, np.arange(n), evals, np.linspace(0, 1, n), np.ones(n, bool), np.arange(n))
    kept = []
    for level in (1, 2, 3):
        side.restrict(level)
        cols = side.columns("e")
        assert cols is not None
        kept.append(set(cols.keys.tolist()))
    assert kept[0] > kept[1] > kept[2]  # nested: a deeper level keeps fewer of the same
    assert abs(len(kept[2]) - n / 8) < 4 * (n / 8) ** 0.5  # uniform: about 1/8 kept
    assert side.total == [n]  # what the side holds, whatever is kept
