"""The results export, streamed and explained in bulk (issue 22), on SQLite and PostgreSQL.

The bulk explanations of the failing rows (one vector per capture and scorer, missing terms
from the explainer's fast path) must name what a result shown alone names (``get_result``,
explained one at a time with its own query); every other column must be what the result says;
and the rows must be ``iter_rows``'s, in its order, under every filter, captures and a
data-set run's rows merged by time. Through the API, the answer streams (no length known
beforehand) and parses as CSV and as a JSON array.
"""

from __future__ import annotations

import csv
import io
import json
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from simeval.csvcells import neutralise_formula
from simeval.runs import store_run
from simeval.scoring.bench import synthetic_texts
from simeval.service import Service
from simeval.service.export import EXPORT_COLUMNS
from simeval.service.filters import ResultFilter
from simeval.service.models import ResultOut
from simeval.service.queries import iter_rows
from simeval.store import Capture, pack_results, unpack_results
from simeval.web.app import create_app

EVALS: list[tuple[str, list[str], dict[str, Any]]] = [
    ("plain", ["Paris is the capital of France.", "The French capital is Paris."], {}),
    ("exact", ["The Seine flows through Paris to the sea."], {"stemming": False}),
    ("needs", ["Paris, on the Seine, is the capital."], {"required": ["Seine", "capital"]}),
    ("same", ["The meeting will begin at nine."], {"synonyms": [["begin", "commence"]]}),
    ("pairs", ["Water boils at one hundred degrees."], {"ngram": 2}),
    ("naive", ["Light is faster than sound."], {"idf": "pair"}),
    ("french", ["Paris est la capitale de la France."], {"language": "french"}),
    ("asked", ["Mount Everest is the tallest mountain."], {"input_weight": 0.2}),
]


def reasoning_one_at_a_time(out: ResultOut) -> str:
    """The export's reasoning as it was written before the bulk path: from one result's
    explanation (the oracle the bulk path is held to)."""
    score = out.review.score if out.review is not None else out.score
    sign = "≥" if out.passed else "<"
    line = f"{score:.2f} {sign} {out.threshold:.2f}"
    if out.review is not None:
        line += " (reviewed)"
    exp = out.explanation or {}
    required = exp.get("missing_required") or []
    if required and out.review is None:
        return f"{score:.2f}: required term missing: " + ", ".join(required)
    missing = [m.get("term") if isinstance(m, dict) else str(m) for m in exp.get("missing") or []]
    missing = [m for m in missing if m][:5]
    if not out.passed and missing:
        line += ": missing " + ", ".join(missing)
    elif not out.passed and exp.get("reason"):
        line += f": {exp['reason']}"
    return line


def expected_row(out: ResultOut) -> dict[str, Any]:
    """The export row of one result, from the result as the service shows it alone; only a
    failing captured result's explanation counts (as the export has always done)."""
    if out.capture_id is not None and out.passed:
        out = out.model_copy(update={"explanation": None})
    exp = out.explanation or {}
    return {
        "result_id": out.id,
        "capture_id": out.capture_id,
        "run_id": out.run_id,
        "run_status": out.run_status,
        "conversation_id": out.conversation_id,
        "captured_at": out.captured_at.isoformat(),
        "eval_name": out.eval_name,
        "eval_type": out.eval_type,
        "eval_version": out.eval_version,
        "input": out.input,
        "output": out.output,
        "score": out.score,
        "pass": out.passed,
        "automated_pass": out.automated_passed,
        "threshold": out.threshold,
        "human_override_score": out.review.score if out.review else None,
        "human_override_note": out.review.note if out.review else None,
        "reviewed_at": out.review.created_at.isoformat() if out.review else None,
        "fingerprint": out.fingerprint,
        "matched_reference": out.matched_reference,
        "metadata": out.metadata,
        "reasoning": reasoning_one_at_a_time(out),
        "missing_required": ", ".join(exp.get("missing_required") or []),
    }


def as_csv(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, str):
        return neutralise_formula(value)
    return str(value)


def fill(svc: Service, captures: int = 150) -> None:
    """Evals of every kind of scorer; captures of generated texts (some blank of terms, some
    repeating the question, some written as formulas), a second version of one eval, reviews
    both ways, results stored by another scorer than the version's, and a data-set run whose
    rows fall between the captures in time."""
    rng = random.Random(22)
    words = synthetic_texts(40, words=12, seed=22)
    for name, refs, options in EVALS:
        svc.create_eval(name, refs, threshold=0.5, options=options)
        svc.test_eval(name, "q", refs[0])
        svc.activate_eval(name)
    pieces = [r for _, refs, _ in EVALS for r in refs] + words + ["commence at nine", "?!"]
    start = datetime.now(UTC) - timedelta(hours=5)
    questions = ["What is the capital of France?", "How tall is Mount Everest?", "q"]

    def one(i: int) -> dict[str, Any]:
        picked = rng.sample(pieces, rng.randint(1, 3))
        text = " ".join(" ".join(w for w in p.split() if rng.random() < 0.7) for p in picked)
        if i % 17 == 0:
            text = "=SUM(A1) " + text
        return {
            "input": rng.choice(questions),
            "output": text if text.strip() else "?!",
            "conversation_id": f"c{i % 7}",
            "metadata": {"engine": "v2" if i % 2 else "v1", "note": "ça"},
            "captured_at": (start + timedelta(seconds=60 * i)).isoformat(),
        }

    svc.capture_many([one(i) for i in range(captures)])
    svc.edit_eval("plain", references=["Paris is the capital and largest city of France."])
    svc.test_eval("plain", "q", "Paris is the capital and largest city of France.")
    svc.activate_eval("plain")
    svc.capture_many([one(i) for i in range(captures, captures + 40)])
    failing = svc.list_results(passed=False, limit=40, explain=False)
    for k, r in enumerate(failing[:12]):
        svc.review_result(r.id, 0.95 if k % 2 else 0.1, note=f"=note {k}")
    # results scored by an older scorer (another fingerprint): explained one at a time
    with svc.store.write() as s:
        for cap in s.scalars(select(Capture).order_by(Capture.id).limit(5)):
            rows = list(unpack_results(cap.scores).rows())
            old = [(e, v, sc, ok, th, at, "0ldscorer") for e, v, sc, ok, th, at, _ in rows]
            s.execute(update(Capture).where(Capture.id == cap.id).values(scores=pack_results(old)))
    row = ("plain", 1, 0.3, False, 0.5, "fp-run", 0, "q", "-out", "Paris", None)
    store_run(svc, "nightly", "cases.jsonl", [[row] * 3, [(*row[:2], 0.9, True, *row[4:])]], {})


