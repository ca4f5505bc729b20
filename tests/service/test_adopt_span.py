"""``Service.adopt_span``: a call the proxy stored, seen again as a span, takes the span's
conversation id and ids; the conversation's summary and the indexed metadata follow. On
SQLite and PostgreSQL (``conftest.db``)."""

from __future__ import annotations

from simeval.checks import check_capture
from simeval.service import Service

REF = "Paris is the capital of France and its largest city."


def test_the_proxys_capture_takes_the_spans_conversation_and_ids(db: str) -> None:
    with Service(db) as svc:
        svc.create_eval("capital", REF)
        svc.test_eval("capital", "Capital?", REF)
        svc.activate_eval("capital")
        svc.update_settings(indexed_meta=["span_name"])
        proxied = check_capture("Capital?", REF, None, {"source": "proxy", "model": "m"}, None)
        (out,) = svc.capture_checked([(*proxied, "chatcmpl-1")])
        span = {"trace_id": "ab" * 16, "span_id": "cd" * 8, "span_name": "chat m"}
        # what the capture has already is kept: its source and model, its texts and results
        assert svc.adopt_span(out.id, "conv-1", {**span, "source": "otel", "model": "x"})
        assert not svc.adopt_span(out.id, "conv-2", span)  # nothing more to add
        (cap,) = svc.list_captures()
        assert cap.conversation_id == "conv-1"
        assert cap.metadata == {"source": "proxy", "model": "m", **span}
        assert (cap.input, cap.output, cap.capture_key) == ("Capital?", REF, "chatcmpl-1")
        assert [r.score for r in cap.results] == [r.score for r in out.results]
        talk = svc.get_conversation("conv-1")
        assert talk.turns == 1 and [c.id for c in talk.captures] == [out.id]
        assert [c.id for c in svc.list_conversations()] == ["conv-1"]
        assert [c.id for c in svc.list_captures(meta=["span_name=chat m"])] == [out.id]
        assert not svc.adopt_span(out.id + 1, "conv-3", span)  # no such capture
