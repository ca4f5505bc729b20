"""The SQL of conversations (``simeval.service.conversations``): the summary rows
(``conversations``, kept with every capture) read by keyset, a conversation's turns, and the
reviews that change its pass counts."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from simeval.store.tables import Capture, Conversation, Review


def count_conversations(s: Session) -> int:
    """How many conversations the summary holds."""
    return int(s.scalar(select(func.count()).select_from(Conversation)) or 0)


def conversation_page(
    s: Session, older: bool, key: tuple[datetime, str] | None, n: int, offset: int
) -> list[Conversation]:
    """Up to ``n`` summary rows after ``offset``: most recently active first past the
    listing key ``key`` = (last_at, conversation id) when ``older`` (from the top without a
    key), else the ones before it, least recent first."""
    t = Conversation
    q = select(t)
    if older:
        if key is not None:
            last, after = key
            # a range on last_at alone: what the index (last_at, id) serves
            q = q.where(t.last_at <= last, or_(t.last_at < last, t.conversation_id > after))
        q = q.order_by(t.last_at.desc(), t.conversation_id)
    else:
        assert key is not None
        last, before = key
        q = q.where(t.last_at >= last, or_(t.last_at > last, t.conversation_id < before)).order_by(
            t.last_at, t.conversation_id.desc()
        )
    return list(s.scalars(q.limit(n).offset(offset)))


def conversation_reviews(
    s: Session, conversation_ids: list[str]
) -> dict[tuple[int, int], tuple[float, str]]:
    """(review score, conversation id) of each reviewed result of the captures of
    ``conversation_ids``, by (capture id, eval id)."""
    q = (
        select(Review.capture_id, Review.eval_id, Review.score, Capture.conversation_id)
        .join(Capture, Capture.id == Review.capture_id)
        .where(Capture.conversation_id.in_(conversation_ids))
    )
    return {
        (int(cid or 0), int(eid or 0)): (score, str(talk)) for cid, eid, score, talk in s.execute(q)
    }


def capture_blobs(s: Session, capture_ids: Iterable[int]) -> dict[int, bytes | None]:
    """The packed results of the captures ``capture_ids``, by id."""
    return dict(
        s.execute(select(Capture.id, Capture.scores).where(Capture.id.in_(capture_ids))).all()
    )


def capture_inputs(s: Session, capture_ids: Iterable[int]) -> dict[int, str]:
    """The input texts of the captures ``capture_ids``, by id."""
    q = select(Capture.id, Capture.input).where(Capture.id.in_(capture_ids))
    return {i: text for i, text in s.execute(q)}


def conversation_turns(s: Session, conversation_id: str, limit: int) -> list[Capture]:
    """The first ``limit`` captures of a conversation, oldest first."""
    q = (
        select(Capture)
        .where(Capture.conversation_id == conversation_id)
        .order_by(Capture.captured_at, Capture.id)
        .limit(limit)
    )
    return list(s.scalars(q))


def count_turns(s: Session, conversation_id: str) -> int:
    """How many captures a conversation holds."""
    total = s.scalar(
        select(func.count(Capture.id)).where(Capture.conversation_id == conversation_id)
    )
    return int(total or 0)
