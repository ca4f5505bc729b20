"""Eval Studio: server-rendered pages over the same service functions as the API and the CLI.

The flow follows the seed page: ``+ New`` -> the "Similarity" type card -> name, reference
answers, threshold (with its strictness band) -> the inline tester (Run Test) -> Activate, then
the dashboard with recent captures, per-eval health charts, result detail with review, export
and settings. Every form carries a CSRF token (``simeval.web.security``); every user text goes
through Jinja2's autoescaping.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup, escape
from starlette.datastructures import FormData

from simeval import __version__
from simeval.errors import Conflict, InvalidInput, InvalidOption, NotFound, SimevalError
from simeval.scoring.analyzer import LANGUAGES, TOKEN_PATTERN, Analyzer, normalize
from simeval.scoring.options import (
    DEFAULT_THRESHOLD,
    DEFAULTS,
    FAIL_WORDS,
    OPTION_HELP,
    PASS_WORDS,
    RETENTION_CHOICES,
    STRICTNESS_BANDS,
    analyzer_from_options,
    band,
    check_threshold,
    check_unit,
    yes_no,
)
from simeval.scoring.scorer import resolve_options as _resolve_options
from simeval.service import Service
from simeval.service.models import EvalOut, ResultOut
from simeval.store import describe_url
from simeval.web import charts
from simeval.web.idf_files import idf_option
from simeval.web.security import (
    CSRF_FIELD,
    SESSION_COOKIE,
    checked_form,
    csrf_token,
    secret_matches,
    session_cookie_header,
    set_csrf_cookie,
)

router = APIRouter(include_in_schema=False)

# Fixed success messages shown after a redirect (never text taken from the URL).
NOTICES = {
    "created": "Eval created as a draft. Run a test, then activate it.",
    "saved": "Saved. A changed eval gets a new version, which needs a passing test "
    "(an active eval keeps scoring with its active version until you activate the new one).",
    "unchanged": "Nothing changed.",
    "tested": "Test recorded.",
    "activated": "Activated: every matching capture is now scored by this version.",
    "deactivated": "Deactivated: the eval is a draft again and scores nothing.",
    "archived": "Archived: hidden and not scoring; its results are kept.",
    "reviewed": "Review saved: it now decides pass/fail for this result.",
    "settings": "Settings saved.",
    "cleanup": "Cleanup done.",
    "example": "Example eval created and tested: click Activate, then post a capture.",
    "rescored": "Rescore done: past captures of the last 7 days without this eval's result "
    "are scored now.",
    "switched": "Switched over: the new version scores every matching capture from now on.",
}

EXAMPLE: dict[str, Any] = {
    "name": "capital-of-france",
    "references": ["Paris is the capital of France and its largest city."],
    "threshold": 0.80,
    "input": "What is the capital of France?",
    "output": "The capital of France is Paris, which is also its largest city.",
}


def _fmt_time(value: datetime | None) -> str:
    if value is None:
        return ""
    return value.strftime("%Y-%m-%d %H:%M:%S")


def _fmt_score(value: float | None) -> str:
    return (
        "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"
    )


def _fmt_pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.0f}%"


LIST_CHARS = 300  # list pages show this much of a text


def cut_text(value: Any, n: int = LIST_CHARS) -> str:
    """The first ``n`` characters of a text, with "…" when there is more (list pages: a
    900,000-character output must not be embedded whole)."""
    text = "" if value is None else str(value)
    return text if len(text) <= n else text[: n - 1] + "…"


def _env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(Path(__file__).parent / "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        time=_fmt_time,
        cut=cut_text,
        score=_fmt_score,
        pct=_fmt_pct,
        q=lambda s: quote(str(s), safe=""),
        band=band,
    )
    env.globals.update(version=__version__, bands=STRICTNESS_BANDS, CSRF_FIELD=CSRF_FIELD)
    return env


templates = Jinja2Templates(env=_env())

# Pages need nothing from elsewhere; plotly injects <style> elements, hence 'unsafe-inline'
# for styles only.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; "
    "form-action 'self'"
)


def render(request: Request, name: str, context: dict[str, Any], status: int = 200) -> Response:
    """A page from a template, with the CSRF token, the notice and the security headers."""
    context = dict(context)
    context.setdefault("notice", NOTICES.get(request.query_params.get("done", "")))
    context["csrf"] = csrf_token(request)
    context["auth"] = bool(request.app.state.token)
    context["path"] = request.url.path
    response = templates.TemplateResponse(request, name, context, status_code=status)
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "same-origin"
    set_csrf_cookie(request, response)
    return response


def error_page(request: Request, status: int, message: str) -> Response:
    """An error as a page, with the one-line message (no traceback)."""
    titles = {
        400: "Bad request",
        401: "Sign in needed",
        403: "Refused",
        404: "Not found",
        409: "Not allowed now",
        413: "Too large",
        422: "Bad request",
    }
    return render(
        request,
        "error.html",
        {"status": status, "title": titles.get(status, "Error"), "message": message},
        status=status,
    )


def _service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


def _redirect(url: str, done: str | None = None, anchor: str = "") -> RedirectResponse:
    if done:
        url += ("&" if "?" in url else "?") + urlencode({"done": done})
    return RedirectResponse(url + anchor, status_code=303)


def _eval_url(name: str) -> str:
    return "/evals/" + quote(name, safe="")


# -- text highlighting for explanations ----------------------------------------------------
def _analyzer(options: dict[str, Any]) -> Analyzer | None:
    try:
        return analyzer_from_options(options)
    except (SimevalError, OSError):
        return None


def _keys(analyzer: Analyzer, terms: Iterable[dict[str, Any]]) -> set[str]:
    keys: set[str] = set()
    for item in terms:
        for token in str(item.get("term", "")).split():
            term = analyzer.term(token)
            if term:
                keys.add(term)
    return keys


def highlight(
    text: str, marks: Sequence[tuple[set[str], str]], analyzer: Analyzer | None
) -> Markup:
    """``text`` escaped, with the words whose term is in a set wrapped in ``<mark class=...>``."""
    if analyzer is None or not any(keys for keys, _ in marks):
        return escape(text)
    out: list[Markup] = []
    pos = 0
    for match in TOKEN_PATTERN.finditer(text):
        token = normalize(match.group())
        term = analyzer.term(token) if token else None
        for keys, cls in marks:
            if term in keys:
                out.append(escape(text[pos : match.start()]))
                out.append(Markup('<mark class="{}">{}</mark>').format(cls, match.group()))
                pos = match.end()
                break
    out.append(escape(text[pos:]))
    return Markup("").join(out)


HIGHLIGHT_CHARS = 20_000  # of a long output, the part highlighted and shown by default


def explained(
    explanation: dict[str, Any] | None,
    output: str,
    reference: str | None,
    options: dict[str, Any],
    full: bool = False,
) -> dict[str, Any]:
    """The output and reference with matched (green) and missing (red) terms highlighted.

    Of a long output only the first ``HIGHLIGHT_CHARS`` are highlighted and shown unless
    ``full``; then the whole text is shown, highlighted no further than that: a 1 MB output
    would otherwise make a page of several megabytes of marks."""
    explanation = explanation or {}
    cut = len(output) > HIGHLIGHT_CHARS
    head, rest = (output[:HIGHLIGHT_CHARS], output[HIGHLIGHT_CHARS:]) if cut else (output, "")
    analyzer = _analyzer(options)
    shared = _keys(analyzer, explanation.get("shared", [])) if analyzer else set()
    missing = _keys(analyzer, explanation.get("missing", [])) if analyzer else set()
    ref = reference if reference is not None else explanation.get("reference", "")
    shown = highlight(head, [(shared, "hit")], analyzer)
    if cut and full:
        shown = shown + escape(rest)
    return {
        "output": shown,
        "output_cut": cut and not full,
        "output_chars": len(output),
        "reference": highlight(ref or "", [(shared, "hit"), (missing, "miss")], analyzer),
        "shared": explanation.get("shared", []),
        "missing": explanation.get("missing", []),
        "extra": explanation.get("extra", []),
        "reason": explanation.get("reason"),
    }


# -- forms ---------------------------------------------------------------------------------
def _text(form: FormData, key: str) -> str:
    value = form.get(key)
    return value if isinstance(value, str) else ""


def _threshold(form: FormData) -> float:
    return check_threshold(_text(form, "threshold").strip())


def _int_option(form: FormData, key: str) -> int:
    raw = _text(form, key).strip()
    try:
        return int(raw)
    except ValueError:
        raise InvalidOption(f"option {key!r} must be a whole number, not {raw!r}") from None


def _options(form: FormData) -> dict[str, Any] | None:
    """Scorer options from the form's advanced section (only those that differ from defaults)."""
    if _text(form, "advanced") != "1":
        return None
    given: dict[str, Any] = {
        "language": _text(form, "language") or DEFAULTS["language"],
        "stemming": form.get("stemming") is not None,
        "prefix": _int_option(form, "prefix"),
        "stop_words": _int_option(form, "stop_words"),
        "ngram": _int_option(form, "ngram"),
        "sublinear_tf": form.get("sublinear_tf") is not None,
        "idf": _text(form, "idf").strip() or DEFAULTS["idf"],
    }
    return {k: v for k, v in given.items() if v != DEFAULTS[k]}


