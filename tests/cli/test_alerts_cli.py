"""`simeval alerts list|test` through the CLI runner, on a real SQLite file, with the rules
taken from the evals YAML by `simeval evals import` and a real webhook receiver on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from simeval.cli import cli
from simeval.service import Service
from webhook_receiver import closed_port_url, webhook_receiver

REF = "Paris is the capital of France."


def run(db: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "--db", str(db)])


def write_evals(tmp_path: Path, webhook: str, **extra: Any) -> Path:
    doc = {
        "evals": [
            {
                "name": "capital",
                "references": [REF],
                "status": "active",
                "test": {"input": "q", "output": REF},
            }
        ],
        "alerts": [
            {
                "name": "capital-low",
                "eval": "capital",
                "when": "pass_rate < 0.8",
                "window": 5,
                "webhook": webhook,
                "secret_env": "SIMEVAL_ALERT_SECRET",
                **extra,
            }
        ],
    }
    path = tmp_path / "evals.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.process
def test_import_then_list_and_test(
    tmp_path: Path, new_sqlite: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIMEVAL_ALERT_SECRET", "k")
    db = Path(new_sqlite("s.db"))
    with webhook_receiver() as hook:
        res = run(db, "evals", "import", str(write_evals(tmp_path, hook.url)))
        assert res.exit_code == 0, res.output
        res = run(db, "alerts", "list")
        assert res.exit_code == 0 and "no alerts" in res.output and "1 rule" in res.output
        with Service(db) as svc:
            for _ in range(5):
                svc.capture("q", "Bananas are yellow.")
            svc.alerts.evaluate_alerts()
        res = run(db, "alerts", "list", "--json")
        assert res.exit_code == 0, res.output
        data = json.loads(res.stdout)
        assert [(a["rule"], a["status"]) for a in data["alerts"]] == [("capital-low", "open")]
        assert data["rules"][0]["when"] == "pass_rate < 0.8"
        assert "capital-low" in run(db, "alerts", "list", "--open").output
        res = run(db, "alerts", "test", "capital-low")
        assert res.exit_code == 0, res.output
        assert "attempt 1: delivered (HTTP 200)" in res.output
        (got,) = hook.wait_for(1)
    assert got.signed_with("k") and got.json()["event"] == "test"
    # the evals export writes the rules back
    res = run(db, "evals", "export", str(tmp_path / "out.yaml"))
    assert res.exit_code == 0, res.output
    out = yaml.safe_load((tmp_path / "out.yaml").read_text(encoding="utf-8"))
    assert out["alerts"][0]["name"] == "capital-low"


@pytest.mark.process
def test_a_failed_test_shows_every_attempt_and_exits_1(
    tmp_path: Path, new_sqlite: Callable[..., str]
) -> None:
    db = Path(new_sqlite("s.db"))
    res = run(db, "evals", "import", str(write_evals(tmp_path, closed_port_url())))
    assert res.exit_code == 0, res.output
    res = run(db, "alerts", "test", "capital-low", "--attempts", "3", "--backoff", "0")
    assert res.exit_code == 1
    # no secret in the environment: nothing is sent, it says why, and it is not tried again
    assert res.output.count("environment variable SIMEVAL_ALERT_SECRET is not set") == 1
    assert "not delivered" in res.output


def test_mistakes_are_one_line_with_exit_2(tmp_path: Path, new_sqlite: Callable[..., str]) -> None:
    db = Path(new_sqlite("s.db"))
    res = run(db, "alerts", "test", "nope")
    assert res.exit_code == 2 and "no alert rule named 'nope'" in res.output
    assert "Traceback" not in res.output
    bad = write_evals(tmp_path, "https://hooks.example/x", window="soon")
    res = run(db, "evals", "import", str(bad))
    assert res.exit_code == 2 and "alert 1 ('capital-low'): window must be" in res.output
    res = run(db, "alerts", "delete", "nope")
    assert res.exit_code == 2 and "no alert rule named 'nope'" in res.output


def test_delete_a_rule(tmp_path: Path, new_sqlite: Callable[..., str]) -> None:
    db = Path(new_sqlite("s.db"))
    assert (
        run(db, "evals", "import", str(write_evals(tmp_path, "http://127.0.0.1:9/x"))).exit_code
        == 0
    )
    res = run(db, "alerts", "delete", "capital-low")
    assert res.exit_code == 0 and "deleted alert rule capital-low" in res.output
    assert json.loads(run(db, "alerts", "list", "--json").stdout)["rules"] == []
