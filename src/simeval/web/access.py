"""Who may call what once users exist: every route's required role, in one table.

Roles rank ``viewer`` (reads) < ``reviewer`` (+ review verdicts) < ``editor`` (+ evals,
datasets, runs, alerts) < ``admin`` (+ users, settings, retention, cleanup); ``ingest`` stands
apart: it may only write captures (``POST /api/capture``, the batch form, OTLP's ``/v1/*`` and
the proxy), which editors and admins may also do. ``PUBLIC`` routes need no user;
``SIGNED_IN`` ones any user at all.

``ROUTE_ROLES`` lists every route of the app as (methods, path template, role), in the order
the app matches them; ``required_role`` answers for a request. A path no route serves needs a
viewer (GET, so a 404 is told only to a user) or an admin (anything else).
``tests/web/test_access.py`` walks the app's routes and fails for one missing here.

>>> required_role("POST", "/api/evals/greeting/activate")
'editor'
>>> required_role("GET", "/api/health")
'public'
>>> allows("admin", "reviewer"), allows("ingest", "viewer"), allows("editor", "ingest")
(True, False, True)
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.routing import compile_path

PUBLIC, SIGNED_IN = "public", "signed-in"
VIEWER, REVIEWER, EDITOR, ADMIN, INGEST = "viewer", "reviewer", "editor", "admin", "ingest"
_RANK = {VIEWER: 1, REVIEWER: 2, EDITOR: 3, ADMIN: 4}
_GET = ("GET", "HEAD")
_ALL = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")

# (methods, path template as the route declares it, role)
ROUTE_ROLES: tuple[tuple[tuple[str, ...], str, str], ...] = (
    # assets and the sign-in form
    (_ALL, "/static/{path:path}", PUBLIC),
    (_ALL, "/vendor/docs/{path:path}", PUBLIC),
    (_GET, "/vendor/plotly.min.js", PUBLIC),
    (_GET, "/favicon.ico", PUBLIC),
    (_GET, "/login", PUBLIC),
    (("POST",), "/login", PUBLIC),
    (("POST",), "/logout", SIGNED_IN),
    (_GET, "/api/health", PUBLIC),
    # writing captures
    (("POST",), "/api/capture", INGEST),
    (("POST",), "/api/captures/batch", INGEST),
    (("POST",), "/v1/traces", INGEST),
    (("POST",), "/v1/logs", INGEST),
    (("POST",), "/v1/metrics", INGEST),
    # the API's schema and docs
    (_GET, "/openapi.json", VIEWER),
    (_GET, "/docs", VIEWER),
    (_GET, "/docs/oauth2-redirect", VIEWER),
    (_GET, "/redoc", VIEWER),
    # evals
    (_GET, "/api/evals", VIEWER),
    (("POST",), "/api/evals", EDITOR),
    (("PATCH",), "/api/evals/{name:path}", EDITOR),
    (("DELETE",), "/api/evals/{name:path}", EDITOR),
    (_GET, "/api/evals/{name:path}/versions", VIEWER),
    (("POST",), "/api/evals/{name:path}/test", EDITOR),
    (("POST",), "/api/evals/{name:path}/activate", EDITOR),
    (("POST",), "/api/evals/{name:path}/deactivate", EDITOR),
    (("POST",), "/api/evals/{name:path}/archive", EDITOR),
    (_GET, "/api/evals/{name:path}/trend", VIEWER),
    (_GET, "/api/evals/{name:path}", VIEWER),
    (("POST",), "/api/evals/{name}/backtest", EDITOR),
    (("POST",), "/api/rescore", EDITOR),
    # results and reviews
    (_GET, "/api/results", VIEWER),
    (_GET, "/api/results/export", VIEWER),
    (_GET, "/api/results/{result_id}", VIEWER),
    (("POST",), "/api/results/{result_id}/review", REVIEWER),
    (_GET, "/api/compare", VIEWER),
    # settings, retention, cleanup
    (_GET, "/api/settings", VIEWER),
    (("PATCH",), "/api/settings", ADMIN),
    (("POST",), "/api/cleanup", ADMIN),
    # captures and runs
    (_GET, "/api/captures", VIEWER),
    (_GET, "/api/captures/{capture_id}", VIEWER),
    (_GET, "/api/conversations", VIEWER),
    (_GET, "/api/conversations/{conversation_id:path}", VIEWER),
    (_GET, "/api/runs", VIEWER),
    (_GET, "/api/runs/{run_id}", VIEWER),
    (("DELETE",), "/api/runs/{run_id}", EDITOR),
    # datasets
    (_GET, "/api/datasets", VIEWER),
    (("POST",), "/api/datasets", EDITOR),
    (("POST",), "/api/datasets/{name}/import", EDITOR),
    (_GET, "/api/datasets/{name}", VIEWER),
    (_GET, "/api/datasets/{name}/export", VIEWER),
    (("POST",), "/api/datasets/{name}/cases", EDITOR),
    (("PATCH",), "/api/datasets/{name}/cases/{case_id:path}", EDITOR),
    (("DELETE",), "/api/datasets/{name}/cases/{case_id:path}", EDITOR),
    (("POST",), "/api/datasets/{name}/accept", EDITOR),
    (("POST",), "/api/datasets/{name}/captures", EDITOR),
    # alerts
    (_GET, "/api/alerts", VIEWER),
    (_GET, "/api/alerts/rules", VIEWER),
    (("POST",), "/api/alerts/rules/{name}/test", EDITOR),
    (("POST",), "/api/alerts/evaluate", EDITOR),
    (_GET, "/api/alerts/{alert_id}", VIEWER),
    (_GET, "/api/alerts/{alert_id}/deliveries", VIEWER),
    # run groups, overview
    (_GET, "/api/run-groups", VIEWER),
    (_GET, "/api/run-groups/{name:path}/cases", VIEWER),
    (_GET, "/api/run-groups/{name:path}/cases/{key}", VIEWER),
    (_GET, "/api/run-groups/{name:path}", VIEWER),
    (_GET, "/api/overview", VIEWER),
    # users and the audit log
    (_GET, "/api/me", SIGNED_IN),
    (_GET, "/api/users", ADMIN),
    (("POST",), "/api/users", ADMIN),
    (("PATCH",), "/api/users/{name}", ADMIN),
    (("POST",), "/api/users/{name}/key", ADMIN),
    (_GET, "/api/audit", ADMIN),
    # studio pages
    (_GET, "/", VIEWER),
    (("POST",), "/examples", EDITOR),
    (_GET, "/evals/new", EDITOR),
    (_GET, "/evals/new/similarity", EDITOR),
    (("POST",), "/evals", EDITOR),
    (_GET, "/evals/{name:path}", VIEWER),
    (("POST",), "/evals/{name:path}/edit", EDITOR),
    (("POST",), "/evals/{name:path}/synonyms", EDITOR),
    (("POST",), "/evals/{name:path}/test", EDITOR),
    (("POST",), "/evals/{name:path}/activate", EDITOR),
    (("POST",), "/evals/{name:path}/deactivate", EDITOR),
    (("POST",), "/evals/{name:path}/archive", EDITOR),
    (("POST",), "/evals/{name}/backtest", EDITOR),
    (("POST",), "/evals/{name}/rescore", EDITOR),
    (_GET, "/dashboard", VIEWER),
    (_GET, "/review", VIEWER),
    (("POST",), "/review/name", REVIEWER),
    (_GET, "/review/calibrate", VIEWER),
    (("POST",), "/review/calibrate", EDITOR),
    (("POST",), "/review/{result_id}", REVIEWER),
    (("POST",), "/results/{result_id}/verdict", REVIEWER),
    (_GET, "/results", VIEWER),
    (_GET, "/results/{result_id}", VIEWER),
    (("POST",), "/results/{result_id}/review", REVIEWER),
    (_GET, "/captures/{capture_id}", VIEWER),
    (_GET, "/settings", VIEWER),
    (("POST",), "/settings", ADMIN),
    (("POST",), "/settings/cleanup", ADMIN),
    (_GET, "/compare", VIEWER),
    (_GET, "/conversations", VIEWER),
    (_GET, "/conversations/{conversation_id:path}", VIEWER),
    (_GET, "/runs", VIEWER),
    (_GET, "/runs/{run_id}", VIEWER),
    (_GET, "/run-groups", VIEWER),
    (_GET, "/run-groups/{name:path}/cases/{key}", VIEWER),
    (_GET, "/run-groups/{name:path}", VIEWER),
    (_GET, "/datasets", VIEWER),
    (_GET, "/datasets/{name}", VIEWER),
    (("POST",), "/datasets/{name}/edit", EDITOR),
    (("POST",), "/datasets/{name}/accept", EDITOR),
    (("POST",), "/datasets/{name}/delete", EDITOR),
    (("POST",), "/datasets/{name}/add", EDITOR),
    (("POST",), "/datasets-from-captures", EDITOR),
    (_GET, "/alerts", VIEWER),
    (_GET, "/activity", ADMIN),
    (_GET, "/users", ADMIN),
    (("POST",), "/users", ADMIN),
    (("POST",), "/users/{name}", ADMIN),
    # the OpenAI-compatible proxy (serve --upstream), after every other /v1 route
    (_ALL, "/v1/{path:path}", INGEST),
)

_COMPILED = tuple(
    (frozenset(methods), compile_path(template)[0], role) for methods, template, role in ROUTE_ROLES
)


def required_role(method: str, path: str) -> str:
    """The role a request needs: its route's in ``ROUTE_ROLES``, else viewer (GET) or
    admin."""
    for methods, pattern, role in _COMPILED:
        if method in methods and pattern.match(path):
            return role
    return VIEWER if method in _GET else ADMIN


def allows(role: str, required: str) -> bool:
    """Whether a user of ``role`` may call a route that needs ``required``."""
    if required in (PUBLIC, SIGNED_IN):
        return True
    if required == INGEST:
        return role in (INGEST, EDITOR, ADMIN)
    return _RANK.get(role, 0) >= _RANK.get(required, 99)


def can(role: str | None, required: str) -> bool:
    """``allows`` for a page deciding what to show: no user (local mode, a token) may do all."""
    return role is None or allows(role, required)


def unmapped(routes: Iterable[tuple[Iterable[str], str]]) -> list[tuple[str, str]]:
    """The (method, template) pairs of ``routes`` that ``ROUTE_ROLES`` does not list."""
    known = {(m, template) for methods, template, _ in ROUTE_ROLES for m in methods}
    return sorted((m, path) for methods, path in routes for m in methods if (m, path) not in known)