def _definition(form: FormData) -> dict[str, Any]:
    refs = [r for r in form.getlist("references") if isinstance(r, str) and r.strip()]
    return {
        "name": _text(form, "name").strip(),
        "references": refs,
        "threshold": _threshold(form),
        "input_scope": _text(form, "input_scope").strip() or None,
        "options": _options(form),
    }


def _form_values(form: FormData | None, ev: EvalOut | None = None) -> dict[str, Any]:
    """Values to refill the definition form with (after an error, or from the eval)."""
    if form is not None:
        options: dict[str, Any] = dict(DEFAULTS)
        if _text(form, "advanced") == "1":
            options.update(
                language=_text(form, "language") or DEFAULTS["language"],
                stemming=form.get("stemming") is not None,
                prefix=_text(form, "prefix"),
                stop_words=_text(form, "stop_words"),
                ngram=_text(form, "ngram"),
                sublinear_tf=form.get("sublinear_tf") is not None,
                idf=_text(form, "idf") or DEFAULTS["idf"],
            )
        refs = [r for r in form.getlist("references") if isinstance(r, str)]
        return {
            "name": _text(form, "name"),
            "references": [r for r in refs if r.strip()] or [""],
            "threshold": _text(form, "threshold") or f"{DEFAULT_THRESHOLD:.2f}",
            "input_scope": _text(form, "input_scope"),
            "options": options,
        }
    if ev is not None:
        return {
            "name": ev.name,
            "references": list(ev.references) or [""],
            "threshold": f"{ev.threshold:.2f}",
            "input_scope": ev.input_scope or "",
            "options": {**DEFAULTS, **{k: v for k, v in ev.options.items() if v is not None}},
        }
    return {
        "name": "",
        "references": [""],
        "threshold": f"{DEFAULT_THRESHOLD:.2f}",
        "input_scope": "",
        "options": dict(DEFAULTS),
    }


