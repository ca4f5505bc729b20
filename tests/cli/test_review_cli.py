"""`simeval results review --reviewer`: the reviewer kept with the review, by default the OS
user name; `--reviewer ''` records none; a bad one is a one-line error (exit 2)."""

from __future__ import annotations

import getpass
import json
from typing import Any

import pytest
from click.testing import CliRunner, Result

from simeval.cli import cli
from simeval.service import Service

REF = "Paris is the capital of France."


def run(db: str, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "--db", db])


def reviewed(db: str, *args: str) -> dict[str, Any]:
    res = run(db, "results", "review", *args, "--json")
    assert res.exit_code == 0, res.output
    review: dict[str, Any] = json.loads(res.stdout)["review"]
    return review


@pytest.fixture
def result_id(db: str) -> str:
    svc = Service(db)
    svc.create_eval("capital", REF, threshold=0.8)
    svc.test_eval("capital", "q", REF)
    svc.activate_eval("capital")
    return svc.capture("q", "Bananas are yellow.").results[0].id


def test_the_reviewer_is_the_os_user_unless_given(
    db: str, result_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOGNAME", "ada")  # getpass.getuser reads LOGNAME first
    assert getpass.getuser() == "ada"
    assert reviewed(db, result_id, "--score", "0.9")["reviewer"] == "ada"
    assert reviewed(db, result_id, "--score", "0.9", "--reviewer", "Grace")["reviewer"] == "Grace"
    assert reviewed(db, result_id, "--score", "0.9", "--reviewer", "")["reviewer"] is None
    shown = run(db, "results", "show", result_id)
    assert shown.exit_code == 0 and "reviewed 0.90" in shown.output
    reviewed(db, result_id, "--score", "0.9", "--reviewer", "Grace")
    assert "by Grace" in run(db, "results", "show", result_id).output


def test_a_bad_reviewer_is_a_one_line_error(db: str, result_id: str) -> None:
    res = run(db, "results", "review", result_id, "--score", "0.9", "--reviewer", "x" * 201)
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "reviewer" in lines[0] and "Traceback" not in res.output
    assert Service(db).get_result(result_id).review is None  # nothing stored
