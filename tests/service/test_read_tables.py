"""The read tables of migration 0010 stay exact: after every path that writes, rescores or
deletes captures, ``capture_meta`` and ``conversations`` hold what a direct recomputation
from the stored captures gives (both backends). A path that forgot to maintain them fails
here."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.readtables import assert_exact, stored

from simeval.errors import InvalidInput
from simeval.service import Service
from simeval.web import create_app

REF = "Paris is the capital of France."
REF2 = "The Seine flows through Paris."
OUTS = ["Paris is the capital of France.", "I like trains.", "The Seine runs through Paris."]
LONG = "x" * 201  # a value longer than the index holds: not indexed


def make_evals(svc: Service, *refs: str) -> None:
    for i, ref in enumerate(refs):
        name = f"e{len(svc.list_evals())}-{i}"
        svc.create_eval(name, ref, threshold=0.7)
        svc.test_eval(name, "q", ref)
        svc.activate_eval(name)


@pytest.fixture
def svc(db: str) -> Iterator[Service]:
    service = Service(db)
    yield service
    service.close()


def test_every_capture_path_keeps_the_tables_exact(db: str, svc: Service) -> None:
    make_evals(svc, REF, REF2)
    base = datetime(2026, 3, 1, 12, 0)
    # one capture at a time: metadata with indexed and other keys, numbers, a long value
    svc.capture("q", OUTS[0], "talk-a", {"engine": "v2", "model": "m1", "other": 1})
    svc.capture("q", OUTS[1], "talk-a", {"engine": "v1", "latency_ms": 120, "model": LONG})
    svc.capture("q", OUTS[2], None, {"engine": "v2"})  # no conversation
    svc.capture("q", OUTS[0], "talk-b", None)  # no metadata
    assert_exact(db)
    # a turn dated before the conversation's last: counted, not its last turn
    old = svc.capture("q", OUTS[2], "talk-a", {"provider": "acme"}, captured_at=base)
    assert_exact(db)
    listed = {c.id: c for c in svc.list_conversations()}
    assert listed["talk-a"].turns == 3 and listed["talk-a"].last_input == "q"
    assert listed["talk-a"].first_at == old.captured_at
    # a batch in one transaction: keys, a repeated key, a replay of a stored key
    items = [
        ("q", OUTS[k % 3], f"talk-{k % 4}", {"engine": f"v{k % 2}"}, base + timedelta(hours=k))
        for k in range(12)
    ]
    keyed = [(*item, f"key-{k}") for k, item in enumerate(items)]
    svc.capture_checked([*keyed[:6], keyed[2]])
    svc.capture_checked(keyed)  # six replayed, six new
    assert_exact(db)
    # capture_many
    report = svc.capture_many(
        [
            {"output": OUTS[k % 3], "conversation_id": f"many-{k % 5}", "metadata": {"model": k}}
            for k in range(40)
        ],
        chunk=16,
    )
    assert report.captures == 40
    assert_exact(db)
    # unscored captures (automatic evaluation off): turns with no results
    svc.update_settings(auto_evaluate=False)
    svc.capture("q", OUTS[0], "talk-b", {"finish_reason": "stop"})
    svc.update_settings(auto_evaluate=True)
    assert_exact(db)


def test_the_http_writer_keeps_the_tables_exact(db: str) -> None:
    app = create_app(db=db)
    with TestClient(app, base_url="http://127.0.0.1:8000") as client:
        body = {"name": "capital", "references": [REF], "threshold": 0.7}
        assert client.post("/api/evals", json=body).status_code == 201
        client.post("/api/evals/capital/test", json={"input": "q", "output": REF})
        assert client.post("/api/evals/capital/activate").status_code == 200
        for k in range(5):
            one = {"input": "q", "output": OUTS[k % 3], "conversation_id": f"h-{k % 2}"}
            r = client.post("/api/capture", json={**one, "metadata": {"engine": f"v{k}"}})
            assert r.status_code == 201, r.text
        batch = [
            {
                "input": "q",
                "output": OUTS[k % 3],
                "conversation_id": f"h-{k % 3}",
                "metadata": {"model": "m"},
            }
            for k in range(7)
        ]
        assert client.post("/api/captures/batch", json={"captures": batch}).status_code == 201
    assert_exact(db)


def test_reviews_apply_on_read(svc: Service) -> None:
    make_evals(svc, REF, REF2)
    for k in range(6):
        svc.capture("q", OUTS[k % 3], f"talk-{k % 2}")
    before = {c.id: c.passed for c in svc.list_conversations()}
    results = svc.list_results(conversation_id="talk-0", limit=100, explain=False)
    flip = results[0]
    svc.review_result(flip.id, 0.0 if flip.passed else 1.0, "flipped")
    again = next(r for r in results[1:] if r.passed)
    svc.review_result(again.id, 1.0, "still passes")
    after = {c.id: c for c in svc.list_conversations()}
    assert after["talk-0"].passed == before["talk-0"] + (-1 if flip.passed else 1)
    assert after["talk-1"].passed == before["talk-1"]
    # what the conversation's own page counts, result by result
    detail = svc.get_conversation("talk-0")
    assert (detail.passed, detail.results) == (after["talk-0"].passed, after["talk-0"].results)


def test_rescore_and_cleanup_keep_the_tables_exact(db: str, svc: Service) -> None:
    make_evals(svc, REF)
    now = datetime.now(UTC).replace(tzinfo=None)
    for k in range(30):
        when = now - timedelta(days=k % 12, minutes=k)
        svc.capture("q", OUTS[k % 3], f"talk-{k % 7}", {"engine": f"v{k % 3}"}, captured_at=when)
    make_evals(svc, REF2)  # a new eval: past captures lack its results
    report = svc.rescore(svc.list_evals()[-1].name, since="30d")
    assert report.added == 30
    assert_exact(db)
    svc.update_settings(retention_days=7)
    out = svc.cleanup()
    assert 0 < out.captures < 30
    assert_exact(db)  # capture_meta rows of deleted captures went with them, summaries summed
    svc.update_settings(retention_days=None)


def test_declaring_indexed_keys_fills_and_empties_the_index(db: str, svc: Service) -> None:
    for k in range(25):
        svc.capture("q", OUTS[k % 3], None, {"team": f"t{k % 4}", "region": k, "engine": "v"})
    assert_exact(db)
    assert {r[1] for r in stored(db)[0]} == {"engine"}
    out = svc.update_settings(indexed_meta=["team", "region", "team"])
    assert out.indexed_meta == ["team", "region"]
    assert {r[1] for r in stored(db)[0]} == {"engine", "team", "region"}
    svc.capture("q", OUTS[0], None, {"team": "new", "region": "eu"})
    assert_exact(db)
    svc.update_settings(indexed_meta=["region", "engine"])  # a default declared: kept anyway
    assert {r[1] for r in stored(db)[0]} == {"engine", "region"}
    assert_exact(db)
    assert svc.get_settings().indexed_meta == ["region", "engine"]
    svc.update_settings(indexed_meta=[])
    assert {r[1] for r in stored(db)[0]} == {"engine"}
    assert_exact(db)


def test_an_interrupted_declaration_is_completed_by_the_next(
    db: str, svc: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k in range(10):
        svc.capture("q", OUTS[k % 3], None, {"team": f"t{k}"})
    import simeval.store.settings_sql as settings_mod

    def broken(*args: Any) -> None:
        raise RuntimeError("the process died here")

    monkeypatch.setattr(settings_mod, "backfill_meta", broken)
    with pytest.raises(RuntimeError):
        svc.update_settings(indexed_meta=["team"])
    # the setting still names the old keys: readers trust only what is complete
    assert svc.get_settings().indexed_meta == []
    svc.capture("q", OUTS[0], None, {"team": "meanwhile"})  # writes the new key already
    monkeypatch.undo()
    svc.update_settings(indexed_meta=["team"])
    assert svc.get_settings().indexed_meta == ["team"]
    assert_exact(db)
    assert sum(1 for r in stored(db)[0] if r[1] == "team") == 11


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("team", "must be a list"),
        ([""], "empty"),
        (["  "], "empty"),
        (["k" * 65], "longer than 64"),
        ([3], "must be a string"),
        (["a\tb"], "control characters"),
        ([f"k{i}" for i in range(33)], "at most 32"),
    ],
)
def test_bad_indexed_keys_are_refused(svc: Service, value: Any, problem: str) -> None:
    with pytest.raises(InvalidInput, match=problem) as err:
        svc.update_settings(indexed_meta=value)
    assert "\n" not in str(err.value)
    assert svc.get_settings().indexed_meta == []


def test_concurrent_batches_sharing_conversations_stay_exact(db: str, svc: Service) -> None:
    make_evals(svc, REF)
    errors: list[BaseException] = []

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(8):
                talks = rng.sample(["t-a", "t-b", "t-c", "t-d"], 3)  # shared, in any order
                svc.capture_checked(
                    [("q", rng.choice(OUTS), t, {"engine": f"v{seed}"}, None) for t in talks]
                )
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    assert_exact(db)
    assert sum(c.turns for c in svc.list_conversations()) == 4 * 8 * 3
