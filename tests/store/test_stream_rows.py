"""``simeval.store.sql.stream_rows`` gives the rows SQLAlchemy would, a chunk at a time, from
the driver's cursor (on PostgreSQL a named, binary server-side cursor), on both backends:
with dates, IN lists and JSON among the parameters, and bytes among the values."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from simeval.service import Service
from simeval.store.sql import stream_rows
from simeval.store.tables import captures_table

_c = captures_table.c


@pytest.fixture
def svc(db: str) -> Iterator[Service]:
    with Service(db) as service:
        service.create_eval("capital", "Paris is the capital of France.", threshold=0.5)
        service.test_eval("capital", "q", "Paris is the capital of France.")
        service.activate_eval("capital")
        start = datetime.now(UTC) - timedelta(hours=5)
        service.capture_many(
            {
                "input": f"question {i}",
                "output": "Paris." if i % 2 else "Lyon.",
                "metadata": {"engine": f"v{i % 3}"},
                "captured_at": (start + timedelta(minutes=7 * i)).isoformat(),
            }
            for i in range(11)
        )
        yield service


def test_the_rows_are_sqlalchemys_a_chunk_at_a_time(svc: Service) -> None:
    with svc.store.engine.connect() as conn:
        ids = [row.id for row in conn.execute(select(_c.id).order_by(_c.id))]
        since = conn.execute(select(_c.captured_at).where(_c.id == ids[2])).scalar_one()
        q = (
            select(_c.id, _c.input, _c.scores)
            .where(_c.id.in_(ids[1:9]), _c.captured_at >= since, _c.input != "question 5")
            .order_by(_c.id)
        )
        expected = [tuple(r) for r in conn.execute(q)]
        chunks = list(stream_rows(conn, q, 2))
    assert [len(c) for c in chunks] == [2, 2, 2]
    got = [tuple(r) for chunk in chunks for r in chunk]
    assert [r[:2] for r in got] == [r[:2] for r in expected]
    assert [r[0] for r in got] == [i for i in ids[2:9] if i != ids[5]]
    assert all(
        isinstance(r[2], bytes) and bytes(r[2]) == bytes(e[2])
        for r, e in zip(got, expected, strict=True)
    )


def test_an_empty_answer_and_an_empty_in_list(svc: Service) -> None:
    with svc.store.engine.connect() as conn:
        assert list(stream_rows(conn, select(_c.id).where(_c.id.in_([])), 5)) == []
        assert list(stream_rows(conn, select(_c.id).where(_c.id < 0), 5)) == []
