"""Conversations: the captures that share a conversation id, listed and shown turn by turn."""

from __future__ import annotations

from datetime import datetime
from typing import cast

from simeval.checks import as_utc, check_lookup, check_page
from simeval.errors import InvalidInput, NotFound
from simeval.service.base import Core, Part
from simeval.service.capture import CaptureService
from simeval.service.cursor import OLDER, Page, Position, keyset_page, page_position
from simeval.service.models import CaptureOut, ConversationDetail, ConversationOut
from simeval.store import Conversation, Tx, unpack_results
from simeval.store.conversations_sql import (
    capture_blobs,
    capture_inputs,
    conversation_page,
    conversation_reviews,
    conversation_turns,
    count_conversations,
    count_turns,
)

MAX_TURNS = 1000  # turns shown on one conversation page / answer


def _review_changes(s: Tx, conversation_ids: list[str]) -> dict[str, int]:
    """How reviews change the pass counts of ``conversation_ids`` (the summary counts the
    automated verdicts): for each reviewed result of their captures, its effective verdict
    (the review's score against the result's threshold) less its automated one."""
    if not conversation_ids:
        return {}
    reviewed = conversation_reviews(s, conversation_ids)
    if not reviewed:
        return {}
    blobs = capture_blobs(s, {c for c, _ in reviewed})
    out: dict[str, int] = {}
    for (cid, eid), (score, talk) in reviewed.items():
        packed = unpack_results(blobs.get(cid))
        i = packed.position(eid)
        if i >= 0:
            out[talk] = out.get(talk, 0) + int(score >= packed.thresholds[i]) - packed.passed[i]
    return out


def _check_conversation(conversation_id: object) -> str:
    if not isinstance(conversation_id, str) or not conversation_id.strip():
        raise InvalidInput("conversation id must be a non-empty string")
    if len(conversation_id) > 200:
        raise InvalidInput("conversation id is longer than 200 characters")
    if check_lookup(conversation_id, "conversation id") is None:
        raise NotFound(f"no conversation {conversation_id!r}")  # no stored id holds a NUL
    return conversation_id


class ConversationService(Part):
    """Conversations, from the captures' ``conversation_id`` and their summaries."""

    def __init__(self, core: Core, captures: CaptureService):
        super().__init__(core)
        self.captures = captures

    def count_conversations(self) -> int:
        """How many distinct conversation ids the captures carry (the summary's rows)."""
        with self.store.read() as s:
            return count_conversations(s)

    def list_conversations(
        self, limit: int = 50, offset: int = 0, cursor: str | None = None
    ) -> list[ConversationOut]:
        """Conversations, most recently active first (then by id): ``id``, ``turns``,
        ``first_at``, ``last_at``, ``results``, ``passed``, ``pass_rate`` (effective
        verdicts; None when no turn was scored) and the last turn's input (``last_input``, cut
        to 300 characters). ``cursor`` (a page's ``next_cursor``, ``page_conversations``)
        goes on after that page; ``offset`` skips rows after it."""
        return self.page_conversations(limit, offset, cursor).items

    def page_conversations(
        self, limit: int = 50, offset: int = 0, cursor: str | None = None
    ) -> Page[ConversationOut]:
        """A page of ``list_conversations`` with its ``next_cursor`` (less recently active
        conversations, None at the end) and ``prev_cursor`` (more recent ones, None on the
        first page).

        Read from the conversations' summary (``conversations``, kept with every capture):
        a page reads its rows, not every capture. A cursor's page holds the conversations
        whose last activity comes after the cursor's in the listing's order (earlier, or as
        early with a greater id): a conversation that gets a new turn while a reader pages
        moves to the top, above the cursor, so it is not given twice; it is on the first page
        of a new listing. A conversation whose activity does not change meanwhile is given
        exactly once over the pages.
        """
        limit, offset = check_page(limit, offset)
        at = page_position(cursor, offset, "conversations", (datetime, str))
        with self.store.read() as s:

            def fetch(at: Position | None, n: int) -> list[Conversation]:
                older = at is None or at.direction == OLDER
                key = None if at is None else cast(tuple[datetime, str], at.key)
                return conversation_page(s, older, key, n, offset if at is None else 0)

            page = keyset_page(
                "conversations",
                fetch,
                lambda r: (r.last_at, r.conversation_id),
                limit,
                at,
                offset > 0,
            )
            items = self._conversations_out(s, page.items)
        return Page(items, page.next_cursor, page.prev_cursor)

    def _conversations_out(self, s: Tx, rows: list[Conversation]) -> list[ConversationOut]:
        """The summary rows as listed: reviews applied to the pass counts, the last input."""
        ids = [r.conversation_id for r in rows]
        passes = {r.conversation_id: r.passes for r in rows}
        for talk, delta in _review_changes(s, ids).items():
            passes[talk] += delta
        last_ids = [r.last_capture_id for r in rows]
        lasts = capture_inputs(s, last_ids)
        out = []
        for r in rows:
            n, p = r.results, passes[r.conversation_id]
            text = lasts.get(r.last_capture_id) or ""
            out.append(
                ConversationOut(
                    id=r.conversation_id,
                    turns=r.turns,
                    first_at=as_utc(r.first_at),
                    last_at=as_utc(r.last_at),
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
            # the turns' reviews, references and eval names read once for all of them
            turns: list[CaptureOut] = self.captures.captures_out(
                s, conversation_turns(s, cid, MAX_TURNS)
            )
            total = count_turns(s, cid)
        if not turns:
            raise NotFound(f"no conversation with id {cid!r}")
        n = sum(len(t.results) for t in turns)
        p = sum(r.passed for t in turns for r in t.results)
        return ConversationDetail(
            id=cid,
            turns=total,
            first_at=turns[0].captured_at,
            last_at=turns[-1].captured_at,
            results=n,
            passed=p,
            pass_rate=p / n if n else None,
            captures=turns,
        )