def _form_context(values: dict[str, Any]) -> dict[str, Any]:
    return {
        "values": values,
        "languages": sorted(LANGUAGES),
        "option_help": OPTION_HELP,
        "band_now": band(_safe_float(values["threshold"], DEFAULT_THRESHOLD)),
    }


def _safe_float(value: Any, default: float) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return default
    return out if 0.0 <= out <= 1.0 else default


# -- the eval list and the empty-database offer --------------------------------------------
@router.get("/")
def eval_list(request: Request, archived: bool = False) -> Response:
    """The eval list with status and pass rate, ``+ New``, and an example on an empty store."""
    every = _service(request).list_evals(include_archived=True)
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
    service = _service(request)
    try:
        service.create_eval(EXAMPLE["name"], EXAMPLE["references"], threshold=EXAMPLE["threshold"])
        service.test_eval(EXAMPLE["name"], EXAMPLE["input"], EXAMPLE["output"])
    except Conflict:
        return _redirect(_eval_url(str(EXAMPLE["name"])))
    return _redirect(_eval_url(str(EXAMPLE["name"])), "example", "#tester")


# -- creating an eval ----------------------------------------------------------------------
@router.get("/evals/new")
def new_eval_types(request: Request) -> Response:
    """Step 2 of the seed flow: pick the eval type (one card: Similarity)."""
    return render(request, "new_type.html", {})


