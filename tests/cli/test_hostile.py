"""Hostile input through the CLI's readers, on SQLite and PostgreSQL (``conftest.db``): a
captures file, a data set for ``run --store``, an eval definitions file, and the dates and
numbers of the listing flags. Each is exit 2 with one line naming the problem (never a
traceback or exit 1, the "gate failed" code), and nothing stored changes. Issue 21 item 9.

The full disk is a real one: a small tmpfs mounted in the test (as root, as in CI; skipped
otherwise), the SQLite database on it, the disk then filled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clihelp import invoke, one_line_error
from dbhelp import table_counts
from diskhelp import fill, small_disk
from simeval.service import Service

REF = "The capital of France is Paris."
Q = "What is the capital of France?"
TABLES = ("evals", "eval_versions", "eval_tests", "captures", "results", "runs")


@pytest.fixture
def seeded(db: str) -> str:
    with Service(db) as svc:
        svc.create_eval("capital", REF)
        svc.test_eval("capital", Q, REF)
        svc.activate_eval("capital")
        svc.capture(Q, REF)
    return db


def deep_json(levels: int) -> str:
    return '{"a": ' * levels + "1" + "}" * levels


CAPTURE_LINES = [
    ('{"input": "q", "output": "\\udc00"}', "surrogate"),
    ('{"input": "q", "output": "nul \\u0000"}', "NUL"),
    ('{"output": "a", "metadata": ' + deep_json(5000) + "}", "deep"),
    ('{"output": "a", "at": "0001-01-01T00:00:00+05:00"}', "at"),
    ('{"output": "a", "at": "0001-01-01T00:00:00Z"}', "at"),
    ('{"output": "a", "captured_at": "9999-12-31T23:59:59-05:00"}', "captured_at"),
    ('{"output": "a", "captured_at": "9999-12-31T23:59:59Z"}', "captured_at"),
    ("[" * 100_000, "deep"),
]


@pytest.mark.parametrize(("line", "needle"), CAPTURE_LINES)
def test_a_bad_captures_line_is_one_line_and_nothing_stored(
    seeded: str, tmp_path: Path, line: str, needle: str
) -> None:
    path = tmp_path / "captures.jsonl"
    path.write_text(json.dumps({"input": Q, "output": REF}) + "\n" + line + "\n", "utf-8")
    before = table_counts(seeded, TABLES)
    one_line_error(invoke("capture", "--file", str(path), "--db", seeded), "line 2", needle)
    assert table_counts(seeded, TABLES) == before


@pytest.mark.parametrize(
    "when", ["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00", "3000000d"]
)
def test_a_capture_at_the_calendars_ends_is_refused(seeded: str, when: str) -> None:
    before = table_counts(seeded, TABLES)
    one_line_error(invoke("capture", REF, "-i", Q, "--at", when, "--db", seeded), "at")
    assert table_counts(seeded, TABLES) == before


@pytest.mark.parametrize(
    "args",
    [
        ("results", "list", "--since", "3000000d"),
        ("results", "list", "--until", "0001-01-01T00:00:00+05:00"),
        ("results", "list", "--since", "99999999999d"),
        ("results", "list", "--eval", "a\x00"),
        ("results", "list", "--run", "2147483648"),
        ("results", "list", "--offset", "9223372036854775807"),
        ("results", "show", "r2147483648"),
        ("results", "review", "r2147483648", "--score", "1"),
        ("capture", REF, "--metadata", deep_json(5000)),
        ("runs", "show", "2147483648"),
        ("runs", "delete", "2147483648"),
        ("evals", "show", "a\x00"),
        ("trend", "capital", "--since", "99999999999d"),
        ("trend", "capital", "--until", "0001-01-01T00:00:00+05:00"),
        ("results", "export", "--since", "0001-01-01T00:00:00+05:00"),
        ("rescore", "--eval", "capital", "--since", "3000000d"),
    ],
)
def test_flags_out_of_range_are_one_line(seeded: str, args: tuple[str, ...]) -> None:
    before = table_counts(seeded, TABLES)
    res = invoke(*args, "--db", seeded)
    if res.exit_code == 2 and "No such command" in res.stderr:
        pytest.skip(f"no command {args[:2]}")
    if res.exit_code == 2 and "no such option" in res.stderr.lower():
        pytest.skip(f"no option in {args}")
    one_line_error(res)
    assert table_counts(seeded, TABLES) == before


def _run_rows(bad: str) -> str:
    good = [json.dumps({"id": f"c{i}", "output": REF, "reference": REF}) for i in range(3)]
    return "\n".join([*good, bad]) + "\n"


RUN_LINES = [
    ('{"id": "x", "output": "\\udc00", "reference": "Paris"}', "surrogate"),
    ('{"id": "x", "output": "Paris \\u0000", "reference": "Paris"}', "NUL"),
    ('{"id": "x", "output": "Paris", "reference": "Paris \\u0000 x"}', "NUL"),
    ('{"id": "x", "output": "Paris", "reference": "Paris", "m": ' + deep_json(5000) + "}", "deep"),
]


@pytest.mark.process
@pytest.mark.parametrize(("line", "needle"), RUN_LINES)
def test_a_bad_data_set_row_is_one_line_and_nothing_stored(
    seeded: str, tmp_path: Path, line: str, needle: str
) -> None:
    src = tmp_path / "cases.jsonl"
    src.write_text(_run_rows(line), "utf-8")
    before = table_counts(seeded, TABLES)
    res = invoke("run", str(src), "--store", "--db", seeded)
    one_line_error(res, "line 4", needle)
    assert table_counts(seeded, TABLES) == before


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_a_deep_eval_file_is_one_line_and_nothing_stored(
    seeded: str, tmp_path: Path, suffix: str
) -> None:
    path = tmp_path / f"evals{suffix}"
    text = "[" * 5000 + "]" * 5000 if suffix == ".json" else "- " * 5000 + "x\n"
    path.write_text(text, "utf-8")
    before = table_counts(seeded, TABLES)
    one_line_error(invoke("evals", "import", str(path), "--db", seeded), "deep")
    assert table_counts(seeded, TABLES) == before


@pytest.mark.parametrize("name", [".", ".."])
def test_eval_names_of_dots_are_refused(seeded: str, name: str) -> None:
    before = table_counts(seeded, TABLES)
    one_line_error(invoke("evals", "create", name, "-r", REF, "--db", seeded), "dots")
    assert table_counts(seeded, TABLES) == before


# -- a full disk -----------------------------------------------------------------------------
def counts(db: Path) -> dict[str, int]:
    return table_counts(str(db), ("captures", "results", "runs"))


@pytest.mark.process
def test_a_full_disk_in_capture_and_run_store_is_one_line(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk") as disk:
        db = disk / "evals.db"
        with Service(db) as svc:
            svc.create_eval("capital", REF)
            svc.test_eval("capital", Q, REF)
            svc.activate_eval("capital")
        big = "Paris is the capital of France. " * 1000  # 32 KB a capture
        captures = tmp_path / "captures.jsonl"
        captures.write_text(
            "".join(json.dumps({"input": Q, "output": f"{big} {i}"}) + "\n" for i in range(100)),
            "utf-8",
        )
        rows = tmp_path / "cases.jsonl"
        rows.write_text(
            "".join(
                json.dumps({"id": f"c{i}", "output": f"{big} {i}", "reference": REF}) + "\n"
                for i in range(100)
            ),
            "utf-8",
        )
        before = counts(db)
        fill(disk)
        res = invoke("capture", "--file", str(captures), "--db", str(db))
        one_line_error(res, "full")
        assert len(res.stderr) < 500  # no statement, no bound parameters
        res = invoke("run", str(rows), "--store", "--db", str(db))
        one_line_error(res, "full")
        assert len(res.stderr) < 500
        # room again: nothing of either was stored, and the same file is then taken whole
        (disk / "filler").unlink()
        after = counts(db)
        assert (after["captures"], after["results"]) == (before["captures"], before["results"])
        assert invoke("capture", "--file", str(captures), "--db", str(db)).exit_code == 0
        assert counts(db)["captures"] == before["captures"] + 100
