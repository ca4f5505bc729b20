"""Signed actions: a review and an eval change made by two users carry their names in the
result, the eval's versions and the audit log (API and CLI); every kind of change is logged;
the log reads by actor, action, target and time, a page at a time. Both backends."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from simeval.cli import cli
from simeval.service import Service
from simeval.service.actor import acting_as
from simeval.web import create_app

BASE = "http://127.0.0.1:8000"
REF = "Paris is the capital of France."


@pytest.fixture
def keys(db: str) -> dict[str, str]:
    with Service(db) as svc:
        return {
            "ana": svc.users.add_user("ana", "admin").key,
            "bo": svc.users.add_user("bo", "reviewer").key,
            "cy": svc.users.add_user("cy", "ingest").key,
        }


@pytest.fixture
def client(db: str, keys: dict[str, str]) -> Iterator[TestClient]:
    with TestClient(create_app(db=db, alert_interval=None), base_url=BASE) as c:
        yield c


def as_(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_two_users_changes_carry_their_names(
    db: str, client: TestClient, keys: dict[str, str]
) -> None:
    ana, bo = as_(keys["ana"]), as_(keys["bo"])
    assert client.post("/api/evals", json={"name": "cap", "references": [REF]}, headers=ana)
    client.post("/api/evals/cap/test", json={"input": "q", "output": REF}, headers=ana)
    assert client.post("/api/evals/cap/activate", headers=ana).status_code == 200
    r = client.patch("/api/evals/cap", json={"threshold": 0.7}, headers=ana)
    assert r.status_code == 200, r.text
    cap = client.post(
        "/api/capture", json={"input": "q", "output": "Bananas."}, headers=as_(keys["cy"])
    )
    rid = cap.json()["results"][0]["id"]
    # the body names someone else: the signed-in user is recorded
    body = {"score": 1.0, "note": "fine", "reviewer": "mallory"}
    r = client.post(f"/api/results/{rid}/review", json=body, headers=bo)
    assert r.status_code == 200 and r.json()["review"]["reviewer"] == "bo"

    versions = client.get("/api/evals/cap/versions", headers=bo).json()
    assert [v["created_by"] for v in versions] == ["ana", "ana"]

    entries = client.get("/api/audit", headers=ana).json()["entries"]
    seen = [(e["actor"], e["action"], e["target"]) for e in entries]
    assert ("bo", "review.set", f"result:{rid}") in seen
    assert ("ana", "eval.threshold", "eval:cap") in seen
    assert ("ana", "eval.activate", "eval:cap") in seen
    assert ("ana", "eval.create", "eval:cap") in seen
    threshold = next(e for e in entries if e["action"] == "eval.threshold")
    assert threshold["detail"]["threshold"] == {"from": 0.8, "to": 0.7}
    assert client.get("/api/audit", headers=bo).status_code == 403

    res = CliRunner().invoke(cli, ["audit", "--actor", "bo", "--json", "--db", db])
    assert res.exit_code == 0, res.output
    assert [(e["actor"], e["action"]) for e in json.loads(res.stdout)] == [("bo", "review.set")]
    table = CliRunner().invoke(cli, ["audit", "--since", "1d", "--db", db])
    assert "eval.threshold" in table.stdout and "ana" in table.stdout


def test_without_users_a_review_keeps_the_name_given(new_sqlite: Callable[..., str]) -> None:
    db = new_sqlite("local.db")
    with TestClient(create_app(db=db, alert_interval=None), base_url=BASE) as c:
        c.post("/api/evals", json={"name": "cap", "references": [REF]})
        c.post("/api/evals/cap/test", json={"input": "q", "output": REF})
        c.post("/api/evals/cap/activate")
        rid = c.post("/api/capture", json={"input": "q", "output": "x"}).json()["results"][0]["id"]
        r = c.post(f"/api/results/{rid}/review", json={"score": 1.0, "reviewer": "dee"})
        assert r.json()["review"]["reviewer"] == "dee"
        entry = c.get("/api/audit").json()["entries"][0]
        assert entry["action"] == "review.set" and entry["actor"] is None


def test_every_kind_of_change_is_logged(db: str) -> None:
    with Service(db) as svc, acting_as("ana"):
        svc.create_eval("cap", REF)
        svc.edit_eval("cap", references=[REF, "Paris."])
        svc.deactivate_eval("cap")  # already a draft: no change, no entry
        svc.archive_eval("cap")
        svc.create_dataset("qa", [{"input": "q", "references": [REF]}])
        svc.add_dataset_case("qa", {"id": "2", "input": "q2", "references": [REF]})
        svc.alerts.set_alert_rules([{"name": "drop", "eval": "cap", "when": "drop", "window": 20}])
        svc.alerts.delete_alert_rule("drop")
        svc.update_settings(retention_days=30, auto_evaluate=False)
        svc.cleanup()
        run = svc.create_run("nightly", "cases.jsonl")
        svc.update_run_summary(run, {"status": "complete"})
        svc.delete_run(run)
        svc.users.add_user("eve", "viewer")
        svc.users.set_user_role("eve", "editor")
        svc.users.set_user_disabled("eve", True)
        svc.users.new_user_key("eve")
        page = svc.audit_log(limit=500)
    actions = [e.action for e in reversed(page.entries)]
    assert actions == [
        "eval.create",
        "eval.edit",
        "eval.archive",
        "dataset.create",
        "dataset.change",
        "alert_rule.create",
        "alert_rule.delete",
        "settings.change",
        "retention.set",
        "cleanup.run",
        "run.delete",
        "user.add",
        "user.role",
        "user.disable",
        "user.key",
    ], actions
    assert {e.actor for e in page.entries} == {"ana"}
    edit = next(e for e in page.entries if e.action == "eval.edit")
    assert edit.detail["fields"] == ["references"] and edit.target == "eval:cap"


def test_the_log_filters_and_pages(db: str) -> None:
    with Service(db) as svc:
        for i in range(7):
            with acting_as("ana" if i % 2 else "bo"):
                svc.create_eval(f"e{i}", REF)
        assert len(svc.audit_log(actor="ana").entries) == 3
        assert len(svc.audit_log(action="eval").entries) == 7
        assert len(svc.audit_log(action="eval.create").entries) == 7
        assert len(svc.audit_log(action="eva").entries) == 0
        assert [e.target for e in svc.audit_log(target="eval:e3").entries] == ["eval:e3"]
        assert svc.audit_log(since="1h").entries and not svc.audit_log(since="2999-01-01").entries
        seen: list[int] = []
        cursor = None
        while True:
            page = svc.audit_log(limit=3, cursor=cursor)
            seen += [e.id for e in page.entries]
            cursor = page.next_cursor
            if cursor is None:
                break
        assert seen == sorted(seen, reverse=True) and len(seen) == len(set(seen)) == 7


def test_bad_audit_queries_are_4xx(client: TestClient, keys: dict[str, str]) -> None:
    ana = as_(keys["ana"])
    r = client.get("/api/audit", params={"cursor": "garbage"}, headers=ana)
    assert r.status_code == 400 and "cursor" in r.json()["error"]
    r = client.get("/api/audit", params={"since": "not a time"}, headers=ana)
    assert r.status_code == 400 and "since" in r.json()["error"]
    assert client.get("/api/audit", params={"limit": 0}, headers=ana).status_code == 422
    # a filter no entry can match (a NUL, which PostgreSQL refuses in a query): no entries
    for name in ("actor", "action", "target"):
        r = client.get("/api/audit", params={name: "ev\x00al"}, headers=ana)
        assert r.status_code == 200 and r.json() == {"entries": [], "next_cursor": None}, r.text
