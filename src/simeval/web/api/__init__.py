"""The JSON API under ``/api``: the endpoint engines post their outputs to, and eval management.

Every route is a thin call into ``simeval.service.Service`` (the same functions the CLI and the
pages use). User mistakes come back as ``{"error": "..."}`` with 400/404/409 (from the
service's ``SimevalError``), 422 for a malformed request body, 413 for an oversized one. One
module per resource; ``router`` gathers them in the order their routes are matched.
"""

from __future__ import annotations

from fastapi import APIRouter

from simeval.web.api import browse, capture, evals, results, settings
from simeval.web.api.capture import capture_fast
from simeval.web.schema import ERRORS

router = APIRouter(prefix="/api", responses=ERRORS)
for _module in (capture, evals, results, settings, browse):
    router.include_router(_module.router)

__all__ = ["capture_fast", "router"]