@router.get("/evals/new/similarity")
def new_eval_form(request: Request) -> Response:
    """The similarity eval form: name, reference answers, threshold, scope, scorer options."""
    return render(request, "new_eval.html", _form_context(_form_values(None)))


@router.post("/evals")
async def create_eval(request: Request) -> Response:
    """Create the eval (a draft) and go to its page with the inline tester."""
    form = await checked_form(request)
    service = _service(request)
    try:
        d = _definition(form)
        ev = service.create_eval(
            d["name"],
            d["references"],
            threshold=d["threshold"],
            input_scope=d["input_scope"],
            options=idf_option(request.app.state.idf_dir, d["options"]),
        )
    except SimevalError as exc:
        ctx = _form_context(_form_values(form))
        ctx["error"] = str(exc)
        return render(request, "new_eval.html", ctx, status=exc.status_code)
    return _redirect(_eval_url(ev.name), "created", "#tester")


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
    backtest: dict[str, Any] | None = None,
    backtest_error: str | None = None,
) -> Response:
    service = _service(request)
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
    ctx = _form_context(_form_values(form, ev))
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
        unscored=service.count_captures(since="7d")
        - service.count_results(eval_name=ev.name, since="7d")
        if ev.status == "active"
        else 0,
    )
    return render(request, "eval.html", ctx, status=status)


@router.get("/evals/{name:path}")
def eval_page(request: Request, name: str) -> Response:
    """An eval: its definition (editable), the inline tester, Activate and its versions."""
    return _eval_page(request, _service(request).get_eval(name))


@router.post("/evals/{name:path}/edit")
async def edit_eval(request: Request, name: str) -> Response:
    """Save the definition; a change makes a new version (which needs a new passing test)."""
    form = await checked_form(request)
    service = _service(request)
    ev = service.get_eval(name)
    try:
        d = _definition(form)
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
            return _redirect(_eval_url(ev.name), "unchanged")
        new = service.edit_eval(ev.name, **kwargs)
    except SimevalError as exc:
        return _eval_page(request, ev, form=form, error=str(exc), status=exc.status_code)
    return _redirect(_eval_url(new.name), "saved")


def _same_options(new: dict[str, Any], old: dict[str, Any]) -> bool:
    try:
        return _resolve_options(new) == _resolve_options(old)
    except (SimevalError, OSError):
        return False


@router.post("/evals/{name:path}/test")
async def test_eval(request: Request, name: str) -> Response:
    """Run Test: score the sample output, record the test, show the explanation."""
    form = await checked_form(request)
    service = _service(request)
    sample = {"input": _text(form, "input"), "output": _text(form, "output")}
    try:
        service.test_eval(name, sample["input"], sample["output"])
    except NotFound:
        raise
    except SimevalError as exc:
        ev = service.get_eval(name)
        return _eval_page(request, ev, test_error=str(exc), sample=sample, status=exc.status_code)
    return _redirect(_eval_url(name), "tested", "#tester")


async def _status_action(request: Request, name: str, action: str) -> Response:
    await checked_form(request)
    service = _service(request)
    method = {
        "activate": service.activate_eval,
        "deactivate": service.deactivate_eval,
        "archive": service.archive_eval,
    }[action]
    try:
        ev = method(name)
    except Conflict as exc:
        return _eval_page(request, service.get_eval(name), error=str(exc), status=409)
    return _redirect(_eval_url(ev.name), action + "d")


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


