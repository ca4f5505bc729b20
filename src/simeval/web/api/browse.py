"""Captures, conversations and stored runs, as listed and read one by one."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from fastapi.responses import JSONResponse

from simeval.checks import (
    MAX_DEEP_OFFSET,
    MAX_ID,
)
from simeval.service.models import (
    CaptureOut,
    ConversationDetail,
    RunOut,
)
from simeval.web import schema as declared
from simeval.web.api.common import CursorParam, RunId, ServiceDep, json_reply

router = APIRouter(prefix="/api", responses=declared.ERRORS)


@router.get("/captures", tags=["captures"])
def list_captures(
    service: ServiceDep,
    meta: Annotated[list[str] | None, declared.meta("Metadata KEY:VALUE; repeatable.")] = None,
    conversation_id: Annotated[str | None, declared.text()] = None,
    since: Annotated[str | None, declared.when("ISO time or an age like 7d.")] = None,
    until: Annotated[str | None, declared.when("ISO time or an age.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000), declared.DIGITS] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_DEEP_OFFSET), declared.DIGITS] = 0,
    cursor: CursorParam = None,
) -> JSONResponse:
    """Captures, newest first, with their metadata and results; page on with ``cursor=``
    the answer's ``next_cursor`` (null at the end)."""
    filters: dict[str, Any] = {
        "meta": meta,
        "conversation_id": conversation_id,
        "since": since,
        "until": until,
    }
    page = service.page_captures(limit=limit, offset=offset, cursor=cursor, **filters)
    return JSONResponse(
        {
            "total": service.count_captures(**filters),
            "limit": limit,
            "offset": offset,
            "captures": [c.model_dump(mode="json") for c in page.items],
            "next_cursor": page.next_cursor,
            "prev_cursor": page.prev_cursor,
        }
    )


@router.get("/captures/{capture_id}", response_model=CaptureOut, tags=["captures"])
def get_capture(
    capture_id: Annotated[
        int, Path(ge=1, le=MAX_ID, description="A capture's id"), declared.DIGITS
    ],
    service: ServiceDep,
) -> JSONResponse:
    """One capture with its metadata and results."""
    return json_reply(service.get_capture(capture_id))


@router.get("/conversations", tags=["captures"])
def list_conversations(
    service: ServiceDep,
    limit: Annotated[int, Query(ge=1, le=1000), declared.DIGITS] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_DEEP_OFFSET), declared.DIGITS] = 0,
    cursor: CursorParam = None,
) -> JSONResponse:
    """Conversations, most recently active first: turns, pass rate, last activity; page on
    with ``cursor=`` the answer's ``next_cursor`` (null at the end). A conversation with a
    new turn moves to the top: pages read by cursor do not give it twice."""
    page = service.page_conversations(limit=limit, offset=offset, cursor=cursor)
    return JSONResponse(
        {
            "total": service.count_conversations(),
            "limit": limit,
            "offset": offset,
            "conversations": [c.model_dump(mode="json") for c in page.items],
            "next_cursor": page.next_cursor,
            "prev_cursor": page.prev_cursor,
        }
    )


@router.get(
    "/conversations/{conversation_id:path}", response_model=ConversationDetail, tags=["captures"]
)
def get_conversation(conversation_id: str, service: ServiceDep) -> JSONResponse:
    """A conversation's turns in order, each with its input, output and results."""
    return json_reply(service.get_conversation(conversation_id))


@router.get("/runs", tags=["runs"])
def list_runs(
    service: ServiceDep,
    limit: Annotated[int, Query(ge=1, le=1000), declared.DIGITS] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_DEEP_OFFSET), declared.DIGITS] = 0,
    cursor: CursorParam = None,
) -> JSONResponse:
    """Stored data-set runs, newest first: name, time, rows, pass rate, mean score, status;
    page on with ``cursor=`` the answer's ``next_cursor`` (null at the end)."""
    page = service.page_runs(limit=limit, offset=offset, cursor=cursor)
    return JSONResponse(
        {
            "total": service.count_runs(),
            "limit": limit,
            "offset": offset,
            "runs": [r.model_dump(mode="json") for r in page.items],
            "next_cursor": page.next_cursor,
            "prev_cursor": page.prev_cursor,
        }
    )


@router.get("/runs/{run_id}", tags=["runs"])
def get_run(run_id: RunId, service: ServiceDep) -> JSONResponse:
    """A stored run: its summary, pass rate, mean score and its worst rows."""
    run = service.get_run(run_id)
    worst = service.run_worst(run_id, 10)
    return JSONResponse(
        {**run.model_dump(mode="json"), "worst": [r.model_dump(mode="json") for r in worst]}
    )


@router.delete("/runs/{run_id}", response_model=RunOut, tags=["runs"])
def delete_run(run_id: RunId, service: ServiceDep) -> JSONResponse:
    """Delete a run and its rows (409 while it is still being stored)."""
    return json_reply(service.delete_run(run_id))
