"""``simeval report RUN`` and ``simeval run --html/--markdown`` on real SQLite files: the HTML
page holds every row (failing first, explained) with the change against a baseline row by
row, hostile text cannot leave its JSON element; the Markdown summary keeps its table whole
whatever the text; the job summary file is appended to, any other replaced; bad input is one
line and exit 2, before any work."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from clihelp import invoke, one_line_error
from simeval.runs import RunSummary
from simeval.service import Service

REF = "Paris is the capital of France and its largest city."
GOOD = "Paris is the capital of France and its largest city."
BAD = "Bananas are yellow."
HOSTILE = "Bananas </script><script>window.pwned=1</script><!-- | cell\nline & <b>bold</b>"
DATA_START = '<script type="application/json" id="report-data">'


def cases(outputs: dict[str, str]) -> str:
    return "".join(
        json.dumps(
            {"id": cid, "input": f"Capital of France? ({cid})", "output": out, "reference": REF}
        )
        + "\n"
        for cid, out in outputs.items()
    )


V1 = {f"c{i}": GOOD if i < 5 else BAD for i in range(10)}
# c0, c1 regress; c5, c6, c8 are fixed; c7 fails with hostile text; c10 is new
V2 = {**V1, "c0": BAD, "c1": BAD, "c5": GOOD, "c6": GOOD, "c8": GOOD, "c7": HOSTILE, "c10": GOOD}


def report_data(html: str) -> dict[str, Any]:
    """The rows JSON of a report page: the element ends at the first ``</script>``, so a
    text that could close it would leave JSON that does not parse."""
    start = html.index(DATA_START) + len(DATA_START)
    data: dict[str, Any] = json.loads(html[start : html.index("</script>", start)])
    return data


def rows_by_case(data: dict[str, Any]) -> dict[str, list[Any]]:
    return {r[2]: r for r in data["rows"]}


@pytest.fixture
def two_runs(tmp_path: Path, new_sqlite: Callable[..., str]) -> tuple[Path, Path]:
    """A database with run 1 (V1) stored, and V2 written beside it."""
    db = Path(new_sqlite("runs.db"))
    (tmp_path / "v1.jsonl").write_text(cases(V1))
    (tmp_path / "v2.jsonl").write_text(cases(V2))
    res = invoke(
        "run", str(tmp_path / "v1.jsonl"), "--store", "--run-name", "golden", "--db", str(db)
    )
    assert res.exit_code == 0, res.output  # half of V1 fails, and no gate is checked
    return db, tmp_path


@pytest.mark.process
def test_run_html_against_a_stored_baseline_marks_every_row(two_runs: tuple[Path, Path]) -> None:
    db, tmp = two_runs
    html, md = tmp / "report.html", tmp / "summary.md"
    res = invoke(
        "run", str(tmp / "v2.jsonl"), "--store", "--run-name", "golden", "--db", str(db),
        "--baseline", "run:latest", "--max-regressions", "0",
        "--html", str(html), "--markdown", str(md),
    )  # fmt: skip
    assert res.exit_code == 1, res.output  # two regressions: the gate fails, the report is written
    assert f"report: {html}" in res.output
    page = html.read_text(encoding="utf-8")
    data = report_data(page)
    rows = rows_by_case(data)
    assert len(rows) == len(V2) == 11
    status = {case: r[6] for case, r in rows.items()}
    assert {c for c, s in status.items() if s == "regressed"} == {"c0", "c1"}
    assert {c for c, s in status.items() if s == "improved"} == {"c5", "c6", "c8"}
    assert status["c10"] == "new"
    assert rows["c0"][7] == 1.0 and rows["c0"][3] == 0.0  # before, after
    assert rows["c0"][15] == "line 1" and rows["c10"][15] == "line 11"  # of the input file
    assert "Rows read from the stored run 2" in page and str(tmp / "v2.jsonl") in page
    # failing rows first, lowest score first, each explained
    verdicts = [r[4] for r in data["rows"]]
    assert verdicts == sorted(verdicts)
    failed = [r for r in data["rows"] if not r[4]]
    assert {r[2] for r in failed} == {"c0", "c1", "c7", "c9"}
    assert all("paris" in r[12] for r in failed)  # missing terms
    assert rows["c7"][13] == "output and reference share no terms"  # the reason
    assert data["refs"] == [REF]  # one reference, kept once
    # the hostile output is in the data whole, as text; nothing of it became markup
    assert rows["c7"][9] == HOSTILE
    assert "window.pwned" not in page.split(DATA_START)[0]
    assert page.count("</script>") == 2 and page.count("<script") == 2
    assert "<!--" not in page.split(DATA_START)[1].split("</script>")[0]
    # the summary: pass rate, the baseline's counts, the gate
    assert 'id="count-regressed">2<' in page and 'id="count-improved">3<' in page
    assert "max-regressions" in page and "A gate failed" in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert not re.search(r"(src|href)=\"(https?:)?//", page)  # nothing fetched
    summary = md.read_text(encoding="utf-8")
    # on the 10 cases both runs have: 5 passed before, 6 now
    assert "| **all** | 11 | 63.6% | +10.0 pts (2 regressed, 3 improved) | ❌ failed |" in summary


@pytest.mark.process
def test_report_of_a_stored_run_with_and_without_a_baseline(two_runs: tuple[Path, Path]) -> None:
    db, tmp = two_runs
    res = invoke(
        "run", str(tmp / "v2.jsonl"), "--store", "--run-name", "golden", "--db", str(db),
        "--baseline", "run:latest",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    # run:latest as RUN is the newest run; as --baseline, the newest of its name before it
    out = tmp / "again.html"
    res = invoke(
        "report", "run:latest", "-o", str(out), "--baseline", "run:latest", "--db", str(db)
    )
    assert res.exit_code == 0, res.output
    status = {case: r[6] for case, r in rows_by_case(report_data(out.read_text())).items()}
    assert sorted(c for c, s in status.items() if s == "regressed") == ["c0", "c1"]
    # without --baseline: the baseline report the run kept (its counts and largest changes)
    res = invoke("report", "2", "-o", str(out), "--db", str(db), "--json")
    assert res.exit_code == 0, res.output
    info = json.loads(res.output)
    assert info["rows"] == 11 and info["failed"] == 4
    assert info["files"] == [{"path": str(out), "bytes": out.stat().st_size}]
    page = out.read_text()
    data = report_data(page)
    assert not data["by_row"] and {r[6] for r in data["rows"]} == {None}
    assert "Largest regressions" in page and 'id="count-regressed">2<' in page
    # a run against a results file as its baseline (the file run 1 wrote beside V1)
    res = invoke(
        "report", "run:2", "-o", str(out), "--db", str(db),
        "--baseline", str(tmp / "v1.results.jsonl"),
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    status = {case: r[6] for case, r in rows_by_case(report_data(out.read_text())).items()}
    assert sorted(c for c, s in status.items() if s == "improved") == ["c5", "c6", "c8"]
    # the first run has no earlier one of its name: every case is new
    res = invoke("report", "1", "-o", str(out), "--baseline", "run:latest", "--db", str(db))
    assert res.exit_code == 0, res.output
    assert {r[6] for r in report_data(out.read_text())["rows"]} == {"new"}


def test_markdown_keeps_its_tables_whole_whatever_the_text(tmp_path: Path) -> None:
    # the hostile rows first: the worst ten are the first ten of equal scores
    rows = {"pipe | id\nwith newline": "yellow | bananas\n\n# heading", "r": HOSTILE}
    rows.update({f"r{i}": BAD for i in range(12)})
    src = tmp_path / "cases.jsonl"
    src.write_text(cases(rows))
    md = tmp_path / "summary.md"
    res = invoke("run", str(src), "--markdown", str(md), "--min-pass-rate", "0.5")
    assert res.exit_code == 1, res.output
    text = md.read_text(encoding="utf-8")
    assert text.startswith("### simeval: ") and "❌ a gate failed" in text
    lines = text.splitlines()
    tables = [line for line in lines if line.startswith("|")]
    # each table's lines have as many cells as its header (an unescaped | would add one)
    evals_table, worst_table = tables[:3], tables[3:]
    assert len(evals_table) == 3 and len(worst_table) == 12  # header, rule, ten rows

    def cells(line: str) -> int:
        return len(re.findall(r"(?<!\\)\|", line))

    assert {cells(line) for line in evals_table} == {6}
    assert {cells(line) for line in worst_table} == {7}
    assert not any(line.startswith("#") for line in lines[1:])  # no heading smuggled in
    assert "<script>" not in text and "<b>" not in text and "&lt;/script&gt;" in text
    assert "| pipe \\| id with newline | yellow \\| bananas # heading |" in text
    assert "Gates: ❌ `min-pass-rate` 0.5 (value 0)" in text


def test_markdown_is_appended_to_the_job_summary_and_replaces_another_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "cases.jsonl"
    src.write_text(cases({"a": GOOD, "b": BAD}))
    step = tmp_path / "step_summary"
    step.write_text("## an earlier step's summary\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    for _ in range(2):
        res = invoke("run", str(src), "--markdown", str(step))
        assert res.exit_code == 0, res.output
    text = step.read_text()
    assert text.startswith("## an earlier step's summary\n### simeval: ")
    assert text.count("### simeval: ") == 2
    other = tmp_path / "summary.md"
    other.write_text("old text\n")
    for _ in range(2):
        assert invoke("run", str(src), "--markdown", str(other)).exit_code == 0
    assert other.read_text().count("### simeval: ") == 1 and "old text" not in other.read_text()


def test_run_html_without_a_results_file_or_a_store(tmp_path: Path) -> None:
    """--no-results: the rows go through a temporary file, gone after the report."""
    src = tmp_path / "cases.jsonl"
    src.write_text(cases({"a": GOOD, "b": BAD, "c": HOSTILE}))
    html = tmp_path / "report.html"
    res = invoke("run", str(src), "--no-results", "--html", str(html), "--json")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output)
    assert summary["results_file"] is None
    assert summary["report"]["rows"] == 3 and summary["report"]["failed"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cases.jsonl", "report.html"]
    data = report_data(html.read_text())
    assert [r[2] for r in data["rows"]][-1] == "a"  # the passing row after the failing ones
    assert [r[15] for r in data["rows"]] == ["result 2", "result 3", "result 1"]
    assert "Rows read from" not in html.read_text()  # not from a file that is gone
    assert html.stat().st_mode & 0o044  # readable by others, as a page to share is


EVALS = """\
evals:
  - name: capital
    references: ["Paris is the capital of France."]
    threshold: 0.8
    input_scope: "capital of France?"
  - name: river
    references: ["The Seine flows through Paris."]
    threshold: 0.7
    input_scope: "which river?"
  - name: unused
    references: ["No row asks this."]
    input_scope: "nobody asks"
