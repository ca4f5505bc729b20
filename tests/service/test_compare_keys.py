"""Compare's case keys, read in SQL (issue 22): a captured result pairs by its metadata's
``case_id`` (the JSON parsed only when its text names the key), else by its input; repeated
keys pair in time order. On every backend the pairs, flips and differences equal a plain
Python pairing of the same results, however the sides are read (on PostgreSQL both at once,
each in its own thread with its own key numbering)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest

from simeval.service import Service

REFERENCE = "The capital of France is Paris, which stands on the Seine."
GOOD = "Paris, on the Seine, is the capital of France."
POOR = "France is a large country in western Europe."
MIDDLE = "The capital of France is Paris."
START = datetime(2026, 11, 1, 12, 0, 0)


def _rows() -> list[dict[str, Any]]:
    """Captures of both sides, inserted out of time order where the order matters."""
    rows: list[dict[str, Any]] = []

    def add(engine: str, minute: int, input: str, output: str, **meta: Any) -> None:
        rows.append(
            {"input": input, "output": output, "metadata": {"engine": engine, **meta},
             "captured_at": (START + timedelta(minutes=minute)).isoformat()}
        )  # fmt: skip

    for i in range(20):  # by a text case id (each side seeing the keys in another order)
        add("v1", i, f"q{i}", GOOD if i % 3 else MIDDLE, case_id=f"c{i}")
        add("v2", 119 - i, f"other q{i}", POOR if i % 4 == 0 else GOOD, case_id=f"c{i}")
    for i in range(5):  # by a number case id; "3" as text on one side, 3 on the other
        add("v1", 30 + i, "n", GOOD, case_id=i)
        add("v2", 130 + i, "n", MIDDLE if i % 2 else POOR, case_id=str(i) if i == 3 else i)
    # by the input, repeated: pairs in time order, not in the order stored
    add("v1", 52, "dup", GOOD)
    add("v1", 50, "dup", POOR)
    add("v1", 51, "dup", MIDDLE)
    add("v2", 151, "dup", GOOD)
    add("v2", 150, "dup", POOR)
    # "case_id" as a value, a nested key, a null case id: all by the input
    add("v1", 60, "noted", GOOD, note="case_id")
    add("v2", 160, "noted", POOR, note='"case_id"')
    add("v1", 61, "nested", POOR, extra={"case_id": "zz"})
    add("v2", 161, "nested", GOOD, extra={"case_id": "zz"})
    add("v1", 62, "null id", GOOD, case_id=None)
    add("v2", 162, "null id", POOR, case_id=None)
    # no case id and an empty input: no key, never paired
    add("v1", 70, "", GOOD)
    add("v2", 170, "", POOR)
    return rows


def _key(meta: dict[str, Any], input: str) -> str | None:
    case_id = meta.get("case_id")
    return str(case_id) if case_id is not None else (input or None)


def _plain_pairs(results: list[Any], engine: str) -> dict[tuple[str, int], Any]:
    """A side's results by (key, occurrence), in time order."""
    mine = sorted(
        (r for r in results if (r.metadata or {}).get("engine") == engine),
        key=lambda r: (r.captured_at, r.capture_id),
    )
    seen: Counter[str] = Counter()
    out = {}
    for r in mine:
        key = _key(r.metadata or {}, r.input)
        if key is None:
            continue
        out[(key, seen[key])] = r
        seen[key] += 1
    return out


@pytest.mark.parametrize("order", ["ab", "ba"])
def test_pairs_equal_a_plain_python_pairing(db: str, order: str) -> None:
    with Service(db) as svc:
        svc.create_eval("capital", REFERENCE, threshold=0.5)
        svc.test_eval("capital", "q", GOOD)
        svc.activate_eval("capital")
        svc.capture_many(_rows())
        a, b = ("v1", "v2") if order == "ab" else ("v2", "v1")
        report = svc.compare(
            f"captures:engine={a}", f"captures:engine={b}", resamples=200, keep=1000
        )
        results = svc.list_results(eval_name="capital", limit=1000, explain=False)
    side_a, side_b = _plain_pairs(results, a), _plain_pairs(results, b)
    pairs = [(side_a[k], side_b[k]) for k in side_a if k in side_b]
    (e,) = report.evals
    count = Counter(r["metadata"]["engine"] for r in _rows())
    assert e.a.n == e.a.total == count[a] and e.b.n == e.b.total == count[b]
    # 20 + 5 case ids, 2 of the repeated inputs, "noted", "nested", "null id"
    assert e.pairs == len(pairs) == 30
    assert e.flips_to_fail == sum(x.passed and not y.passed for x, y in pairs)
    assert e.flips_to_pass == sum(y.passed and not x.passed for x, y in pairs)
    diff = sum(y.score - x.score for x, y in pairs) / len(pairs)
    assert e.score_diff == pytest.approx(diff)
    worse = [(x, y) for x, y in pairs if y.score < x.score or (x.passed and not y.passed)]
    assert e.regressed_count == len(worse)
    # every listed case is the pair the plain pairing makes
    by_result = {y.id: x.id for x, y in pairs}
    assert e.regressed and all(by_result[c.result_b] == c.result_a for c in e.regressed)
    assert e.improved and all(by_result[c.result_b] == c.result_a for c in e.improved)
