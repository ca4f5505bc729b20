"""Conversations: the list, most recently active first, and one conversation's turns."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from simeval.web.pages._render import PER_PAGE, render, service_of
from simeval.web.pages.datasets import dataset_names
from simeval.web.schema import IntParam

router = APIRouter(include_in_schema=False)


@router.get("/conversations")
def conversations_page(request: Request, page: IntParam = 1, cursor: str | None = None) -> Response:
    """Conversations, most recently active first, pages of 50 (Older/Newer by cursor;
    ``page=N`` still reads a shallow page by offset)."""
    service = service_of(request)
    page = max(page, 1)
    offset = 0 if cursor else (page - 1) * PER_PAGE
    found = service.page_conversations(limit=PER_PAGE, offset=offset, cursor=cursor or None)
    total = service.count_conversations()
    return render(
        request,
        "conversations.html",
        {
            "items": found.items,
            "total": total,
            "older": found.next_cursor,
            "newer": found.prev_cursor,
        },
    )


@router.get("/conversations/{conversation_id:path}")
def conversation_page(request: Request, conversation_id: str) -> Response:
    """A conversation's turns in order with each eval's verdict."""
    conv = service_of(request).get_conversation(conversation_id)
    return render(
        request, "conversation.html", {"conv": conv, "dataset_names": dataset_names(request)}
    )
