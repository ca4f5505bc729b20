"""Result pages: the filtered list with its export links, one result with its highlighted
explanation and the review form, and one capture with its results."""

from __future__ import annotations

import contextlib
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import Response

from simeval.errors import NotFound, SimevalError
from simeval.jsontypes import JSONObject
from simeval.scoring.options import FAIL_WORDS, PASS_WORDS, check_unit, yes_no
from simeval.service import ResultFilter
from simeval.service.models import ResultOut
from simeval.web.pages._render import (
    PER_PAGE,
    form_text,
    redirect,
    render,
    service_of,
)
from simeval.web.pages.datasets import dataset_names
from simeval.web.pages.highlight import explained
from simeval.web.pages.review import reviewer_of
from simeval.web.schema import IntParam
from simeval.web.security import checked_form

router = APIRouter(include_in_schema=False)


def _bool_param(value: str | None) -> bool | None:
    return yes_no(value, PASS_WORDS, FAIL_WORDS)


@router.get("/results")
def results_page(
    request: Request,
    eval: str | None = None,
    outcome: str | None = None,
    reviewed: str | None = None,
    since: str | None = None,
    until: str | None = None,
    meta: str | None = None,
    page: IntParam = 1,
    cursor: str | None = None,
) -> Response:
    """Results with filters (metadata too: ``engine=v2``, several separated by commas),
    pages of 50 (Older/Newer by cursor; ``page=N`` still reads a shallow page by offset),
    and the export buttons."""
    service = service_of(request)
    metas = [m for m in (meta or "").split(",") if m.strip()] or None
    page = max(page, 1)
    error, status = None, 200
    older = newer = None
    try:
        where = ResultFilter.parse(
            eval_name=eval or None,
            passed=_bool_param(outcome),
            reviewed=_bool_param(reviewed),
            # ISO times or ages like 7d, read (and refused with a 400) by the filter
            since=since or None,
            until=until or None,
            meta=metas,
        )
        found = service.page_results(
            where,
            limit=PER_PAGE,
            offset=0 if cursor else (page - 1) * PER_PAGE,
            cursor=cursor or None,
            explain=False,
        )
        items, older, newer = found.items, found.next_cursor, found.prev_cursor
        total = service.count_results(where)
    except SimevalError as exc:
        # shown above the filters as typed, to correct them (as Compare shows its errors)
        error, status = str(exc), exc.status_code
        where, items, total = ResultFilter.parse(), [], 0
    given = {
        "eval": eval or "",
        "outcome": outcome or "",
        "reviewed": reviewed or "",
        "since": since or "",
        "until": until or "",
        "meta": meta or "",
    }
    export_query = _export_query(where, eval=eval, since=since, until=until, meta=metas)
    return render(
        request,
        "results.html",
        {
            "items": items,
            "total": total,
            "older": older,
            "newer": newer,
            "here_query": urlencode(
                {k: v for k, v in {**given, "cursor": cursor or "", "page": page}.items() if v}
            ),
            "evals": service.list_evals(include_archived=True),
            "f": given,
            "export_csv": "/api/results/export?"
            + urlencode({**export_query, "format": "csv"}, doseq=True),
            "export_json": "/api/results/export?"
            + urlencode({**export_query, "format": "json"}, doseq=True),
            "page_query": urlencode({k: v for k, v in given.items() if v}),
            "dataset_names": dataset_names(request),
            "error": error,
        },
        status=status,
    )


def _export_query(
    where: ResultFilter,
    *,
    eval: str | None,
    since: str | None,
    until: str | None,
    meta: list[str] | None,
) -> dict[str, object]:
    """The page's filters in the API's words (``passed=true``, ``meta`` repeated), the
    times and metadata as the user typed them."""
    query = {
        k: v
        for k, v in {
            "eval": eval,
            "passed": where.passed,
            "reviewed": where.reviewed,
            "since": since,
            "until": until,
        }.items()
        if v not in (None, "")
    }
    out: dict[str, object] = {
        k: (str(v).lower() if isinstance(v, bool) else v) for k, v in query.items()
    }
    if meta:
        out["meta"] = meta
    return out


def _result_page(
    request: Request, result: ResultOut, error: str | None = None, status: int = 200
) -> Response:
    service = service_of(request)
    options: JSONObject = {}
    if result.eval_name and result.eval_version is not None and result.eval_id is not None:
        # the options of the version that scored it, not the eval's current ones
        with contextlib.suppress(NotFound):
            for v in service.eval_versions(result.eval_id):
                if v.version == result.eval_version:
                    options = v.options
    full = request.query_params.get("full") == "1"
    view = explained(result.explanation, result.output, result.matched_reference, options, full)
    return render(
        request,
        "result.html",
        {"r": result, "view": view, "error": error, "full": full},
        status=status,
    )


@router.get("/results/{result_id}")
def result_page(request: Request, result_id: str) -> Response:
    """One result: scores, explanation with highlighted terms, and the review form."""
    return _result_page(request, service_of(request).get_result(result_id))


@router.post("/results/{result_id}/review")
async def review_result(request: Request, result_id: str) -> Response:
    """Save a review: the reviewed score decides pass/fail from now on."""
    form = await checked_form(request)
    service = service_of(request)
    raw = form_text(form, "score").strip()
    try:
        service.review_result(
            result_id,
            check_unit(raw, "review score"),
            form_text(form, "note"),
            reviewer_of(request),
        )
    except NotFound:
        raise
    except SimevalError as exc:
        return _result_page(request, service.get_result(result_id), str(exc), exc.status_code)
    return redirect(f"/results/{result_id}", "reviewed")


@router.get("/captures/{capture_id}")
def capture_page(request: Request, capture_id: IntParam) -> Response:
    """One capture: its input, output, conversation, metadata and results."""
    cap = service_of(request).get_capture(capture_id)
    return render(request, "capture.html", {"cap": cap})
