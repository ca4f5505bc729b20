"""The JSON API of alerts under ``/api/alerts``: the alerts (open and closed), the rules, each
alert's delivery attempts, a test delivery of a rule, and an evaluation now.

The rules themselves come from the evals YAML (``simeval evals import``), so they sit in
version control. The server evaluates them off the capture path: ``start_alerts`` (called by
the app's lifespan) starts a ``simeval.service.alert_watch.AlertWatcher``, woken by each
committed capture batch and by a timer.
"""

from __future__ import annotations

from typing import Annotated, Literal, TypeVar

from fastapi import APIRouter, Depends, FastAPI, Path, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from simeval.checks import MAX_ID, MAX_NAME_CHARS
from simeval.service import Service
from simeval.service.alert_models import (
    AlertCheck,
    AlertOut,
    AlertRuleOut,
    AlertTestReport,
    DeliveryOut,
)
from simeval.service.alert_watch import INTERVAL_S, AlertWatcher
from simeval.web.schema import ERRORS, NAME

router = APIRouter(prefix="/api/alerts", responses=ERRORS, tags=["alerts"])

_Model = TypeVar("_Model", bound=BaseModel)
ALERT_INTERVAL_S = INTERVAL_S


async def get_service(request: Request) -> Service:
    """The app's service (one per database)."""
    service: Service = request.app.state.service
    return service


ServiceDep = Annotated[Service, Depends(get_service)]
RuleName = Annotated[
    str, Path(description="A rule's name", max_length=MAX_NAME_CHARS, json_schema_extra=NAME)
]
AlertId = Annotated[int, Path(ge=1, le=MAX_ID, description="An alert's id")]


def _json(model: BaseModel | list[_Model]) -> JSONResponse:
    if isinstance(model, list):
        return JSONResponse([m.model_dump(mode="json") for m in model])
    return JSONResponse(model.model_dump(mode="json"))


def start_alerts(app: FastAPI) -> None:
    """Start the app's alert watcher (``app.state.alert_interval`` None: none)."""
    interval = getattr(app.state, "alert_interval", None)
    if interval is None:
        app.state.alerts = None
        return
    watcher = AlertWatcher(app.state.service, interval=interval)
    watcher.start()
    app.state.alerts = watcher


def stop_alerts(app: FastAPI) -> None:
    """Stop the app's alert watcher, if any."""
    watcher = getattr(app.state, "alerts", None)
    if watcher is not None:
        watcher.stop()
        app.state.alerts = None


@router.get("", response_model=list[AlertOut])
def list_alerts(
    service: ServiceDep,
    status: Annotated[Literal["open", "closed"] | None, Query()] = None,
    eval: Annotated[
        str | None, Query(max_length=MAX_NAME_CHARS, description="Only this eval's alerts")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> JSONResponse:
    """Alerts newest first, open and closed (or one ``status``), all evals' or one's."""
    return _json(service.alerts.list_alerts(status=status, eval_name=eval, limit=limit))


@router.get("/rules", response_model=list[AlertRuleOut])
def list_rules(service: ServiceDep) -> JSONResponse:
    """The alert rules (from the evals YAML's ``alerts:`` section), by name."""
    return _json(service.alerts.alert_rules())


@router.post("/rules/{name}/test", response_model=AlertTestReport)
async def test_rule(
    name: RuleName,
    service: ServiceDep,
    attempts: Annotated[int, Query(ge=1, le=5, description="Tries at most")] = 1,
) -> JSONResponse:
    """Post a sample alert of rule ``name`` to its webhook; the attempts are logged."""
    report = await run_in_threadpool(service.alerts.test_alert, name, attempts)
    return _json(report)


@router.post("/evaluate", response_model=AlertCheck)
async def evaluate(request: Request, service: ServiceDep) -> JSONResponse:
    """Evaluate the rules now; what opened or closed is delivered as the watcher's would be."""
    watcher: AlertWatcher | None = getattr(request.app.state, "alerts", None)
    if watcher is not None:
        check = await run_in_threadpool(watcher.run_once)
    else:
        check = await run_in_threadpool(service.alerts.evaluate_alerts)
        if getattr(request.app.state, "worker", None) is not None:
            # one of several workers, and another runs the watcher (simeval.web.workers),
            # which delivers only what it opened: what this evaluation changed goes out here
            await run_in_threadpool(_deliver, service, check)
    return _json(check)


def _deliver(service: Service, check: AlertCheck) -> None:
    for alert in check.opened:
        service.alerts.deliver_alert(alert.id, "open")
    for alert in check.closed:
        service.alerts.deliver_alert(alert.id, "closed")


@router.get("/{alert_id}", response_model=AlertOut)
def get_alert(alert_id: AlertId, service: ServiceDep) -> JSONResponse:
    """One alert."""
    return _json(service.alerts.get_alert(alert_id))


@router.get("/{alert_id}/deliveries", response_model=list[DeliveryOut])
def deliveries(alert_id: AlertId, service: ServiceDep) -> JSONResponse:
    """The alert's delivery attempts, newest first."""
    service.alerts.get_alert(alert_id)  # 404 for an unknown alert
    return _json(service.alerts.alert_deliveries(alert_id=alert_id))
