"""A page of captures and a conversation's turns are read in bulk: the number of statements
``list_captures``, ``page_captures``, ``get_conversation`` and ``list_conversations`` run does
not grow with the rows they answer (a per-row query would), on a real SQLite file and a real
PostgreSQL database (``conftest.db``); and what the bulk read answers equals each capture read
alone (``get_capture``).

The statements are counted by a ``before_cursor_execute`` listener on the store's engine, as
``tests/store/test_plans.py`` records them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from simeval.service import Service

PARIS = "The capital of France is Paris, which stands on the Seine."
QUESTION = "What is the capital of France?"
ANSWERS = ("Paris is the capital of France.", "France is in Europe.", "The Seine is a river.")
BASE = datetime(2026, 3, 1, 8, 0)


@pytest.fixture
def svc(db: str) -> Iterator[Service]:
    with Service(db) as s:
        for name in ("capital", "river", "europe"):
            s.create_eval(name, PARIS, threshold=0.5)
            assert s.test_eval(name, QUESTION, PARIS).passed
            s.activate_eval(name)
        s.capture_many(
            [
                {
                    "input": f"{QUESTION} ({i})",
                    "output": ANSWERS[i % 3],
                    "conversation_id": "long" if i % 2 else f"short{i % 4}",
                    "captured_at": (BASE + timedelta(minutes=i)).isoformat(),
                    "metadata": {"engine": f"v{i % 2}"},
                }
                for i in range(60)
            ]
        )
        # reviews on a few results, so the reviews' read has rows to attach
        for cap in s.list_captures(limit=60)[::7]:
            s.review_result(cap.results[1].id, 0.9, "checked by hand")
        yield s


def _selects(svc: Service, call: Callable[[], Any]) -> int:
    """How many SELECT statements ``call`` runs."""
    seen: list[str] = []

    def listen(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            seen.append(statement)

    sa.event.listen(svc.store.engine, "before_cursor_execute", listen)
    try:
        call()
    finally:
        sa.event.remove(svc.store.engine, "before_cursor_execute", listen)
    return len(seen)


def test_a_page_of_captures_costs_the_same_statements_for_2_or_25_rows(svc: Service) -> None:
    small = _selects(svc, lambda: svc.list_captures(limit=2))
    large = _selects(svc, lambda: svc.list_captures(limit=25))
    assert 1 <= small == large, (small, large)
    # the metadata walk and a cursor's page too
    cursor = svc.page_captures(limit=5).next_cursor
    small = _selects(svc, lambda: svc.page_captures(limit=2, meta=["engine=v1"], cursor=cursor))
    large = _selects(svc, lambda: svc.page_captures(limit=25, meta=["engine=v1"], cursor=cursor))
    assert 1 <= small == large, (small, large)


def test_a_conversation_costs_the_same_statements_for_2_or_30_turns(svc: Service) -> None:
    assert svc.get_conversation("short0").turns == 15
    assert svc.get_conversation("long").turns == 30
    few = _selects(svc, lambda: svc.get_conversation("short0"))
    many = _selects(svc, lambda: svc.get_conversation("long"))
    assert 1 <= few == many, (few, many)
    small = _selects(svc, lambda: svc.list_conversations(limit=1))
    large = _selects(svc, lambda: svc.list_conversations(limit=5))
    assert 1 <= small == large, (small, large)


def test_the_bulk_reads_answer_what_each_capture_read_alone_does(svc: Service) -> None:
    page = svc.list_captures(limit=25)
    assert len(page) == 25
    assert [c.model_dump() for c in page] == [svc.get_capture(c.id).model_dump() for c in page]
    assert any(r.review is not None for c in page for r in c.results)
    conv = svc.get_conversation("long")
    assert [c.id for c in conv.captures] == sorted(c.id for c in conv.captures)
    alone = [svc.get_capture(c.id).model_dump() for c in conv.captures]
    assert [c.model_dump() for c in conv.captures] == alone
    n = sum(len(c.results) for c in conv.captures)
    assert (conv.results, conv.passed) == (
        n,
        sum(r.passed for c in conv.captures for r in c.results),
    )
