"""Conversations: the captures that share a conversation id, listed and shown turn by turn."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from simeval.checks import as_utc, check_lookup, check_page
from simeval.errors import InvalidInput, NotFound
from simeval.service.capture import CaptureMixin
from simeval.service.models import CaptureOut, ConversationDetail, ConversationOut
from simeval.service.queries import capture_reviews, capture_rows
from simeval.store import Capture

MAX_TURNS = 1000  # turns shown on one conversation page / answer


def _check_conversation(conversation_id: Any) -> str:
    if not isinstance(conversation_id, str) or not conversation_id.strip():
        raise InvalidInput("conversation id must be a non-empty string")
    if len(conversation_id) > 200:
        raise InvalidInput("conversation id is longer than 200 characters")
    if check_lookup(conversation_id, "conversation id") is None:
        raise NotFound(f"no conversation {conversation_id!r}")  # no stored id holds a NUL
    return conversation_id


class ConversationsMixin(CaptureMixin):
    """Conversations, from the captures' ``conversation_id``."""

    def count_conversations(self) -> int:
        """How many distinct conversation ids the captures carry."""
        with self.store.read() as s:
            q = select(func.count(func.distinct(Capture.conversation_id)))
            return int(s.scalar(q.where(Capture.conversation_id.is_not(None))) or 0)

    def list_conversations(self, limit: int = 50, offset: int = 0) -> list[ConversationOut]:
        """Conversations, most recently active first: ``id``, ``turns``, ``first_at``,
        ``last_at``, ``results``, ``passed``, ``pass_rate`` (effective verdicts; None when no
        turn was scored) and the last turn's input (``last_input``, cut to 300 characters)."""
        limit, offset = check_page(limit, offset)
        with self.store.read() as s:
            last = func.max(Capture.captured_at)
            q = (
                select(
                    Capture.conversation_id,
                    func.count(Capture.id),
                    func.min(Capture.captured_at),
                    last,
                    func.max(Capture.id),
                )
                .where(Capture.conversation_id.is_not(None))
                .group_by(Capture.conversation_id)
                .order_by(last.desc(), Capture.conversation_id)
                .limit(limit)
                .offset(offset)
            )
            groups = list(s.execute(q))
            ids = [str(g[0]) for g in groups]
            tallies: dict[str | None, list[int]] = {i: [0, 0] for i in ids}
            if ids:
                caps = list(s.scalars(select(Capture).where(Capture.conversation_id.in_(ids))))
                reviews = capture_reviews(s, [c.id for c in caps])
                for cap in caps:
                    for row in capture_rows(s, cap, reviews):
                        tally = tallies[cap.conversation_id]
                        tally[0] += 1
                        tally[1] += row.passed
            lasts = {
                c.id: c.input
                for c in s.scalars(select(Capture).where(Capture.id.in_([g[4] for g in groups])))
            }
            out = []
            for cid, turns, first, latest, last_id in groups:
                n, p = tallies[cid]
                text = lasts.get(last_id) or ""
                out.append(
                    ConversationOut(
                        id=str(cid),
                        turns=int(turns),
                        first_at=as_utc(first),
                        last_at=as_utc(latest),
                        results=n,
                        passed=p,
                        pass_rate=p / n if n else None,
                        last_input=text if len(text) <= 300 else text[:299] + "…",
                    )
                )
            return out

    def get_conversation(self, conversation_id: str) -> ConversationDetail:
        """A conversation's turns in order (oldest first, at most 1,000), each a capture with
        its results, and the conversation's totals."""
        cid = _check_conversation(conversation_id)
        with self.store.read() as s:
            q = (
                select(Capture)
                .where(Capture.conversation_id == cid)
                .order_by(Capture.captured_at, Capture.id)
                .limit(MAX_TURNS)
            )
            turns: list[CaptureOut] = [self._capture_out(s, c) for c in s.scalars(q)]
            total = s.scalar(select(func.count(Capture.id)).where(Capture.conversation_id == cid))
        if not turns:
            raise NotFound(f"no conversation with id {cid!r}")
        n = sum(len(t.results) for t in turns)
        p = sum(r.passed for t in turns for r in t.results)
        return ConversationDetail(
            id=cid,
            turns=int(total or 0),
            first_at=turns[0].captured_at,
            last_at=turns[-1].captured_at,
            results=n,
            passed=p,
            pass_rate=p / n if n else None,
            captures=turns,
        )
