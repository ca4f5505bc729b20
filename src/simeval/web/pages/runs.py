"""Data-set run pages: the stored runs, newest first, and one run with its worst cases, its
results and "compare with…" another run."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from simeval.web.pages._render import PER_PAGE, render, service_of
from simeval.web.schema import IntParam

router = APIRouter(include_in_schema=False)


@router.get("/runs")
def runs_page(request: Request, page: IntParam = 1, cursor: str | None = None) -> Response:
    """Stored data-set runs, newest first, pages of 50 (Older/Newer by cursor; ``page=N``
    still reads a shallow page by offset)."""
    service = service_of(request)
    page = max(page, 1)
    offset = 0 if cursor else (page - 1) * PER_PAGE
    found = service.page_runs(limit=PER_PAGE, offset=offset, cursor=cursor or None)
    total = service.count_runs()
    return render(
        request,
        "runs.html",
        {
            "items": found.items,
            "total": total,
            "older": found.next_cursor,
            "newer": found.prev_cursor,
        },
    )


@router.get("/runs/{run_id}")
def run_page(
    request: Request, run_id: IntParam, page: IntParam = 1, cursor: str | None = None
) -> Response:
    """A stored run: summary, worst cases, its results (pages of 50, Older/Newer by cursor;
    ``page=N`` still reads a shallow page by offset), and "compare with…" another run."""
    service = service_of(request)
    run = service.get_run(run_id)
    page = max(page, 1)
    found = service.page_results(
        run_id=run_id,
        limit=PER_PAGE,
        offset=0 if cursor else (page - 1) * PER_PAGE,
        cursor=cursor or None,
        explain=False,
    )
    others = [r for r in service.list_runs(limit=50) if r.id != run_id]
    return render(
        request,
        "run.html",
        {
            "run": run,
            "worst": service.run_worst(run_id, 5),
            "results": found.items,
            "others": others,
            "older": found.next_cursor,
            "newer": found.prev_cursor,
        },
    )
