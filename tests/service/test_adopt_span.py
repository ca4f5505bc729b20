"""One call seen twice, by the proxy and as a span, is one capture whichever came first:
``Service.adopt_span`` (the proxy's capture first: it takes the span's conversation id and
ids) and ``Service.merge_proxied`` (the span's first: it takes the proxy's exact texts and
metadata and is scored again). The conversation's summary, the indexed metadata and the
rollups (for a capture they counted already) follow. On SQLite and PostgreSQL
(``conftest.db``)."""

from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import Any

import pytest
import sqlalchemy as sa
from tests.readtables import assert_exact
from tests.rollups import held_captures, held_results, roll

from simeval.checks import check_capture
from simeval.service import Service
from simeval.service.models import CaptureOut
from simeval.store import (
    CAPTURE_LOCK,
    TrendRollup,
    capture_meta_table,
    captures_table,
    resolve_db_url,
    spans_sql,
    unpack_results,
)
from simeval.store.meta_index import NOT_ROLLED_UP
from simeval.store.meta_rollup import hour_start, watermark
from simeval.store.rollups import roll_up

REF = "Paris is the capital of France and its largest city."
SPAN = {"trace_id": "ab" * 16, "span_id": "cd" * 8, "span_name": "chat m"}
# the ids the proxy read from the request's traceparent (an HTTP client's span, say)
TRACEPARENT = {"trace_id": "ab" * 16, "span_id": "ef" * 8}


def _service(db: str) -> Service:
    svc = Service(db)
    svc.create_eval("capital", REF)
    svc.test_eval("capital", "Capital?", REF)
    svc.activate_eval("capital")
    svc.update_settings(indexed_meta=["span_name", "endpoint", "source"])
    return svc


def _assert_rollups_exact(svc: Service) -> None:
    """``trend_rollup``, ``meta_rollup`` and ``meta_capture_rollup`` hold what the captures up
    to the watermark and their ``capture_meta`` rows give, recomputed one result at a time."""
    c, m = captures_table.c, capture_meta_table.c
    with svc.store.read() as s:
        mark = watermark(s)
        pairs: dict[int, list[tuple[str, str]]] = {}
        for cid, key, value in s.execute(sa.select(m.capture_id, m.key, m.value)):
            if key not in NOT_ROLLED_UP:
                pairs.setdefault(cid, []).append((key, value))
        trend: dict[tuple[Any, ...], list[Any]] = {}
        results: dict[tuple[Any, ...], list[int]] = {}
        held: dict[tuple[Any, ...], int] = {}
        for cid, when, blob in s.execute(
            sa.select(c.id, c.captured_at, c.scores).where(c.id <= mark)
        ):
            hour = hour_start(when)
            for key, value in pairs.get(cid, []):
                held[(key, value, hour)] = held.get((key, value, hour), 0) + 1
            for eval_id, version, score, ok, _t, _m, fp in unpack_results(blob).rows():
                t = trend.setdefault((hour, eval_id, version, fp), [0, 0.0, 0])
                t[0] += 1
                t[1] += score
                t[2] += int(ok)
                for key, value in pairs.get(cid, []):
                    r = results.setdefault((key, value, hour, eval_id), [0, 0])
                    r[0] += 1
                    r[1] += int(ok)
        r = TrendRollup
        stored = {
            (hour_start(b), e, v, f): [n, total, p]
            for b, e, v, f, n, total, p in s.execute(
                sa.select(
                    r.bucket, r.eval_id, r.eval_version, r.fingerprint, r.count, r.total, r.passes
                )
            )
            if n
        }
        assert held_results(s) == results
        assert held_captures(s) == held
    assert set(stored) == set(trend)
    for key, (n, total, p) in trend.items():
        assert stored[key][0] == n and stored[key][2] == p
        assert abs(stored[key][1] - total) < 1e-9