"""


def test_an_eval_file_run_has_a_line_and_a_histogram_per_eval(tmp_path: Path) -> None:
    src = tmp_path / "cases.jsonl"
    rows = [
        {"input": "capital of France?", "output": "Paris is the capital of France."},
        {"input": "capital of France?", "output": "Lyon is big."},
        {"input": "which river?", "output": "The Seine flows through Paris."},
        {"input": "which river?", "output": "The Loire flows through Paris."},
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "evals.yaml").write_text(EVALS)
    html, md = tmp_path / "r.html", tmp_path / "s.md"
    res = invoke(
        "run", str(src), "--evals", str(tmp_path / "evals.yaml"),
        "--html", str(html), "--markdown", str(md),
    )  # fmt: skip
    assert res.exit_code in (0, 1), res.output
    page = html.read_text()
    data = report_data(page)
    assert data["evals"] is True
    assert {r[1] for r in data["rows"]} == {"capital", "river"}
    assert page.count('<figure class="hist">') == 2
    assert 'data-eval="capital"' in page and 'data-eval="river"' in page
    failed = [r for r in data["rows"] if not r[4]]
    assert failed and all(r[11] for r in failed)  # found terms, from the eval's scorer
    # read from the results file: an eval per line there, named by its line
    assert sorted(r[15] for r in data["rows"]) == [f"line {i}" for i in range(1, 5)]
    assert f"Rows read from the results file {tmp_path / 'cases.results.jsonl'}" in page
    assert len(data["refs"]) == 2
    text = md.read_text()
    assert "| capital | 2 |" in text and "| river | 2 |" in text
    assert "| unused | 0 | – | – | – |" in text  # an eval no row went to is still listed


def test_bad_input_is_one_line_and_exit_2_before_any_work(
    tmp_path: Path, new_sqlite: Callable[..., str]
) -> None:
    db = Path(new_sqlite("runs.db"))
    out = str(tmp_path / "r.html")
    one_line_error(invoke("report", "run:latest", "-o", out, "--db", str(db)), "no stored run")
    one_line_error(invoke("report", "7", "-o", out, "--db", str(db)), "no run with id 7")
    one_line_error(invoke("report", "run:seven", "-o", out, "--db", str(db)), "ID, run:ID")
    one_line_error(invoke("report", "7", "--db", str(db)), "-o FILE")
    src = tmp_path / "cases.jsonl"
    src.write_text(cases({"a": GOOD}))
    nowhere = str(tmp_path / "missing" / "r.html")
    for args in (
        ("report", "1", "-o", nowhere, "--db", str(db)),
        ("run", str(src), "--html", nowhere),
        ("run", str(src), "--markdown", nowhere),
    ):
        one_line_error(invoke(*args), "does not exist")
    one_line_error(invoke("run", str(src), "--html", str(tmp_path)), "is a directory")
    assert not (tmp_path / "cases.results.jsonl").exists()  # refused before the run
    one_line_error(
        invoke("run", str(src), "--html", out, "--engine", "http://127.0.0.1:9/v1", "--model", "m"),
        "simeval report run:ID",
    )
    # a run still being stored (or interrupted) is not whole
    with Service(str(db)) as svc:
        run_id = svc.create_run("partial", "x.jsonl", summary={"status": "storing"})
    one_line_error(invoke("report", str(run_id), "-o", out, "--db", str(db)), "not all stored")


@pytest.mark.process
def test_a_stored_summary_reads_back_as_the_summary(
    tmp_path: Path, new_sqlite: Callable[..., str]
) -> None:
    src = tmp_path / "cases.jsonl"
    src.write_text(cases({"a": GOOD, "b": BAD, "c": HOSTILE}))
    db = new_sqlite("runs.db")
    assert invoke("run", str(src), "--store", "--db", db).exit_code == 0
    res = invoke(
        "run", str(src), "--store", "--db", db, "--baseline", "run:latest",
        "--min-pass-rate", "0.5", "--max-regressions", "0", "--json",
    )  # fmt: skip
    printed = json.loads(res.output)
    with Service(db) as svc:
        stored = svc.get_run(printed["run_id"]).summary
    summary = RunSummary.from_dict(stored)
    assert summary.baseline is not None and summary.gates and summary.worst
    assert summary.baseline.top_regressions or summary.baseline.unchanged
    assert isinstance(summary.worst[0].passed, bool)

    def as_json(data: dict[str, Any]) -> Any:
        return json.loads(json.dumps(data))

    assert as_json(summary.stored()) == {k: v for k, v in stored.items() if k != "run_id"}
    assert as_json(summary.to_dict()) == {**printed, "status": "complete"}
