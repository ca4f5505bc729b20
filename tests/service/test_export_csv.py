"""The export's CSV is written as its cells (issue 22): what several rows share made into a
cell once, each row joined from cells. It must be, byte for byte, the document
``csv.writer`` writes for the same values, on SQLite and PostgreSQL, whatever the texts hold
(commas, quotes, line breaks, a lone carriage return, formulas, non-ASCII, blanks). The JSON
document is made the same way and must be, byte for byte, its rows encoded one by one.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from simeval.csvcells import neutralise_formula
from simeval.runs import store_run
from simeval.service import Service
from simeval.service.export import EXPORT_COLUMNS, csv_cell, csv_line

TRICKY = [
    "plain",
    "",
    "a,b",
    'say "hi"',
    '"quoted", and more',
    "two\nlines",
    "carriage\rreturn",
    "both\r\nends",
    "=SUM(A1)",
    "-1",
    "@home",
    "ça, déjà",
    " padded ",
    "tab\tinside",
    'end"',
]


def written(rows: list[list[Any]]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


def lone_cr(value: Any) -> bool:
    return isinstance(value, str) and "\r" in value.replace("\r\n", "")


@pytest.mark.parametrize("value", [*TRICKY, None, 0.1, 1e-300, 3, -0.0, float("inf")], ids=repr)
def test_a_cell_is_what_the_writer_writes(value: Any) -> None:
    # a cell between two others, and a line of cells
    if lone_cr(value):  # Python 3.11's writer leaves it unquoted: its own reader refuses it
        assert csv_cell(value) == '"' + value + '"'
    else:
        assert "x," + csv_cell(value) + ",y\n" == written([["x", value, "y"]])
        assert csv_line([value, value, "z"]) == written([[value, value, "z"]])
    line = csv_line([value, "z"])
    assert next(csv.reader(io.StringIO(line))) == ["" if value is None else str(value), "z"]


def read_back(document: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(document)))


def as_cells(rows: list[list[Any]]) -> list[list[str]]:
    return [["" if v is None else str(v) for v in row] for row in rows]


def as_csv(value: Any) -> Any:
    """A value of ``iter_export_rows`` as the CSV holds it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, str):
        return neutralise_formula(value)
    return value


def tricky_store(svc: Service) -> None:
    """Evals, captures, reviews and a run whose texts hold every ``TRICKY`` text."""
    svc.create_eval("capital city", ["Paris is the capital, of France."], threshold=0.5)
    svc.create_eval("seine", ["=The Seine\nflows through Paris."], threshold=0.5)
    for name in ("capital city", "seine"):
        svc.test_eval(name, "q", "Paris")
        svc.activate_eval(name)
    start = datetime.now(UTC) - timedelta(hours=2)
    items = [
        {
            "input": TRICKY[i % len(TRICKY)] or "q",
            "output": TRICKY[(i * 7) % len(TRICKY)] + " Paris is the capital",
            "conversation_id": TRICKY[(i * 3) % len(TRICKY)] or None,
            "metadata": {"engine": TRICKY[i % len(TRICKY)], "n": i, "x": 0.5},
            "captured_at": (start + timedelta(seconds=i)).isoformat(),
        }
        for i in range(3 * len(TRICKY))
    ]
    svc.capture_many(items)
    for k, r in enumerate(svc.list_results(limit=6, explain=False)):
        svc.review_result(r.id, 0.9 if k % 2 else 0.1, note=TRICKY[k + 2])
    row = ("capital city", 1, 0.3, False, 0.5, "fp", 0, 'in, "put"', "out\nput", "=ref", None)
    store_run(svc, "night, ly", "cases.jsonl", [[row] * 2], {})


def test_the_document_is_the_writers(db: str) -> None:
    svc = Service(db)
    try:
        tricky_store(svc)
        for where in ({}, {"passed": False}, {"reviewed": True}, {"eval_name": "seine"}):
            rows = [[as_csv(v) for v in r.values()] for r in svc.iter_export_rows(None, **where)]
            assert len(rows) > 3
            got = svc.export_results("csv", None, **where)
            # read back by a CSV reader as the rows it was made from (a lone "\r" quoted)
            assert read_back(got) == as_cells([list(EXPORT_COLUMNS), *rows]), where
        # a run's rows alone, and nothing at all
        got = svc.export_results("csv", None, run_id=1)
        rows = [[as_csv(v) for v in r.values()] for r in svc.iter_export_rows(None, run_id=1)]
        assert len(rows) == 2 and got == written([list(EXPORT_COLUMNS), *rows])
        assert read_back(got) == as_cells([list(EXPORT_COLUMNS), *rows])
        assert svc.export_results("csv", None, since="2099-01-01") == written(
            [list(EXPORT_COLUMNS)]
        )
    finally:
        svc.close()


def test_the_json_document_is_its_rows_encoded(db: str) -> None:
    svc = Service(db)
    encode = json.JSONEncoder(ensure_ascii=False).encode
    try:
        tricky_store(svc)
        wheres: list[dict[str, Any]] = [{}, {"passed": False}, {"reviewed": True}, {"run_id": 1}]
        for where in [*wheres, {"eval_name": "seine"}, {"since": "2099-01-01"}]:
            rows = [encode(r) for r in svc.iter_export_rows(None, **where)]
            want = "[\n" + ",\n".join(rows) + "\n]\n" if rows else "[]\n"
            assert svc.export_results("json", None, **where) == want, where
    finally:
        svc.close()