def test_the_proxys_capture_takes_the_spans_conversation_and_ids(db: str) -> None:
    with _service(db) as svc:
        meta = {"source": "proxy", "model": "m", **TRACEPARENT}
        proxied = check_capture("Capital?", REF, None, meta, None)
        (out,) = svc.capture_checked([(*proxied, "chatcmpl-1")])
        assert roll(svc) == out.id  # counted by the rollups: they follow the change
        # what the capture has already is kept: its source and model, its texts and results;
        # the span's own ids replace those of the traceparent
        assert svc.adopt_span(out.id, "conv-1", {**SPAN, "source": "otel", "model": "x"})
        assert not svc.adopt_span(out.id, "conv-2", SPAN)  # nothing more to add
        # another span of the same call (a second instrumentation): the first one's ids stay
        assert not svc.adopt_span(out.id, None, {**SPAN, "span_id": "99" * 8})
        (cap,) = svc.list_captures()
        assert cap.conversation_id == "conv-1"
        assert cap.metadata == {"source": "proxy", "model": "m", **SPAN}
        assert (cap.input, cap.output, cap.capture_key) == ("Capital?", REF, "chatcmpl-1")
        assert [r.score for r in cap.results] == [r.score for r in out.results]
        talk = svc.get_conversation("conv-1")
        assert talk.turns == 1 and [c.id for c in talk.captures] == [out.id]
        assert [c.id for c in svc.list_conversations()] == ["conv-1"]
        assert [c.id for c in svc.list_captures(meta=["span_name=chat m"])] == [out.id]
        assert svc.count_captures(meta=["span_name=chat m"]) == 1
        assert not svc.adopt_span(out.id + 1, "conv-3", SPAN)  # no such capture
        _assert_rollups_exact(svc)
    assert_exact(db)


def _span_capture(svc: Service, output: str, *, scored: bool) -> CaptureOut:
    """A span's capture of a call (``source`` otel, its ids, its conversation), its output
    as the span had it, scored or (as a cut one is) not."""
    meta = {"source": "otel", "model": "gpt-test", "latency_ms": 812.5, **SPAN}
    if not scored:
        meta["cut"] = "gen_ai.output.messages is not whole JSON (20 characters)"
    span = check_capture("Capital?", output, "conv-1", meta, datetime(2026, 3, 2, 10, 15))
    (out,) = svc.capture_checked([(*span, "chatcmpl-1")], score=scored)
    return out


PROXY_META = {
    "source": "proxy",
    "endpoint": "/v1/chat/completions",
    "model": "gpt-test-2026",
    "latency_ms": 815.0,
    "upstream_status": 200,
    **TRACEPARENT,
}


@pytest.mark.parametrize("scored", [False, True])
def test_the_spans_capture_takes_the_proxys_texts_and_is_scored_again(
    db: str, scored: bool
) -> None:
    """The span's copy was cut (stored unscored) or scored on other text (a shorter output,
    as a length limit leaves it): the proxy's exact text replaces it and is scored; the span's
    conversation and ids stay, the proxy's metadata merged over the span's, nothing said of
    the span's text (``cut``) kept. The rollups, which counted the capture, follow; its
    scores are announced (exported) only when it had none before."""
    with _service(db) as svc:
        other = svc.capture("Another?", REF, conversation_id="conv-1")
        out = _span_capture(svc, "Paris, I think.", scored=scored)
        assert roll(svc) == out.id
        before = svc.get_capture(out.id)
        assert before.evaluated == scored
        if scored:
            assert not before.results[0].passed  # scored on the shorter text: a fail
        announced: list[list[CaptureOut]] = []
        svc.on_captured(announced.append)
        proxy = check_capture("Capital?", REF, None, PROXY_META, None)
        merged = svc.merge_proxied(out.id, (*proxy, "chatcmpl-1"))
        assert merged is not None
        cap = svc.get_capture(out.id)
        assert (cap.input, cap.output, cap.capture_key) == ("Capital?", REF, "chatcmpl-1")
        assert cap.conversation_id == "conv-1"
        assert cap.captured_at == before.captured_at
        assert cap.metadata == {**PROXY_META, **SPAN}
        assert cap.evaluated and [r.passed for r in cap.results] == [True]
        assert cap.results[0].score > 0.99
        assert merged.model_dump() == cap.model_dump()
        assert [[c.id for c in batch] for batch in announced] == ([] if scored else [[out.id]])
        # the proxy's already: a second copy changes nothing
        assert svc.merge_proxied(out.id, (*proxy, "chatcmpl-1")) is None
        assert svc.merge_proxied(out.id + 99, (*proxy, "chatcmpl-1")) is None
        talk = svc.get_conversation("conv-1")
        assert talk.turns == 2 and sorted(c.id for c in talk.captures) == [other.id, out.id]
        assert [c.id for c in svc.list_captures(meta=["source=proxy"])] == [out.id]
        assert svc.count_captures(meta=["source=otel"]) == 0
        assert svc.count_captures(meta=["endpoint=/v1/chat/completions"]) == 1
        stats = {e.name: e.stats for e in svc.list_evals()}["capital"]
        assert stats is not None and stats.results == 2 and stats.pass_rate == 1.0
        _assert_rollups_exact(svc)
    assert_exact(db)


