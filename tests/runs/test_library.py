"""Runs driven through the library, not the command line: ``run_file`` on a file in a temp
dir (the summary's fields, the results file), ``run_request`` storing into a real SQLite
database through its writer process, gates and baselines, calibration, and the writer
process's imports."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import simeval
from simeval import runs
from simeval.scoring.explain import missing_terms
from simeval.service import Service

ROWS = [
    {"id": "paris", "input": "Capital of France?", "output": "Paris is the capital of France.",
     "reference": "The capital of France is Paris."},
    {"id": "tokyo", "output": "Kyoto is a city in Japan.",
     "reference": "Tokyo is the capital of Japan."},
    {"id": 3, "output": "Water boils at 100 degrees.", "reference": "Water boils at 100 °C."},
]  # fmt: skip


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_run_file_summary_and_results_file(tmp_path: Path) -> None:
    src = _write(tmp_path / "cases.jsonl", ROWS)
    summary = runs.run_file(str(src), runs.RunOptions(worst=2))
    assert isinstance(summary, runs.RunSummary)
    out = [json.loads(x) for x in (tmp_path / "cases.results.jsonl").read_text().splitlines()]
    scorer = simeval.get_scorer()
    scores = [scorer.score(r["output"], r["reference"], r.get("input")) for r in ROWS]
    assert [r["score"] for r in out] == scores
    assert [r["pass"] for r in out] == [s >= 0.8 for s in scores]
    assert (summary.rows, summary.results, summary.skipped) == (3, 3, 0)
    assert summary.passed == sum(s >= 0.8 for s in scores) and summary.failed == 3 - summary.passed
    assert summary.mean_score == pytest.approx(sum(scores) / 3)
    assert summary.file == str(src) and summary.format == "jsonl"
    assert summary.results_file == str(tmp_path / "cases.results.jsonl")
    assert summary.fingerprint == scorer.fingerprint and summary.threshold == 0.8
    assert summary.fingerprints == [scorer.fingerprint]
    assert summary.evals is None and summary.baseline is None and summary.gates is None
    assert summary.ok  # no gate asked for
    (worst, *_) = summary.worst
    assert worst.id == "tokyo" and not worst.passed and worst.where.endswith("line 2")
    assert worst.missing_terms == missing_terms(scorer, ROWS[1]["output"], ROWS[1]["reference"])
    # the dict the command prints: the keys of the typed fields, those that do not apply left out
    d = summary.to_dict()
    assert list(d)[:11] == [
        "rows", "results", "passed", "failed", "skipped", "skipped_rows", "pass_rate",
        "mean_score", "worst", "most_missing", "fingerprints",
    ]  # fmt: skip
    assert "evals" not in d and "gates" not in d and "ok" not in d and "run_id" not in d
    assert d["worst"][0]["pass"] is False and d["worst"][0]["id"] == "tokyo"


@pytest.mark.process
def test_run_request_gates_baseline_and_store(
    tmp_path: Path, new_sqlite: Callable[..., str]
) -> None:
    db = new_sqlite("runs.db")
    src = _write(tmp_path / "cases.jsonl", ROWS)
    first = runs.run_request(
        runs.RunRequest(str(src), store=True, db=db, gates=runs.GateLimits(min_pass_rate=0.5)),
    )
    assert first.run_id is not None and first.run_name == "cases.jsonl"
    assert [(g.gate, g.passed) for g in first.gates or ()] == [("min-pass-rate", True)]
    with Service(db) as svc:
        run = svc.get_run(first.run_id)
        assert run.status == "complete" and run.results == 3
        # the stored summary is the printed one without its id and verdict, gates included
        stored = {k: v for k, v in run.summary.items() if k not in ("status", "run_id")}
        assert stored == json.loads(json.dumps(first.stored()))
        assert run.summary["gates"][0]["gate"] == "min-pass-rate"
    # a second run against the first, stored: every case compared, none regressed
    second = runs.run_request(
        runs.RunRequest(
            str(src),
            baseline="run:latest",
            store=True,
            db=db,
            results=str(tmp_path / "second.jsonl"),
            gates=runs.GateLimits(max_regressions=0, min_mean_score=0.99),
        )
    )
    assert second.baseline is not None
    assert (second.baseline.compared, second.baseline.regressed) == (3, 0)
    assert [g.gate for g in second.gates or ()] == ["min-mean-score", "max-regressions"]
    assert not second.ok  # the mean score gate failed; the run is stored all the same
    printed = second.to_dict()
    assert list(printed)[-4:] == ["run_name", "run_id", "gates", "ok"]
    with Service(db) as svc:
        assert [r.id for r in svc.list_runs()] == [second.run_id, first.run_id]


def test_run_store_thread_into_a_service(tmp_path: Path) -> None:
    src = _write(tmp_path / "cases.jsonl", ROWS * 5)
    with Service(str(tmp_path / "a.db")) as svc:
        sink = runs.RunStore(svc, "nightly", str(src))
        summary = runs.run_file(str(src), runs.RunOptions(store=sink, chunk_rows=4))
        assert summary.run_id is not None
        got = svc.list_results(run_id=summary.run_id, limit=100, explain=False)
        run = svc.get_run(summary.run_id)
    assert run.results == 15 and run.summary["status"] == "complete"
    assert run.summary["run_name"] == "nightly" and run.options["scorer"] == {}
    ordinals = sorted((r.explanation or {})["case"]["ordinal"] for r in got)
    assert ordinals == list(range(15))


def test_eval_file_run_and_calibration(tmp_path: Path) -> None:
    evals = tmp_path / "evals.json"
    evals.write_text(
        json.dumps({"evals": [{"name": "capital", "references": ["Paris is the capital."]}]})
    )
    rows = [
        {"output": "Paris is the capital.", "label": "pass"},
        {"output": "Paris is a capital city.", "label": "pass"},
        {"output": "Lyon is a city.", "label": "fail"},
        {"output": "Bananas are yellow.", "label": "fail"},
    ]
    src = _write(tmp_path / "labelled.jsonl", rows)
    summary = runs.run_request(runs.RunRequest(str(src), evals_file=str(evals), workers=1))
    assert summary.evals is not None and summary.evals["capital"].results == 4
    assert summary.unmatched_rows == 0 and summary.fingerprint is None
    assert "threshold" not in summary.to_dict() and summary.to_dict()["evals"]["capital"]
    report = runs.calibrate_request(
        runs.CalibrationRequest(str(src), label_col="label", workers=1,
                                columns=runs.Columns(references=("output",)))
    )  # fmt: skip
    assert isinstance(report, runs.CalibrationSummary)
    assert (report.examples, report.positives, report.reviews) == (4, 2, 0)
    assert report.source == str(src) and report.eval is None
    assert list(report.to_dict())[-3:] == ["reviews", "fingerprint", "options"]


# the run's database writer: a fresh interpreter that imports only what storing needs
WRITER_MAY_LOAD = (
    "simeval.errors",
    "simeval.checks",
    "simeval.jsontypes",  # the types of JSON data (two aliases)
    "simeval.processes",
    "simeval.runs.frames",
    "simeval.runs.store_writer",
    "simeval.scoring._fast",
    "simeval.scoring._vector",
    "simeval.scoring.analyzer",
    "simeval.scoring.bands",  # the scorer's scale (a small module and its curve file)
    "simeval.scoring.batch",
    "simeval.scoring.explain",
    "simeval.scoring.idf",
    "simeval.scoring.options",
    "simeval.scoring.required",  # explanations name missing required terms (small)
    "simeval.scoring.scorer",
    "simeval.scoring.synonyms",  # explanations mark synonym matches (small)
    "simeval.scoring.vetoes",  # the scorer's contradiction checks (stdlib only)
    "simeval.scoring.written",  # how the scorer reads answers (stdlib only)
    "simeval.service.actor",  # a run's deletion recorded in the audit log (no pydantic)
    "simeval.service.base",
    "simeval.service.cursor",  # the runs listing's keyset cursor (stdlib only)
    "simeval.service.runs",
    "simeval.service.runstatus",
    "simeval.store",
    "simeval.lazy",  # the package faces' name-on-first-use helper
)
NEVER = ("fastapi", "starlette", "click", "rich", "pydantic", "alembic", "yaml", "pyarrow",
         "jinja2", "uvicorn", "httpx", "dask")  # fmt: skip


@pytest.mark.process
def test_the_writer_process_imports_only_what_storing_needs() -> None:
    code = "import sys, simeval.runs.store_writer; print('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = set(done.stdout.split())
    assert not sorted(m for m in loaded if m.split(".")[0] in NEVER)
    ours = {m for m in loaded if m.startswith("simeval.")}
    extra = sorted(
        m
        for m in ours - {"simeval.runs", "simeval.scoring", "simeval.service"}
        if not any(m == ok or m.startswith(ok + ".") for ok in WRITER_MAY_LOAD)
    )
    assert extra == []  # e.g. the rest of simeval.runs, the CLI, the web app, the evalset
