"""The JSON API under ``/api``: the endpoint engines post their outputs to, and eval management.

Every route is a thin call into ``simeval.service.Service`` (the same functions the CLI and the
pages use). User mistakes come back as ``{"error": "..."}`` with 400/404/409 (from the
service's ``SimevalError``), 422 for a malformed request body, 413 for an oversized one. One
module per resource, each with its router (``ROUTERS``); every ``/api`` route of the app is
declared here (``tests/test_layout.py`` holds it).
"""

from __future__ import annotations

from starlette.routing import BaseRoute, Route

from simeval.web.api import (
    alerts,
    browse,
    capture,
    datasets,
    evals,
    overview,
    results,
    run_groups,
    settings,
    users,
)
from simeval.web.api.alerts import ALERT_INTERVAL_S, start_alerts, stop_alerts
from simeval.web.api.capture import capture_fast

# in the order their routes are matched; each router is flat (its own routes, under /api), as
# the 405 middleware reads them (``simeval.web.methods``)
ROUTERS = (
    capture.router,
    capture.health_router,
    evals.router,
    results.router,
    settings.router,
    browse.router,
    users.router,
    datasets.router,
    alerts.router,
    run_groups.router,
    overview.router,
)
# ``GET /api/health`` alone, for an app that serves no other API route (``simeval proxy``)
HEALTH_ROUTER = capture.health_router


def fast_routes() -> list[BaseRoute]:
    """The routes matched before every other route of the app: the capture hot path
    (``capture_fast``, a plain route beside the router's documented one)."""
    return [Route("/api/capture", capture_fast, methods=["POST"])]


__all__ = [
    "ALERT_INTERVAL_S",
    "HEALTH_ROUTER",
    "ROUTERS",
    "capture_fast",
    "fast_routes",
    "start_alerts",
    "stop_alerts",
]
