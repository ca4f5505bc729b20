"""Eval pages: the list (and an example on an empty store), creating an eval, and one eval's
page with its editable definition, the inline tester, activation, backtest and rescore.

The flow follows the seed page: ``+ New`` -> the "Similarity" type card -> name, reference
answers, threshold (with its strictness band) -> the inline tester (Run Test) -> Activate.
Every form carries a CSRF token (``simeval.web.security``).
"""

from __future__ import annotations

from typing import Any, TypedDict

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.datastructures import FormData

from simeval.errors import Conflict, InvalidInput, NotFound, SimevalError
from simeval.jsontypes import JSONObject
from simeval.scoring.options import band
from simeval.scoring.scorer import resolve_options
from simeval.service import Service
from simeval.service.models import BacktestReport, EvalOut
from simeval.service.user_models import AuditEntryOut
from simeval.web.access import ADMIN, can
from simeval.web.idf_files import idf_option
from simeval.web.pages._render import eval_url, form_text, redirect, render, service_of, signed_in
from simeval.web.pages.eval_form import definition, form_context, form_values
from simeval.web.pages.highlight import explained
from simeval.web.security import checked_form

router = APIRouter(include_in_schema=False)


class _Example(TypedDict):
    name: str
    references: list[str]
    threshold: float
    input: str
    output: str


EXAMPLE: _Example = {
    "name": "capital-of-france",
    "references": ["Paris is the capital of France and its largest city."],
    "threshold": 0.80,
    "input": "What is the capital of France?",
    "output": "The capital of France is Paris, which is also its largest city.",
}


# -- the eval list and the empty-database offer --------------------------------------------
@router.get("/")
def eval_list(request: Request, archived: bool = False) -> Response:
    """The eval list with status and pass rate, ``+ New``, and an example on an empty store."""
    every = service_of(request).list_evals(include_archived=True)
    evals = every if archived else [e for e in every if e.status != "archived"]
    has_archived = archived or any(e.status == "archived" for e in every)
    return render(
        request,
        "evals.html",
        {"evals": evals, "archived": archived, "has_archived": has_archived},
    )


@router.post("/examples")
async def create_example(request: Request) -> Response:
    """Create, and test, an example eval so a newcomer sees the whole flow at once."""
    await checked_form(request)
    service = service_of(request)
    try:
        service.create_eval(EXAMPLE["name"], EXAMPLE["references"], threshold=EXAMPLE["threshold"])
        service.test_eval(EXAMPLE["name"], EXAMPLE["input"], EXAMPLE["output"])
    except Conflict:
        return redirect(eval_url(str(EXAMPLE["name"])))
    return redirect(eval_url(str(EXAMPLE["name"])), "example", "#tester")


# -- creating an eval ----------------------------------------------------------------------
@router.get("/evals/new")
def new_eval_types(request: Request) -> Response:
    """Step 2 of the seed flow: pick the eval type (one card: Similarity)."""
    return render(request, "new_type.html", {})


@router.get("/evals/new/similarity")
def new_eval_form(request: Request) -> Response:
    """The similarity eval form: name, reference answers, threshold, scope, scorer options."""
    return render(request, "new_eval.html", form_context(form_values(None)))


@router.post("/evals")
async def create_eval(request: Request) -> Response:
    """Create the eval (a draft) and go to its page with the inline tester."""
    form = await checked_form(request)
    service = service_of(request)
    try:
        d = definition(form)
        ev = service.create_eval(
            d["name"],
            d["references"],
            threshold=d["threshold"],
            input_scope=d["input_scope"],
            options=idf_option(request.app.state.idf_dir, d["options"]),
        )
    except SimevalError as exc:
        ctx = form_context(form_values(form))
        ctx["error"] = str(exc)
        return render(request, "new_eval.html", ctx, status=exc.status_code)
    return redirect(eval_url(ev.name), "created", "#tester")


