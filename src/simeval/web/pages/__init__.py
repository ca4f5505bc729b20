"""Eval Studio: server-rendered pages over the same service functions as the API and the CLI,
one module per resource over one ``render`` (``_render``).

``ROUTERS`` are included by ``simeval.web.app`` in this order; the order matters only in that
``/evals/new`` must come before the catch-all ``/evals/{name:path}`` (both in ``evals``).
"""

from simeval.web.pages import (
    alerts,
    auth,
    compare,
    conversations,
    dashboard,
    datasets,
    evals,
    results,
    review,
    runs,
    settings,
    users,
)
from simeval.web.pages._render import CSP, error_page
from simeval.web.pages.run_groups import router as run_groups_router

ROUTERS = (
    evals.router,
    dashboard.router,
    review.router,
    results.router,
    settings.router,
    auth.router,
    compare.router,
    conversations.router,
    runs.router,
    run_groups_router,
    datasets.router,
    alerts.router,
    users.router,
)

__all__ = ["CSP", "ROUTERS", "error_page"]
