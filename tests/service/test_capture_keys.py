"""Idempotent capture by key: the service, ``POST /api/capture`` and ``POST /api/captures/batch``
on a real SQLite file, and writers racing with the same keys from several processes."""

from __future__ import annotations

import multiprocessing
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from simeval.errors import InvalidInput
from simeval.service import Service
from simeval.service.capture import CaptureService
from simeval.web import create_app

REF = "Paris is the capital of France and its largest city."
GOOD = "The capital of France is Paris, which is also its largest city."


def active_service(path: Path) -> Service:
    svc = Service(path)
    svc.create_eval("capital", REF)
    svc.test_eval("capital", "Capital?", GOOD)
    svc.activate_eval("capital")
    return svc


def rows(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM captures").fetchone()[0])


def test_service_capture_key(new_sqlite: Callable[..., str]) -> None:
    db = Path(new_sqlite("k.db"))
    svc = active_service(db)
    try:
        first = svc.capture("Capital?", GOOD, capture_key="resp-1", metadata={"n": 1})
        again = svc.capture("other input", "other output", capture_key="resp-1")
        assert not first.replayed and again.replayed
        assert again.id == first.id and again.output == GOOD and again.metadata == {"n": 1}
        assert again.capture_key == "resp-1"
        assert [r.score for r in again.results] == [r.score for r in first.results]
        assert [r.id for r in again.results] == [r.id for r in first.results]
        plain = [svc.capture("q", GOOD), svc.capture("q", GOOD)]  # no key: stored each time
        assert plain[0].id != plain[1].id and plain[0].capture_key is None
        assert rows(db) == 3
        assert svc.get_capture(first.id).capture_key == "resp-1"
        for bad in ("", " ", "x" * 201, "a\nb", 5):
            with pytest.raises((InvalidInput, TypeError)):
                svc.capture("q", "a", capture_key=bad)  # type: ignore[arg-type]
        assert rows(db) == 3
    finally:
        svc.close()


def test_capture_checked_batch_with_repeated_keys(new_sqlite: Callable[..., str]) -> None:
    db = Path(new_sqlite("b.db"))
    svc = active_service(db)
    try:
        svc.capture("q", GOOD, capture_key="old")
        items: list[Any] = [
            ("q1", GOOD, None, None, None, "k1"),
            ("q2", GOOD, None, None, None, "old"),
            ("q3", GOOD, None, None, None, "k1"),
            ("q4", GOOD, None, None, None, None),
            ("q5", GOOD, None, None, None),  # an unkeyed 5-tuple, as before keys
        ]
        outs = svc.capture_checked(items)
        assert [o.replayed for o in outs] == [False, True, True, False, False]
        assert outs[2].id == outs[0].id and outs[2].input == "q1"
        assert outs[1].input == "q" and len(outs[1].results) == 1
        assert rows(db) == 4
    finally:
        svc.close()


def _race(db: str, start: Any, n: int) -> None:
    svc = Service(db)
    start.wait()
    for i in range(n):
        svc.capture("q", GOOD, capture_key=f"key-{i}")
    svc.close()


@pytest.mark.slow
def test_processes_racing_with_the_same_keys_store_each_once(
    new_sqlite: Callable[..., str],
) -> None:
    db = Path(new_sqlite("race.db"))
    active_service(db).close()
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_race, args=(str(db), start, 200)) for _ in range(3)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    with sqlite3.connect(db) as conn:
        keys = [k for (k,) in conn.execute("SELECT capture_key FROM captures")]
    assert sorted(keys) == sorted(f"key-{i}" for i in range(200))


# -- HTTP ----------------------------------------------------------------------------------
@pytest.fixture
def client(new_sqlite: Callable[..., str]) -> Iterator[TestClient]:
    db = new_sqlite("api.db")
    active_service(Path(db)).close()
    with TestClient(create_app(db), base_url="http://127.0.0.1") as c:
        yield c


