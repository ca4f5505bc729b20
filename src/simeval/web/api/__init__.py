"""The JSON API under ``/api``: the endpoint engines post their outputs to, and eval management.

Every route is a thin call into ``simeval.service.Service`` (the same functions the CLI and the
pages use). User mistakes come back as ``{"error": "..."}`` with 400/404/409 (from the
service's ``SimevalError``), 422 for a malformed request body, 413 for an oversized one. One
module per resource, each with its router (``ROUTERS``).
"""

from __future__ import annotations

from simeval.web.api import browse, capture, evals, results, settings, users
from simeval.web.api.capture import capture_fast

# in the order their routes are matched; each router is flat (its own routes, under /api), as
# the 405 middleware reads them (``simeval.web.methods``)
ROUTERS = tuple(m.router for m in (capture, evals, results, settings, browse, users))

__all__ = ["ROUTERS", "capture_fast"]
