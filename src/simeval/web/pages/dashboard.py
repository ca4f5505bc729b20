"""The dashboard: recent captures with pass/fail per eval, and one eval's health charts."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from simeval.service import Service
from simeval.service.models import EvalOut
from simeval.web import charts
from simeval.web.pages._render import render, service_of

router = APIRouter(include_in_schema=False)


@router.get("/dashboard")
def dashboard(request: Request, eval: str | None = None, bucket: str | None = None) -> Response:
    """Recent captures with pass/fail per eval, and one eval's health charts."""
    service = service_of(request)
    evals = service.list_evals()
    total = service.count_results()
    passed = service.count_results(passed=True)
    # captures, not results: one stored while automatic evaluation was off shows "not scored"
    recent = service.list_captures(limit=25)
    selected = None
    if eval:
        selected = service.get_eval(eval)
    elif evals:
        active = [e for e in evals if e.status == "active"]
        selected = (active or evals)[0]
    health = _health(service, selected, bucket) if selected is not None else None
    return render(
        request,
        "dashboard.html",
        {
            "evals": evals,
            "active_count": sum(1 for e in evals if e.status == "active"),
            "total": total,
            "passed": passed,
            "recent": recent,
            "selected": selected,
            "health": health,
            "charts": health is not None,
        },
    )


def _health(service: Service, selected: EvalOut, bucket: str | None) -> dict[str, Any]:
    """One eval's pass-rate trend (by day, or by hour while there are few days) and its score
    histogram, as chart JSON for the page."""
    if bucket not in ("hour", "day", "week"):
        trend = service.trend(selected.name, bucket="day")
        bucket = "day"
        if len(trend.buckets) <= 2:
            trend, bucket = service.trend(selected.name, bucket="hour"), "hour"
    else:
        trend = service.trend(selected.name, bucket=bucket)
    # List views show no explanations: explain=False spares building a scorer per result.
    scores = [
        r.score for r in service.list_results(eval_name=selected.name, limit=5000, explain=False)
    ]
    return {
        "trend": trend,
        "bucket": bucket,
        "count": service.count_results(eval_name=selected.name),
        "pass_count": service.count_results(eval_name=selected.name, passed=True),
        "scores": len(scores),
        "trend_json": charts.as_json(charts.trend_figure(trend)) if trend.buckets else None,
        "hist_json": charts.as_json(charts.histogram_figure(scores, selected.threshold))
        if scores
        else None,
    }
