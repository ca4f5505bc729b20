"""The Alerts page: the open alerts first, then the recently closed, each with its rule, the
value that fired and its delivery attempts; the rules below. Every page shows a banner
linking here while any alert is open (``open_alert_count``, read by ``_render.render``)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from simeval.web.pages._render import render, service_of

router = APIRouter(include_in_schema=False)
CLOSED_SHOWN = 50


@router.get("/alerts")
def alerts_page(request: Request) -> Response:
    """Open alerts, the latest closed ones, and the rules."""
    service = service_of(request)
    opened = service.alerts.open_alerts()
    closed = service.alerts.list_alerts(status="closed", limit=CLOSED_SHOWN)
    attempts = {
        a.id: service.alerts.alert_deliveries(alert_id=a.id, limit=10) for a in opened + closed
    }
    return render(
        request,
        "alerts.html",
        {
            "opened": opened,
            "closed": closed,
            "attempts": attempts,
            "rules": service.alerts.alert_rules(),
        },
    )