def test_capture_with_a_key_answers_200_when_replayed(client: TestClient) -> None:
    body = {"input": "Capital?", "output": GOOD, "capture_key": "k-1"}
    first = client.post("/api/capture", json=body)
    assert first.status_code == 201 and first.json()["capture_key"] == "k-1"
    again = client.post("/api/capture", json={**body, "output": "changed"})
    assert again.status_code == 200
    assert again.json() == first.json()
    assert client.post("/api/capture", json={**body, "capture_key": "k-2"}).status_code == 201
    r = client.post("/api/capture", json={**body, "capture_key": "x" * 201})
    assert r.status_code == 422 and "capture_key" in r.json()["error"]
    spec = client.get("/openapi.json").json()["paths"]
    answers = spec["/api/capture"]["post"]["responses"]
    assert {"200", "201"} <= set(answers)
    assert {"200", "201"} <= set(spec["/api/captures/batch"]["post"]["responses"])


def test_batch_stores_once_per_key(client: TestClient) -> None:
    caps = [{"input": f"q{i}", "output": GOOD, "capture_key": f"b-{i % 700}"} for i in range(1000)]
    r = client.post("/api/captures/batch", json={"captures": caps})
    assert r.status_code == 201, r.text
    out = r.json()
    assert out["stored"] == 700 and out["replayed"] == 300
    assert [c["stored"] for c in out["captures"]] == [i < 700 for i in range(1000)]
    assert out["captures"][0]["results"] == 1 and out["captures"][0]["passed"] == 1
    assert out["captures"][700]["id"] == out["captures"][0]["id"]
    again = client.post("/api/captures/batch", json={"captures": caps[:10]})
    assert again.status_code == 200 and again.json()["stored"] == 0
    stamped = {
        "input": "",
        "output": "a",
        "captured_at": "2024-05-01T12:00:00Z",
        "capture_key": "dated",
    }
    assert client.post("/api/captures/batch", json={"captures": [stamped]}).status_code == 201


def test_batch_errors_store_nothing(client: TestClient) -> None:
    good = {"input": "q", "output": GOOD}
    too_many = client.post("/api/captures/batch", json={"captures": [good] * 1001})
    assert too_many.status_code == 422
    bad = client.post(
        "/api/captures/batch", json={"captures": [good, {"input": "q", "output": "x" * 1_000_001}]}
    )
    assert bad.status_code in (400, 413)
    control = {"input": "", "output": "a", "capture_key": "a\nb"}
    r = client.post("/api/captures/batch", json={"captures": [good, control]})
    assert r.status_code == 400 and r.json()["error"].startswith("captures[1]: capture_key")
    r = client.post("/api/captures/batch", json={"captures": []})
    assert r.status_code == 200 and r.json() == {"stored": 0, "replayed": 0, "captures": []}
    assert client.get("/api/results").json()["total"] == 0


def test_capture_file_rows_with_keys(tmp_path: Path) -> None:
    from simeval.service import read_capture_lines

    svc = active_service(tmp_path / "f.db")
    try:
        text = '{"output": "a", "capture_key": "line-1"}\n{"output": "b", "capture_key": "line-2"}'
        rows_in = read_capture_lines(text)
        assert svc.capture_many(rows_in).captures == 2
        svc.capture_many(rows_in)  # a rerun stores nothing new
        assert rows(tmp_path / "f.db") == 2
        with pytest.raises(InvalidInput, match="line 1: capture_key is empty"):
            read_capture_lines('{"output": "a", "capture_key": ""}')
    finally:
        svc.close()


def test_a_writer_that_loses_the_race_answers_the_stored_capture(
    new_sqlite: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer's capture with the key was committed after this writer looked the key
    up (as on PostgreSQL, where writers do not wait for each other; here the look-up is made
    to miss it once): the unique index refuses the insert, the transaction is rolled back and
    run again, and the stored capture is the answer."""
    db = Path(new_sqlite("lost.db"))
    svc = active_service(db)
    try:
        svc.capture("q", "the other writer's output", capture_key="race")
        real = CaptureService._stored_keys
        calls = []

        def late_lookup(self: CaptureService, cur: Any, keys: set[str]) -> dict[str, int]:
            calls.append(keys)
            return {} if len(calls) == 1 else real(self, cur, keys)

        monkeypatch.setattr(CaptureService, "_stored_keys", late_lookup)
        out = svc.capture_checked(
            [("q", GOOD, None, None, None, "race"), ("q2", GOOD, None, None, None, "fresh")]
        )
        assert len(calls) == 2
        assert out[0].replayed and out[0].output == "the other writer's output"
        assert not out[1].replayed
        assert rows(db) == 2
    finally:
        svc.close()
