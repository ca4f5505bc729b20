"""Results: listing, export, one result, its review, and the comparison of two sides."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field

from simeval.checks import (
    MAX_DEEP_OFFSET,
)
from simeval.service.models import (
    CompareReport,
    ResultOut,
)
from simeval.web import schema as declared
from simeval.web.api.common import CursorParam, FilterDep, ResultId, ServiceDep, json_reply
from simeval.web.schema import UNIT, Body, StrictFloat

router = APIRouter(prefix="/api", responses=declared.ERRORS)


class ReviewIn(Body):
    """A human override of a result's score; it decides pass/fail from now on."""

    score: StrictFloat = Field(description="The reviewed score, in [0, 1].", json_schema_extra=UNIT)
    note: str = Field("", json_schema_extra=declared.NOTE)
    reviewer: str | None = Field(
        None,
        description="Who reviewed (kept with the review); left out or empty: not recorded.",
        json_schema_extra=declared.SHORT,
    )


class ResultPage(BaseModel):
    """A page of results, newest first."""

    total: int
    limit: int
    offset: int
    results: list[ResultOut]
    next_cursor: str | None = Field(description="The next (older) page's cursor; null at the end.")
    prev_cursor: str | None = Field(description="The previous (newer) page's; null on the first.")


@router.get("/results", response_model=ResultPage, tags=["results"])
def list_results(
    service: ServiceDep,
    where: FilterDep,
    limit: Annotated[int, Query(ge=1, le=1000), declared.DIGITS] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_DEEP_OFFSET), declared.DIGITS] = 0,
    cursor: CursorParam = None,
) -> JSONResponse:
    """Results, newest first, filtered by eval, pass/fail, time range, review or run; page
    on with ``cursor=`` the answer's ``next_cursor`` (a deep ``offset`` reads every row
    before it)."""
    page = service.page_results(where, limit=limit, offset=offset, cursor=cursor)
    total = service.count_results(where)
    return JSONResponse(
        {
            "total": total,
            "limit": limit,
            "offset": offset,
            "results": [r.model_dump(mode="json") for r in page.items],
            "next_cursor": page.next_cursor,
            "prev_cursor": page.prev_cursor,
        }
    )


@router.get(
    "/results/export",
    tags=["results"],
    responses={200: {"content": {"text/csv": {}, "application/json": {}}}},
)
def export_results(
    service: ServiceDep,
    where: FilterDep,
    format: Literal["csv", "json"] = "csv",
) -> Response:
    """Download the filtered results as CSV or JSON (a JSON array), oldest first, streamed:
    the server holds a piece of the answer at a time, however many results match."""
    # checked before the answer starts (an unknown eval is a 404, not a cut-off stream)
    pieces = service.iter_export(fmt=format, where=where)
    media = "text/csv; charset=utf-8" if format == "csv" else "application/json"
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    name = f"simeval-results-{stamp}.{format}"
    return StreamingResponse(
        pieces, media_type=media, headers={"Content-Disposition": f'attachment; filename="{name}"'}
    )


@router.get("/results/{result_id}", response_model=ResultOut, tags=["results"])
def get_result(result_id: ResultId, service: ServiceDep) -> JSONResponse:
    """One result with its explanation and review."""
    return json_reply(service.get_result(result_id))


@router.post("/results/{result_id}/review", response_model=ResultOut, tags=["results"])
def review_result(result_id: ResultId, body: ReviewIn, service: ServiceDep) -> JSONResponse:
    """Override a result's score; the review decides pass/fail from now on."""
    return json_reply(service.review_result(result_id, body.score, body.note, body.reviewer))


@router.get("/compare", response_model=CompareReport, tags=["results"])
def compare(
    service: ServiceDep,
    a: Annotated[str, declared.side("run:ID, run:latest or captures:KEY=VALUE,...")],
    b: Annotated[str, declared.side("The side compared with A (same forms).")],
    eval: Annotated[str | None, Query(description="Only this eval.")] = None,
    seed: Annotated[int, Query(ge=0), declared.DIGITS] = 0,
    resamples: Annotated[int, Query(ge=100, le=20_000), declared.DIGITS] = 2000,
    top: Annotated[int, Query(ge=0, le=1000), declared.DIGITS] = 20,
) -> JSONResponse:
    """Compare side B with side A per eval: n, pass rate and mean score, B − A with 95%
    bootstrap intervals (paired on case id or input, McNemar on flips), a verdict, and the
    most regressed cases with their missing terms."""
    return json_reply(
        service.compare(a, b, eval_name=eval, seed=seed, resamples=resamples, keep=top)
    )