def by_iter_rows(svc: Service, f: ResultFilter) -> list[str]:
    with svc.store.read() as s:
        eval_id = None if f.eval_name is None else svc.get_eval(f.eval_name).id
        return [r.id for r in iter_rows(s, f, eval_id, newest=False)]


def expected_rows(svc: Service, ids: list[str]) -> list[dict[str, Any]]:
    runs = {r.id: r for r in svc.list_results(run_id=1, limit=1000, explain=False)}
    return [expected_row(runs[i] if i.startswith("r") else svc.get_result(i)) for i in ids]


@pytest.mark.slow
def test_bulk_explanations_equal_one_at_a_time(db: str) -> None:
    svc = Service(db)
    try:
        fill(svc)
        ids = by_iter_rows(svc, ResultFilter())
        assert len(ids) == 190 * len(EVALS) + 4
        got = list(svc.iter_export_rows())
        want = expected_rows(svc, ids)
        assert [r["result_id"] for r in got] == ids  # iter_rows's rows, in its order
        for g, w in zip(got, want, strict=True):
            assert g == w, g["result_id"]
        # the texts the bulk path explains: every kind of reasoning occurs
        lines = [r["reasoning"] for r in got]
        assert any(": missing " in x for x in lines)
        assert any("required term missing" in x for x in lines)
        assert any("(reviewed)" in x for x in lines)
        assert sum(not r["pass"] for r in got) > len(got) // 4
        # the CSV holds the same values, written as the CSV writes them
        text = svc.export_results("csv")
        rows = list(csv.DictReader(io.StringIO(text)))
        assert list(rows[0]) == list(EXPORT_COLUMNS)
        assert rows == [{k: as_csv(v) for k, v in r.items()} for r in want]
        assert json.loads(svc.export_results("json")) == json.loads(json.dumps(want))
    finally:
        svc.close()


@pytest.mark.parametrize(
    "fields",
    [
        {"passed": False},
        {"passed": True, "eval_name": "needs"},
        {"reviewed": True},
        {"reviewed": False, "passed": False},
        {"meta": ["engine=v2"], "passed": False},
        {"conversation_id": "c3"},
        {"run_id": 1},
        {"eval_name": "plain", "since": "4h"},
    ],
    ids=repr,
)
def test_filtered_export_is_the_listing(db: str, fields: dict[str, Any]) -> None:
    svc = Service(db)
    try:
        fill(svc, captures=40)
        f = ResultFilter.parse(**fields)
        ids = by_iter_rows(svc, f)
        assert ids
        got = list(svc.iter_export_rows(f))
        assert [r["result_id"] for r in got] == ids
        assert got == expected_rows(svc, ids)
    finally:
        svc.close()


def test_the_api_streams_every_row(db: str) -> None:
    svc = Service(db)
    fill(svc, captures=400)  # 3,500 results: several pieces of the streamed answer
    svc.close()
    with TestClient(create_app(db=db), base_url="http://127.0.0.1:8000") as client:
        want = by_iter_rows(client.app.state.service, ResultFilter())  # type: ignore[attr-defined]
        assert len(want) > 3000
        with client.stream("GET", "/api/results/export", params={"format": "csv"}) as r:
            assert r.status_code == 200 and "content-length" not in r.headers
            assert r.headers["content-type"].startswith("text/csv")
            body = "".join(r.iter_text())
        rows = list(csv.DictReader(io.StringIO(body)))
        assert [row["result_id"] for row in rows] == want
        r = client.get("/api/results/export", params={"format": "json", "passed": "false"})
        assert r.status_code == 200 and "content-length" not in r.headers
        data = json.loads(r.text)
        failing = [row["result_id"] for row in rows if row["pass"] == "false"]
        assert isinstance(data, list) and [d["result_id"] for d in data] == failing
        assert all(d["pass"] is False and d["reasoning"] for d in data)
        # nothing matches: still a valid document
        r = client.get("/api/results/export", params={"format": "json", "since": "2099-01-01"})
        assert r.json() == []
        r = client.get("/api/results/export", params={"since": "2099-01-01"})
        assert r.text.strip() == ",".join(EXPORT_COLUMNS)
        # an unknown eval is a 404 before the answer starts, not a cut-off stream
        r = client.get("/api/results/export", params={"eval": "ghost"})
        assert r.status_code == 404 and "ghost" in r.json()["error"]
