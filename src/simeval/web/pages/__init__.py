"""Eval Studio: server-rendered pages over the same service functions as the API and the CLI,
one module per resource over one ``render`` (``_render``).

``ROUTERS`` are included by ``simeval.web.app`` in this order; the order matters only in that
``/evals/new`` must come before the catch-all ``/evals/{name:path}`` (both in ``evals``).
"""

from simeval.web.pages import (
    auth,
    compare,
    conversations,
    dashboard,
    evals,
    results,
    runs,
    settings,
)
from simeval.web.pages._render import CSP, error_page

ROUTERS = (
    evals.router,
    dashboard.router,
    results.router,
    settings.router,
    auth.router,
    compare.router,
    conversations.router,
    runs.router,
)

__all__ = ["CSP", "ROUTERS", "error_page"]
