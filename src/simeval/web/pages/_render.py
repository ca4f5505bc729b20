"""What every studio page shares: the Jinja environment and its filters, ``render`` (with the
CSRF token, the notice and the security headers), the error page, redirects, reading a form
field, and paging.

Every user text goes through Jinja2's autoescaping; the notice shown after a redirect is one of
the fixed ``NOTICES``, never text taken from the URL.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from urllib.parse import quote, urlencode

from fastapi import Request
from fastapi.responses import RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from jinja2 import Environment
from starlette.datastructures import FormData

from simeval import __version__
from simeval.errors import SimevalError
from simeval.scoring.options import STRICTNESS_BANDS, band
from simeval.service import Service
from simeval.service.users import Identity
from simeval.templating import environment
from simeval.web.access import can
from simeval.web.security import CSRF_FIELD, csrf_token, set_csrf_cookie

TEMPLATES = Path(__file__).parent.parent / "templates"
PER_PAGE = 50  # rows on one page of a list

# Fixed success messages shown after a redirect (never text taken from the URL).
NOTICES = {
    "created": "Eval created as a draft. Run a test, then activate it.",
    "saved": "Saved. A changed eval gets a new version, which needs a passing test "
    "(an active eval keeps scoring with its active version until you activate the new one).",
    "unchanged": "Nothing changed.",
    "tested": "Test recorded: it passed.",
    "tested-fail": "Test recorded: it failed. Activate needs a passing test of this version.",
    "activated": "Activated: every matching capture is now scored by this version.",
    "deactivated": "Deactivated: the eval is a draft again and scores nothing.",
    "archived": "Archived: hidden and not scoring; its results are kept.",
    "reviewed": "Review saved: it now decides pass/fail for this result.",
    "review-pass": "Reviewed as a pass.",
    "review-fail": "Reviewed as a fail.",
    "reviewer": "Name saved: it is kept with each review you make in the studio.",
    "calibrated": "Threshold calibrated from the reviews and saved as a new version (an active "
    "eval keeps scoring with its active version until the new one passes a test and is "
    "activated).",
    "settings": "Settings saved.",
    "cleanup": "Cleanup done.",
    "example": "Example eval created and tested: click Activate, then post a capture.",
    "rescored": "Rescore done: past captures of the last 7 days without this eval's result "
    "are scored now.",
    "switched": "Switched over: the new version scores every matching capture from now on.",
    "dataset-edit": "Case saved: the dataset has a new version (older versions are unchanged).",
    "dataset-accept": "Draft accepted: the dataset has a new version.",
    "dataset-delete": "Case deleted: the dataset has a new version (older versions keep it).",
    "dataset-add": "Case added: the dataset has a new version.",
    "dataset-captures": "Captures added as draft cases: check each draft reference, then edit "
    "or accept it.",
}

# Notices that report something that did not go well: shown in the failure colour.
FAILED_NOTICES = frozenset({"tested-fail"})


# -- filters -------------------------------------------------------------------------------
def fmt_time(value: datetime | None) -> str:
    """A time as ``YYYY-MM-DD HH:MM:SS`` (empty for none)."""
    if value is None:
        return ""
    return value.strftime("%Y-%m-%d %H:%M:%S")


def fmt_score(value: float | None) -> str:
    """A score with three decimals, "–" for none or NaN."""
    return (
        "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"
    )


def fmt_pct(value: float | None) -> str:
    """A fraction as a whole percentage, "–" for none."""
    return "–" if value is None else f"{value * 100:.0f}%"


LIST_CHARS = 300  # list pages show this much of a text


def cut_text(value: object, n: int = LIST_CHARS) -> str:
    """The first ``n`` characters of a text, with "…" when there is more (list pages: a
    900,000-character output must not be embedded whole)."""
    text = "" if value is None else str(value)
    return text if len(text) <= n else text[: n - 1] + "…"


def bars(histogram: list[int]) -> list[dict[str, float]]:
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


def _env() -> Environment:
    env = environment(TEMPLATES)
    env.filters.update(
        time=fmt_time,
        cut=cut_text,
        score=fmt_score,
        pct=fmt_pct,
        q=lambda s: quote(str(s), safe=""),
        band=band,
        bars=bars,
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


# -- responses -----------------------------------------------------------------------------
def open_alert_count(request: Request) -> int:
    """How many alerts are open (every page's banner); 0 when the store cannot say."""
    try:
        return len(service_of(request).alerts.open_alerts())
    except SimevalError:  # the store down: the page itself says so, not its banner
        return 0


def render(
    request: Request, name: str, context: Mapping[str, object], status: int = 200
) -> Response:
    """A page from a template, with the CSRF token, the notice and the security headers."""
    page = dict(context)
    done = request.query_params.get("done", "")
    page.setdefault("notice", NOTICES.get(done))
    page.setdefault("notice_tone", "err" if done in FAILED_NOTICES else "ok")
    page["csrf"] = csrf_token(request)
    user = signed_in(request)
    page["user"] = user
    page["can"] = lambda needed: can(user.role if user is not None else None, needed)
    page["auth"] = bool(request.app.state.token) or user is not None
    page["path"] = request.url.path
    page.setdefault("open_alert_count", open_alert_count(request))
    response = templates.TemplateResponse(request, name, page, status_code=status)
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "same-origin"
    set_csrf_cookie(request, response)
    return response


def signed_in(request: Request) -> Identity | None:
    """The user a request comes from (None: no users defined, local mode or the token)."""
    user: Identity | None = getattr(request.state, "user", None)
    return user


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


def redirect(url: str, done: str | None = None, anchor: str = "") -> RedirectResponse:
    """A 303 to ``url``; ``done`` names the notice (in ``NOTICES``) the next page shows."""
    if done:
        url += ("&" if "?" in url else "?") + urlencode({"done": done})
    return RedirectResponse(url + anchor, status_code=303)


def eval_url(name: str) -> str:
    """The page of the eval named ``name``."""
    return "/evals/" + quote(name, safe="")


# -- requests ------------------------------------------------------------------------------
def service_of(request: Request) -> Service:
    """The app's one ``Service``."""
    service: Service = request.app.state.service
    return service


def form_text(form: FormData, key: str) -> str:
    """A form field as text (empty when missing or a file)."""
    value = form.get(key)
    return value if isinstance(value, str) else ""


def page_count(total: int, per_page: int = PER_PAGE) -> int:
    """How many pages ``total`` rows fill (at least one)."""
    return max(1, math.ceil(total / per_page))
