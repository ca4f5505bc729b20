"""``Service.iter_run_rows``: a stored run's rows with their texts, in the order stored (ids
counted as numbers past 9), on both backends; the row's origin as its explanation keeps it;
an unknown run is ``NotFound``."""

from __future__ import annotations

import pytest

from simeval.errors import NotFound
from simeval.service import Service


def test_a_run_s_rows_come_back_with_their_texts_in_order(db: str) -> None:
    with Service(db) as svc:
        other = svc.create_run("other", "o.jsonl")
        svc.add_run_results(other, [{"output": "x", "reference": "y", "score": 0.1}])
        run_id = svc.create_run("golden", "cases.jsonl")
        rows = [
            {
                "eval_name": "capital" if i % 2 else None,
                "input": None if i == 3 else f"question {i}",
                "output": f"output {i} </script>",
                "references": ["first reference", f"reference {i}"],
                "matched_reference": 1,
                "score": i / 20,
                "threshold": 0.5,
                "fingerprint": "fp",
                "explanation": {"case": {"id": f"c{i}", "row": f"cases.jsonl line {i + 1}",
                                         "ordinal": i}} if i != 7 else None,
            }
            for i in range(12)
        ]  # fmt: skip
        svc.add_run_results(run_id, rows)
        got = list(svc.iter_run_rows(run_id))
        with pytest.raises(NotFound, match="no run with id 999"):
            list(svc.iter_run_rows(999))
    assert [r.output for r in got] == [f"output {i} </script>" for i in range(12)]
    assert [r.eval_name for r in got[:2]] == [None, "capital"]
    assert got[3].input is None and got[4].input == "question 4"
    assert {r.reference for r in got} == {f"reference {i}" for i in range(12)}
    assert {r.matched_index for r in got} == {1}
    assert [r.score for r in got] == [i / 20 for i in range(12)]
    assert [r.passed for r in got] == [i / 20 >= 0.5 for i in range(12)]
    assert got[11].case == {"id": "c11", "row": "cases.jsonl line 12", "ordinal": 11}
    assert got[7].case == {} and got[7].fingerprint == "fp" and got[7].threshold == 0.5
