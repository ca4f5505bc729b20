"""The review queue page (``/review``): unreviewed results one at a time, borderline first,
then failing (``service.review_queue``), reviewed by keyboard; one-click pass/fail from the
results pages (``/results/{id}/verdict``); calibrating an eval on its reviews.

The reviewer's name is asked once and kept in a cookie (``simeval_reviewer``): the studio's
sessions are token logins and carry no name. Every review the studio stores carries it.
"""

from __future__ import annotations

import contextlib
from urllib.parse import quote, unquote, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import Response

from simeval.errors import NotFound, SimevalError
from simeval.jsontypes import JSONObject
from simeval.service import ResultFilter
from simeval.service.models import ResultOut
from simeval.service.results import MAX_REVIEWER_CHARS, check_reviewer
from simeval.service.review_queue import BORDERLINE_MARGIN, QUEUE_WINDOW
from simeval.web.pages._render import (
    error_page,
    eval_url,
    form_text,
    redirect,
    render,
    service_of,
    signed_in,
)
from simeval.web.pages.highlight import explained
from simeval.web.security import checked_form

router = APIRouter(include_in_schema=False)

REVIEWER_COOKIE = "simeval_reviewer"
_QUEUE_FIELDS = ("eval", "meta", "since", "after")  # the queue's place, kept across a review


def reviewer_of(request: Request) -> str | None:
    """The signed-in user (once users exist), else the reviewer's name this browser gave (its
    cookie), None when none was given."""
    user = signed_in(request)
    if user is not None:
        return user.name
    raw = request.cookies.get(REVIEWER_COOKIE)
    if not raw:
        return None
    try:
        return check_reviewer(unquote(raw))
    except SimevalError:
        return None  # a cookie this page did not write: ask again


def _local_path(value: str) -> str | None:
    """``value`` if it is a path on this site (where to go back to), else None."""
    if value.startswith("/") and not value.startswith("//") and "\\" not in value:
        return value
    return None


def _queue_filter(params: dict[str, str]) -> ResultFilter:
    """The queue's filter from the page's fields (metadata: ``engine=v2``, commas between)."""
    metas = [m for m in params.get("meta", "").split(",") if m.strip()] or None
    return ResultFilter.parse(
        eval_name=params.get("eval") or None, since=params.get("since") or None, meta=metas
    )


def _queue_url(params: dict[str, str], **changes: str) -> str:
    given = {k: v for k, v in {**params, **changes}.items() if k in _QUEUE_FIELDS and v}
    return "/review" + ("?" + urlencode(given) if given else "")


def _view(request: Request, result: ResultOut) -> dict[str, object]:
    """The explanation view of a result, with the options of the version that scored it."""
    options: JSONObject = {}
    if result.eval_id is not None and result.eval_version is not None:
        with contextlib.suppress(NotFound):
            for v in service_of(request).eval_versions(result.eval_id):
                if v.version == result.eval_version:
                    options = v.options
    return explained(result.explanation, result.output, result.matched_reference, options)


def _queue_page(
    request: Request, params: dict[str, str], error: str | None = None, status: int = 200
) -> Response:
    service = service_of(request)
    context: dict[str, object] = {
        "f": {k: params.get(k, "") for k in _QUEUE_FIELDS},
        "evals": service.list_evals(include_archived=True),
        "reviewer": reviewer_of(request),
        "rename": params.get("rename") == "1",
        "error": error,
        "margin": BORDERLINE_MARGIN,
        "window": QUEUE_WINDOW,
        "max_name": MAX_REVIEWER_CHARS,
        "here": _queue_url(params),
        "restart": _queue_url(params, after=""),
    }
    try:
        step = service.review_queue_next(_queue_filter(params), after=params.get("after") or None)
    except NotFound as exc:  # an eval filter naming no eval: said on the page
        context.update(q=None, error=str(exc))
        return render(request, "review.html", context, status=404)
    except SimevalError as exc:
        context.update(q=None, error=str(exc))
        return render(request, "review.html", context, status=exc.status_code)
    context["q"] = step
    if step.item is not None:
        context["r"] = step.item
        context["view"] = _view(request, step.item)
        context["skip"] = _queue_url(params, after=step.cursor or "")
    return render(request, "review.html", context, status=status)


@router.get("/review")
def review_queue(request: Request) -> Response:
    """The review queue: one result, its explanation, and the keys to review it."""
    return _queue_page(request, dict(request.query_params))


@router.post("/review/name")
async def set_reviewer(request: Request) -> Response:
    """Keep the reviewer's name in a cookie (for a year) and go back to the queue."""
    form = await checked_form(request)
    back = _local_path(form_text(form, "back")) or "/review"
    try:
        name = check_reviewer(form_text(form, "reviewer"))
    except SimevalError as exc:
        return error_page(request, exc.status_code, str(exc))
    if name is None:
        return error_page(request, 400, "give your name: it is kept with each review")
    response = redirect(back, "reviewer")
    response.set_cookie(
        REVIEWER_COOKIE,
        quote(name, safe=""),
        max_age=365 * 86400,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
    )
    return response


@router.get("/review/calibrate")
def calibrate_page(request: Request, eval: str = "") -> Response:
    """The threshold an eval's reviews suggest (``calibrate``), with a button to apply it."""
    service = service_of(request)
    if not eval:
        return error_page(request, 400, "name the eval to calibrate: /review/calibrate?eval=NAME")
    ev = service.get_eval(eval)
    report, error = None, None
    try:
        report = service.calibrate_eval(ev.name)
    except SimevalError as exc:
        error = str(exc)
    return render(request, "calibrate.html", {"ev": ev, "report": report, "error": error})


@router.post("/review/calibrate")
async def calibrate_apply(request: Request) -> Response:
    """Write the threshold the eval's reviews suggest to the eval (a new version)."""
    form = await checked_form(request)
    service = service_of(request)
    ev = service.get_eval(form_text(form, "eval"))
    try:
        service.calibrate_eval(ev.name, apply=True)
    except SimevalError as exc:
        return error_page(request, exc.status_code, str(exc))
    return redirect(eval_url(ev.name), "calibrated")


@router.post("/review/{result_id}")
async def review_from_queue(request: Request, result_id: str) -> Response:
    """Review the queue's result as a pass or fail (with the score and note given), then the
    queue's next result."""
    form = await checked_form(request)
    params = {k: form_text(form, k) for k in _QUEUE_FIELDS}
    reviewer = reviewer_of(request)
    if reviewer is None:
        return _queue_page(
            request, params, "give your name first: it is kept with each review", 400
        )
    verdict = form_text(form, "verdict")
    try:
        service_of(request).review_verdict(
            result_id,
            verdict,
            score=form_text(form, "score"),
            note=form_text(form, "note"),
            reviewer=reviewer,
        )
    except SimevalError as exc:
        return _queue_page(request, params, str(exc), exc.status_code)
    return redirect(_queue_url(params), "review-" + verdict)


@router.post("/results/{result_id}/verdict")
async def one_click_verdict(request: Request, result_id: str) -> Response:
    """One-click pass or fail from a results page (score: the threshold for a pass; for a
    fail the automated score, or just below the threshold), with this browser's reviewer."""
    form = await checked_form(request)
    back = _local_path(form_text(form, "back")) or f"/results/{quote(result_id, safe='')}"
    verdict = form_text(form, "verdict")
    try:
        service_of(request).review_verdict(result_id, verdict, reviewer=reviewer_of(request))
    except NotFound:
        raise
    except SimevalError as exc:
        return error_page(request, exc.status_code, str(exc))
    return redirect(back, "review-" + verdict)