def test_a_merge_that_fails_writes_nothing(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The merge is one transaction: failing at its last step (the conversations' summaries,
    after the capture, its metadata rows and the rollups were written), it leaves all of them
    as they were."""
    with _service(db) as svc:
        out = _span_capture(svc, "Paris is the capital", scored=False)
        roll(svc)
        before = svc.get_capture(out.id)
        with svc.store.read() as s:
            held = (held_results(s), held_captures(s))

        def broken(conn: Any, ids: Any) -> int:
            raise RuntimeError("the disk went away")

        monkeypatch.setattr(spans_sql, "recompute_conversations", broken)
        proxy = check_capture("Capital?", REF, None, PROXY_META, None)
        with pytest.raises(RuntimeError, match="the disk went away"):
            svc.merge_proxied(out.id, (*proxy, "chatcmpl-1"))
        assert svc.get_capture(out.id).model_dump() == before.model_dump()
        with svc.store.read() as s:
            assert (held_results(s), held_captures(s)) == held
        _assert_rollups_exact(svc)
    assert_exact(db)


def test_a_capture_counted_while_its_merge_waits_is_merged_exactly(pg_url: str) -> None:
    """PostgreSQL: the merge of a capture the rollups have not counted takes the capture lock
    shared (captures go on); when a rollup counts the capture while the merge waits for that
    lock, the merge is run again holding it exclusively, and the rollups stay exact."""
    with _service(pg_url) as svc:
        out = _span_capture(svc, "Paris, I think.", scored=True)
        proxy = check_capture("Capital?", REF, None, PROXY_META, None)
        engine = sa.create_engine(resolve_db_url(pg_url), poolclass=sa.pool.NullPool)
        done: list[Any] = []
        try:
            with engine.connect() as conn:
                rollup = conn.begin()
                conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({CAPTURE_LOCK})")
                merging = threading.Thread(
                    target=lambda: done.append(svc.merge_proxied(out.id, (*proxy, "chatcmpl-1")))
                )
                merging.start()
                waiting = sa.text(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                )
                for _ in range(500):  # until the merge waits for the capture lock
                    with engine.connect() as probe:
                        if probe.execute(waiting).scalar():
                            break
                    time.sleep(0.02)
                else:
                    raise AssertionError("the merge never waited for the capture lock")
                assert roll_up(conn) == out.id  # counted while the merge waits
                rollup.commit()
            merging.join(30)
        finally:
            engine.dispose()
        assert done and done[0] is not None and done[0].output == REF
        assert [r.passed for r in svc.get_capture(out.id).results] == [True]
        _assert_rollups_exact(svc)
    assert_exact(pg_url)
