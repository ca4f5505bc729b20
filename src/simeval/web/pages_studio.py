"""Eval Studio pages beyond the seed flow: Compare (A/B), Conversations, Runs, a capture's
page, and an eval's Backtest and Rescore. The same service calls as the API and the CLI."""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import Response

from simeval.errors import SimevalError
from simeval.web.pages import _eval_page, _eval_url, _redirect, _service, render
from simeval.web.security import checked_form

router = APIRouter(include_in_schema=False)
PER_PAGE = 50


def _bars(histogram: list[int]) -> list[dict[str, Any]]:
    """A histogram as bars for the template: height in % of the tallest, and its range."""
    top = max([1, *histogram])
    width = 1 / len(histogram) if histogram else 1
    return [
        {
            "count": n,
            "height": round(100 * n / top, 1),
            "lo": i * width,
            "hi": (i + 1) * width,
        }
        for i, n in enumerate(histogram)
    ]


# -- compare -----------------------------------------------------------------------------------
@router.get("/compare")
def compare_page(
    request: Request,
    a: str | None = None,
    b: str | None = None,
    eval: str | None = None,
) -> Response:
    """Compare two sides: stored runs or captured results selected by eval, time and metadata."""
    service = _service(request)
    report, error, status = None, None, 200
    if a and b:
        try:
            report = service.compare(a, b, eval_name=eval or None, keep=20)
        except SimevalError as exc:
            error, status = str(exc), exc.status_code
    elif a or b:
        error, status = "give both sides, A and B", 400
    if report is not None:
        for e in report["evals"]:
            e["bars_a"] = _bars(e["a"]["histogram"])
            e["bars_b"] = _bars(e["b"]["histogram"])
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


# -- conversations -----------------------------------------------------------------------------
@router.get("/conversations")
def conversations_page(request: Request, page: int = 1) -> Response:
    """Conversations, most recently active first."""
    service = _service(request)
    page = max(page, 1)
    items = service.list_conversations(limit=PER_PAGE, offset=(page - 1) * PER_PAGE)
    total = service.count_conversations()
    return render(
        request,
        "conversations.html",
        {
            "items": items,
            "total": total,
            "page": page,
            "pages": max(1, math.ceil(total / PER_PAGE)),
        },
    )


@router.get("/conversations/{conversation_id}")
def conversation_page(request: Request, conversation_id: str) -> Response:
    """A conversation's turns in order with each eval's verdict."""
    conv = _service(request).get_conversation(conversation_id)
    return render(request, "conversation.html", {"conv": conv})


# -- captures ----------------------------------------------------------------------------------
@router.get("/captures/{capture_id}")
def capture_page(request: Request, capture_id: int) -> Response:
    """One capture: its input, output, conversation, metadata and results."""
    cap = _service(request).get_capture(capture_id)
    return render(request, "capture.html", {"cap": cap})


# -- runs --------------------------------------------------------------------------------------
@router.get("/runs")
def runs_page(request: Request, page: int = 1) -> Response:
    """Stored data-set runs, newest first."""
    service = _service(request)
    page = max(page, 1)
    items = service.list_runs(limit=PER_PAGE, offset=(page - 1) * PER_PAGE)
    total = service.count_runs()
    return render(
        request,
        "runs.html",
        {
            "items": items,
            "total": total,
            "page": page,
            "pages": max(1, math.ceil(total / PER_PAGE)),
        },
    )


@router.get("/runs/{run_id}")
def run_page(request: Request, run_id: int, page: int = 1) -> Response:
    """A stored run: summary, worst cases, its results, and "compare with…" another run."""
    service = _service(request)
    run = service.get_run(run_id)
    page = max(page, 1)
    results = service.list_results(
        run_id=run_id, limit=PER_PAGE, offset=(page - 1) * PER_PAGE, explain=False
    )
    others = [r for r in service.list_runs(limit=50) if r.id != run_id]
    return render(
        request,
        "run.html",
        {
            "run": run,
            "worst": service.run_worst(run_id, 5),
            "results": results,
            "others": others,
            "page": page,
            "pages": max(1, math.ceil(run.results / PER_PAGE)),
        },
    )


# -- backtest and rescore ----------------------------------------------------------------------
@router.post("/evals/{name}/backtest")
async def backtest_eval(request: Request, name: str) -> Response:
    """Backtest the eval's current version on recent captures; shown on the eval's page."""
    form = await checked_form(request)
    service = _service(request)
    ev = service.get_eval(name)
    raw = str(form.get("limit") or "500").strip()
    try:
        limit = int(raw) if raw.isdigit() else -1
        if not 1 <= limit <= 10_000:
            raise SimevalError(f"backtest: give a number of captures from 1 to 10000, not {raw!r}")
        report = service.backtest_eval(ev.name, limit=limit)
    except SimevalError as exc:
        return _eval_page(request, ev, backtest_error=str(exc), status=400)
    report["bars"] = _bars(report["histogram"])
    return _eval_page(request, ev, backtest=report)


@router.post("/evals/{name}/rescore")
async def rescore_eval(request: Request, name: str) -> Response:
    """Score the last 7 days of captures this eval has not scored, and store the results."""
    await checked_form(request)
    service = _service(request)
    ev = service.get_eval(name)
    try:
        service.rescore(ev.name, since="7d")
    except SimevalError as exc:
        return _eval_page(request, ev, error=str(exc), status=exc.status_code)
    return _redirect(_eval_url(ev.name), "rescored")


def compare_url(a: str, b: str) -> str:
    return "/compare?" + urlencode({"a": a, "b": b})