# -- one eval: definition, tester, activation ------------------------------------------------
def _eval_page(
    request: Request,
    ev: EvalOut,
    *,
    form: FormData | None = None,
    error: str | None = None,
    test_error: str | None = None,
    sample: dict[str, str] | None = None,
    status: int = 200,
    backtest: BacktestReport | None = None,
    backtest_error: str | None = None,
) -> Response:
    service = service_of(request)
    test = ev.last_test
    test_view = None
    if test is not None:
        test_view = explained(
            test.explanation,
            test.output,
            (test.explanation or {}).get("reference"),
            ev.options,
        )
    if sample is None:
        sample = (
            {"input": test.input, "output": test.output} if test else {"input": "", "output": ""}
        )
    versions = service.eval_versions(ev.name)
    recent = service.list_results(eval_name=ev.name, limit=10, explain=False)
    ctx = form_context(form_values(form, ev))
    ctx.update(
        ev=ev,
        test=test,
        test_view=test_view,
        test_outdated=test is not None and test.version != ev.version,
        sample=sample,
        versions=list(reversed(versions)),
        recent=recent,
        error=error,
        test_error=test_error,
        band=band(ev.threshold),
        backtest=backtest,
        backtest_error=backtest_error,
        synonym_suggestions=service.synonym_suggestions(ev.id),
        reviews=service.count_results(eval_name=ev.name, reviewed=True),
        unscored=_unscored(service, ev),
        activity=_activity(request, service, ev.name),
    )
    return render(request, "eval.html", ctx, status=status)


def _activity(request: Request, service: Service, name: str) -> list[AuditEntryOut] | None:
    """The eval's latest audit entries, for those who may read the audit log (admins; all in
    local mode); None for the others."""
    user = signed_in(request)
    if user is not None and not can(user.role, ADMIN):
        return None
    return service.audit_log(target=f"eval:{name}", limit=10).entries


def _unscored(service: Service, ev: EvalOut) -> int:
    """What the Rescore button offers: the captures of the last 7 days rescore would store a
    result for. Without a scope (and no pending version, whose scope may differ) that is
    every capture less those scored, two counts; else the captures in scope are read."""
    if ev.status != "active":
        return 0
    if ev.input_scope is None and ev.pending_version is None:
        captures = service.count_captures(since="7d")
        return max(0, captures - service.count_results(eval_name=ev.name, since="7d"))
    return service.count_unscored(ev.name, since="7d")


@router.get("/evals/{name:path}")
def eval_page(request: Request, name: str) -> Response:
    """An eval: its definition (editable), the inline tester, Activate and its versions."""
    return _eval_page(request, service_of(request).get_eval(name))


@router.post("/evals/{name:path}/edit")
async def edit_eval(request: Request, name: str) -> Response:
    """Save the definition; a change makes a new version (which needs a new passing test)."""
    form = await checked_form(request)
    service = service_of(request)
    ev = service.get_eval(name)
    try:
        d = definition(form)
        options = d["options"]
        if options is not None and options.get("idf") != ev.options.get("idf"):
            options = idf_option(request.app.state.idf_dir, options)
        if options is not None and _same_options(options, ev.options):
            options = None
        kwargs: dict[str, Any] = {
            "new_name": d["name"] if d["name"] and d["name"] != ev.name else None,
            "references": d["references"] if d["references"] != list(ev.references) else None,
            "threshold": d["threshold"] if d["threshold"] != ev.threshold else None,
            "options": options,
        }
        if d["input_scope"] != ev.input_scope:
            kwargs["input_scope"] = d["input_scope"]
        if not d["references"]:
            raise InvalidInput("give at least one reference answer")
        if not any(v is not None for v in kwargs.values()) and "input_scope" not in kwargs:
            return redirect(eval_url(ev.name), "unchanged")
        new = service.edit_eval(ev.name, **kwargs)
    except SimevalError as exc:
        return _eval_page(request, ev, form=form, error=str(exc), status=exc.status_code)
    return redirect(eval_url(new.name), "saved")


