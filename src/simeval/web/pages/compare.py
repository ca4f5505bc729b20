"""Compare (A/B): two stored runs, or captured results selected by eval, time and metadata."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from simeval.errors import SimevalError
from simeval.web.pages._render import render, service_of

router = APIRouter(include_in_schema=False)


@router.get("/compare")
def compare_page(
    request: Request,
    a: str | None = None,
    b: str | None = None,
    eval: str | None = None,
) -> Response:
    """Compare two sides: stored runs or captured results selected by eval, time and metadata."""
    service = service_of(request)
    report, error, status = None, None, 200
    if a and b:
        try:
            report = service.compare(a, b, eval_name=eval or None, keep=20)
        except SimevalError as exc:
            error, status = str(exc), exc.status_code
    elif a or b:
        error, status = "give both sides, A and B", 400
    return render(
        request,
        "compare.html",
        {
            "f": {"a": a or "", "b": b or "", "eval": eval or ""},
            "report": report,
            "error": error,
            "runs": service.list_runs(limit=20),
            "evals": service.list_evals(include_archived=True),
        },
        status=status,
    )