# -- dashboard -------------------------------------------------------------------------------
@router.get("/dashboard")
def dashboard(request: Request, eval: str | None = None, bucket: str | None = None) -> Response:
    """Recent captures with pass/fail per eval, and one eval's health charts."""
    service = _service(request)
    evals = service.list_evals()
    total = service.count_results()
    passed = service.count_results(passed=True)
    # List views show no explanations: explain=False spares building a scorer per result.
    # captures, not results: one stored while automatic evaluation was off shows "not scored"
    recent = service.list_captures(limit=25)
    selected = None
    if eval:
        selected = service.get_eval(eval)
    elif evals:
        active = [e for e in evals if e.status == "active"]
        selected = (active or evals)[0]
    health: dict[str, Any] | None = None
    if selected is not None:
        if bucket not in ("hour", "day", "week"):
            trend = service.trend(selected.name, bucket="day")
            bucket = "day"
            if len(trend.buckets) <= 2:
                trend, bucket = service.trend(selected.name, bucket="hour"), "hour"
        else:
            trend = service.trend(selected.name, bucket=bucket)
        scores = [
            r.score
            for r in service.list_results(eval_name=selected.name, limit=5000, explain=False)
        ]
        count = service.count_results(eval_name=selected.name)
        health = {
            "trend": trend,
            "bucket": bucket,
            "count": count,
            "pass_count": service.count_results(eval_name=selected.name, passed=True),
            "scores": len(scores),
            "trend_json": charts.as_json(charts.trend_figure(trend)) if trend.buckets else None,
            "hist_json": charts.as_json(charts.histogram_figure(scores, selected.threshold))
            if scores
            else None,
        }
    return render(
        request,
        "dashboard.html",
        {
            "evals": evals,
            "active_count": sum(1 for e in evals if e.status == "active"),
            "total": total,
            "passed": passed,
            "recent": recent,
            "selected": selected,
            "health": health,
            "charts": health is not None,
        },
    )


# -- results -------------------------------------------------------------------------------
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
    page: int = 1,
) -> Response:
    """Results with filters (metadata too: ``engine=v2``, several separated by commas),
    pages of 50, and the export buttons."""
    service = _service(request)
    filters: dict[str, Any] = {
        "eval_name": eval or None,
        "passed": _bool_param(outcome),
        "reviewed": _bool_param(reviewed),
        # ISO times or ages like 7d, read (and refused with a 400) by the service
        "since": since or None,
        "until": until or None,
        "meta": [m for m in (meta or "").split(",") if m.strip()] or None,
    }
    per_page = 50
    page = max(page, 1)
    items = service.list_results(
        **filters, limit=per_page, offset=(page - 1) * per_page, explain=False
    )
    total = service.count_results(**filters)
    query = {
        k: v
        for k, v in {
            "eval": eval,
            "passed": filters["passed"],
            "reviewed": filters["reviewed"],
            "since": since,
            "until": until,
        }.items()
        if v not in (None, "")
    }
    export_query: dict[str, Any] = {
        k: (str(v).lower() if isinstance(v, bool) else v) for k, v in query.items()
    }
    if filters["meta"]:
        export_query["meta"] = filters["meta"]
    page_query = {
        k: v
        for k, v in {
            "eval": eval,
            "outcome": outcome,
            "reviewed": reviewed,
            "since": since,
            "until": until,
            "meta": meta,
        }.items()
        if v
    }
    return render(
        request,
        "results.html",
        {
            "items": items,
            "total": total,
            "page": page,
            "pages": max(1, math.ceil(total / per_page)),
            "evals": service.list_evals(include_archived=True),
            "f": {
                "eval": eval or "",
                "outcome": outcome or "",
                "reviewed": reviewed or "",
                "since": since or "",
                "until": until or "",
                "meta": meta or "",
            },
            "export_csv": "/api/results/export?"
            + urlencode({**export_query, "format": "csv"}, doseq=True),
            "export_json": "/api/results/export?"
            + urlencode({**export_query, "format": "json"}, doseq=True),
            "page_query": urlencode(page_query),
        },
    )


