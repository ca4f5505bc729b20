"""The JSON API under ``/api``: the endpoint engines post their outputs to, and eval management.

Every route is a thin call into ``simeval.service.Service`` (the same functions the CLI and the
pages use). User mistakes come back as ``{"error": "..."}`` with 400/404/409 (from the
service's ``SimevalError``), 422 for a malformed request body, 413 for an oversized one. One
module per resource, each with its router (``ROUTERS``).
"""

from __future__ import annotations

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
__all__ = [
    "ALERT_INTERVAL_S",
    "ROUTERS",
    "capture_fast",
    "start_alerts",
    "stop_alerts",
]
