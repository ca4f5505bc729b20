"""Reading compare sides by columns (issue 22): packed results as numpy columns equal
``unpack_results`` blob by blob, whatever mix of layouts; a side's sample levels nest."""

from __future__ import annotations

import numpy as np

from simeval.service.compare_read import KeyBook, SideColumns
from simeval.store import pack_results, unpack_results
from simeval.store.packing import packed_columns


def entries(blobs: list[bytes]) -> list[tuple[int, int, float, float, bool]]:
    out = []
    for at, blob in enumerate(blobs):
        for eid, _, score, ok, thr, _, _ in unpack_results(blob).rows():
            out.append((at, eid, score, thr, ok))
    return out


def columns_of(
    blobs: list[bytes], only: int | None = None
) -> list[tuple[int, int, float, float, bool]]:
    cols = packed_columns(blobs, only)
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
    # one eval wanted: at least its results, in the same order (the others may be left out)
    for blobs in (same, mixed):
        for only in (3, 5, 9, 7, 4):
            got = [e for e in columns_of(blobs, only) if e[1] == only]
            assert got == [e for e in columns_of(blobs) if e[1] == only]
            assert len(got) == sum(e[1] == only for e in entries(blobs))
    assert {e for _, e, *_ in columns_of(same, 5)} == {5}  # one column alone


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


def test_keys_numbered_apart_then_joined_are_one_numbering() -> None:
    """Two sides numbered by books of their own (two threads), B's then joined to A's: the
    same keys as one shared book gives, and the same seeded sample."""
    keys_a: list[object] = [f"k{i}" for i in range(3000)] + [None, 7, "k5"]
    keys_b: list[object] = [f"k{i}" for i in range(2999, -1, -2)] + ["7", None, "new", 7]
    shared, book_a, book_b = KeyBook(seed=3), KeyBook(seed=3), KeyBook(seed=3)

    def side_of(book: KeyBook, keys: list[object]) -> SideColumns:
        side = SideColumns("s", book, limit=10**9)
        n = len(keys)
        evals = np.zeros(n, np.int32) + side.eval_number(1, "e")
        side.add(book.numbers_of(keys), np.arange(n), evals, np.zeros(n), np.ones(n, bool),
                 np.arange(n))  # fmt: skip
        return side

    def texts(side: SideColumns) -> list[str | None]:
        names = {v: k for k, v in side.book.numbers.items()}
        cols = side.columns("e")
        assert cols is not None
        return [names.get(int(k)) for k in cols.keys]

    together = side_of(shared, keys_a), side_of(shared, keys_b)
    apart = side_of(book_a, keys_a), side_of(book_b, keys_b)
    apart[1].renumber(book_a, book_a.absorb(book_b))
    expected = [[None if k is None else str(k) for k in keys] for keys in (keys_a, keys_b)]
    assert [texts(s) for s in together] == [texts(s) for s in apart] == expected
    assert apart[1].book is book_a and book_a.numbers == shared.numbers
    for side in (*together, *apart):
        side.restrict(2)
    assert [texts(s) for s in together] == [texts(s) for s in apart]
    assert 0 < len(texts(apart[0])) < len(keys_a)