def _result_page(
    request: Request, result: ResultOut, error: str | None = None, status: int = 200
) -> Response:
    service = _service(request)
    options: dict[str, Any] = {}
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
    return _result_page(request, _service(request).get_result(result_id))


@router.post("/results/{result_id}/review")
async def review_result(request: Request, result_id: str) -> Response:
    """Save a review: the reviewed score decides pass/fail from now on."""
    form = await checked_form(request)
    service = _service(request)
    raw = _text(form, "score").strip()
    try:
        service.review_result(result_id, check_unit(raw, "review score"), _text(form, "note"))
    except NotFound:
        raise
    except SimevalError as exc:
        return _result_page(request, service.get_result(result_id), str(exc), exc.status_code)
    return _redirect(f"/results/{result_id}", "reviewed")


# -- settings ------------------------------------------------------------------------------
RETENTION_LABELS = [(None, "Keep forever")] + [(d, f"{d} days") for d in RETENTION_CHOICES]


def _settings_page(
    request: Request, error: str | None = None, status: int = 200, cleaned: Any = None
) -> Response:
    service = _service(request)
    return render(
        request,
        "settings.html",
        {
            "settings": service.get_settings(),
            "choices": RETENTION_LABELS,
            "error": error,
            "cleaned": cleaned,
            "db_url": describe_url(service.url),  # a server URL's password hidden
            # where engines connect: this server's address as the browser reached it
            "server_url": str(request.base_url).rstrip("/"),
            "upstream": getattr(getattr(request.app.state, "proxy", None), "upstream", None),
        },
        status=status,
    )


@router.get("/settings")
def settings_page(request: Request) -> Response:
    """Automatic evaluation and retention."""
    return _settings_page(request)


@router.post("/settings")
async def save_settings(request: Request) -> Response:
    """Save the settings form."""
    form = await checked_form(request)
    raw = _text(form, "retention_days")
    try:
        try:
            retention = int(raw) if raw else None
        except ValueError:
            raise InvalidInput(f"retention must be a number of days, not {raw!r}") from None
        _service(request).update_settings(
            auto_evaluate=form.get("auto_evaluate") is not None, retention_days=retention
        )
    except SimevalError as exc:
        return _settings_page(request, str(exc), exc.status_code)
    return _redirect("/settings", "settings")


@router.post("/settings/cleanup")
async def run_cleanup(request: Request) -> Response:
    """Delete what is older than the retention period, now."""
    await checked_form(request)
    out = _service(request).cleanup()
    return _settings_page(request, cleaned=out)


# -- login (only used when a token is set) ---------------------------------------------------
def _safe_next(target: str) -> str:
    # Only local paths: never redirect to another site after login.
    return target if target.startswith("/") and not target.startswith("//") else "/"


@router.get("/login")
def login_page(request: Request, next: str = "/") -> Response:
    """Ask for the token."""
    return render(request, "login.html", {"next": _safe_next(next), "error": None})


@router.post("/login")
async def login(request: Request) -> Response:
    """Check the token and set the session cookie."""
    form = await checked_form(request)
    token = request.app.state.token
    target = _safe_next(_text(form, "next") or "/")
    if not token:
        return _redirect(target)
    if not secret_matches(_text(form, "token").strip(), token):
        return render(request, "login.html", {"next": target, "error": "wrong token"}, 401)
    response = _redirect(target)
    response.raw_headers.append(session_cookie_header(token, request.url.scheme == "https"))
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    """Forget the session cookie."""
    await checked_form(request)
    response = _redirect("/login")
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@router.get("/favicon.ico")
def favicon() -> Response:
    """No favicon (and no 404 noise in the log)."""
    return Response(status_code=204)
