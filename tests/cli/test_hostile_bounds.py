"""The CLI's one bounds layer (issue 30, item 7), on SQLite: every URL, window, id and file a
user gives is checked before use, so a mistake is exit 2 with one line naming it (never a
traceback or exit 1, the "gate failed" code), and nothing stored changes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from clihelp import invoke, one_line_error
from dbhelp import table_counts
from simeval.service import Service

REF = "The capital of France is Paris."
Q = "What is the capital of France?"
TABLES = ("evals", "eval_versions", "captures", "results", "runs", "alert_rules")
BAD_URLS = ["http://[::1", "http://host/a b", "ftp://host/x", "http://host:99999/"]


def short_error(res: Result, *needles: str) -> None:
    """``one_line_error``, the line cut to a sensible length."""
    one_line_error(res, *needles)
    assert len(res.stderr.strip()) <= 400, len(res.stderr.strip())


def evals_file(tmp_path: Path, alert: dict[str, object]) -> str:
    """An evals file of the one eval and ``alert`` (its name, eval and window filled in)."""
    rule = {"name": "low", "eval": "capital", "window": 10, **alert}
    path = tmp_path / "evals.json"
    path.write_text(
        json.dumps({"evals": [{"name": "capital", "references": [REF]}], "alerts": [rule]})
    )
    return str(path)


@pytest.fixture
def seeded(new_sqlite: Callable[..., str]) -> str:
    db = new_sqlite("bounds.db")
    with Service(db) as svc:
        svc.create_eval("capital", REF)
        svc.test_eval("capital", Q, REF)
        svc.activate_eval("capital")
        svc.capture(Q, REF)
    return db


@pytest.mark.parametrize("url", BAD_URLS)
def test_a_bad_webhook_in_an_evals_file_is_one_line(seeded: str, tmp_path: Path, url: str) -> None:
    before = table_counts(seeded, TABLES)
    path = evals_file(tmp_path, {"when": "pass_rate < 0.8", "webhook": url})
    short_error(invoke("evals", "import", path, "--db", seeded), "webhook")
    assert table_counts(seeded, TABLES) == before


@pytest.mark.parametrize("url", BAD_URLS)
@pytest.mark.parametrize(
    "args",
    [
        ("proxy", "--upstream"),
        ("serve", "--upstream"),
        ("serve", "--otlp-export"),
        ("settings", "--otlp-export"),
    ],
)
def test_a_bad_url_option_is_one_line(seeded: str, args: tuple[str, str], url: str) -> None:
    short_error(
        invoke(*args, url, "--db", seeded, "--port", "1")
        if args[0] != "settings"
        else invoke(*args, url, "--db", seeded)
    )


def test_a_window_past_any_calendar_is_one_line(seeded: str, tmp_path: Path) -> None:
    path = evals_file(tmp_path, {"when": "silence", "window": "100000000000000000000d"})
    short_error(invoke("evals", "import", path, "--db", seeded), "window")
    short_error(invoke("results", "list", "--since", "100000000000000000000d", "--db", seeded))


@pytest.mark.parametrize("run_id", [str(2**31), str(2**63), str(2**64), "0"])
def test_compare_with_ids_past_the_store_is_one_line(seeded: str, run_id: str) -> None:
    short_error(invoke("compare", run_id, "1", "--db", seeded))


def test_a_row_nested_past_any_depth_is_one_line(seeded: str, tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    deep = '{"a": ' * 100_000 + "1" + "}" * 100_000
    path.write_text(
        json.dumps({"input": Q, "output": REF, "reference": REF})[:-1]
        + ', "metadata": '
        + deep
        + "}\n"
    )
    short_error(invoke("run", str(path), "--db", seeded), "line 1")


def test_a_billion_laughs_engines_file_is_one_line(seeded: str, tmp_path: Path) -> None:
    data = tmp_path / "cases.jsonl"
    data.write_text(json.dumps({"input": Q, "reference": REF}) + "\n")
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i, name in enumerate("bcdefghi"):
        prev = "abcdefghi"[i]
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    lines.append("engines: [*i]")
    engines = tmp_path / "engines.yaml"
    engines.write_text("\n".join(lines) + "\n")
    short_error(
        invoke("run", str(data), "--engines", str(engines), "--db", seeded),
        "values once its aliases",
    )