@router.post("/evals/{name:path}/synonyms")
async def add_synonyms(request: Request, name: str) -> Response:
    """Accept a suggested synonym pair: it joins the eval's synonyms (a new version)."""
    form = await checked_form(request)
    service = service_of(request)
    ev = service.get_eval(name)
    words = [w for w in form.getlist("words") if isinstance(w, str)]
    try:
        new = service.add_synonyms(ev.id, words)
    except SimevalError as exc:
        return _eval_page(request, ev, error=str(exc), status=exc.status_code)
    return redirect(eval_url(new.name), "saved")


def _same_options(new: JSONObject, old: JSONObject) -> bool:
    try:
        return resolve_options(new) == resolve_options(old)
    except (SimevalError, OSError):
        return False


@router.post("/evals/{name:path}/test")
async def test_eval(request: Request, name: str) -> Response:
    """Run Test: score the sample output, record the test, show the explanation."""
    form = await checked_form(request)
    service = service_of(request)
    sample = {"input": form_text(form, "input"), "output": form_text(form, "output")}
    try:
        scope = service.get_eval(name).input_scope
        if scope is not None and not sample["input"].strip():
            # as `simeval evals test` does: a scoped eval is tried on an input of its scope
            raise InvalidInput(
                f"this eval scores only the input {scope!r}: give it as the sample input"
            )
        test = service.test_eval(name, sample["input"], sample["output"])
    except NotFound:
        raise
    except SimevalError as exc:
        ev = service.get_eval(name)
        return _eval_page(request, ev, test_error=str(exc), sample=sample, status=exc.status_code)
    return redirect(eval_url(name), "tested" if test.passed else "tested-fail", "#tester")


async def _status_action(request: Request, name: str, action: str) -> Response:
    await checked_form(request)
    service = service_of(request)
    method = {
        "activate": service.activate_eval,
        "deactivate": service.deactivate_eval,
        "archive": service.archive_eval,
    }[action]
    try:
        ev = method(name)
    except Conflict as exc:
        return _eval_page(request, service.get_eval(name), error=str(exc), status=409)
    return redirect(eval_url(ev.name), action + "d")


@router.post("/evals/{name:path}/activate")
async def activate_eval(request: Request, name: str) -> Response:
    """Activate (refused unless a test of the current version passed)."""
    return await _status_action(request, name, "activate")


@router.post("/evals/{name:path}/deactivate")
async def deactivate_eval(request: Request, name: str) -> Response:
    """Deactivate: back to draft."""
    return await _status_action(request, name, "deactivate")


@router.post("/evals/{name:path}/archive")
async def archive_eval(request: Request, name: str) -> Response:
    """Archive: hidden, not scoring, results kept."""
    return await _status_action(request, name, "archive")


# -- backtest and rescore ----------------------------------------------------------------------
@router.post("/evals/{name}/backtest")
async def backtest_eval(request: Request, name: str) -> Response:
    """Backtest the eval's current version on recent captures; shown on the eval's page."""
    form = await checked_form(request)
    service = service_of(request)
    ev = service.get_eval(name)
    raw = str(form.get("limit") or "500").strip()
    try:
        limit = int(raw) if raw.isdigit() else -1
        if not 1 <= limit <= 10_000:
            raise SimevalError(f"backtest: give a number of captures from 1 to 10000, not {raw!r}")
        report = service.backtest_eval(ev.name, limit=limit)
    except SimevalError as exc:
        return _eval_page(request, ev, backtest_error=str(exc), status=400)
    return _eval_page(request, ev, backtest=report)


@router.post("/evals/{name}/rescore")
async def rescore_eval(request: Request, name: str) -> Response:
    """Score the last 7 days of captures this eval has not scored, and store the results."""
    await checked_form(request)
    service = service_of(request)
    ev = service.get_eval(name)
    try:
        service.rescore(ev.name, since="7d")
    except SimevalError as exc:
        return _eval_page(request, ev, error=str(exc), status=exc.status_code)
    return redirect(eval_url(ev.name), "rescored")
