"""The dashboard: every active eval at a glance (the overview), one eval's health charts, and
recent captures with pass/fail per eval."""

from __future__ import annotations

from collections import Counter

from fastapi import APIRouter, Request
from fastapi.responses import Response

from simeval.errors import InvalidInput
from simeval.service import Service
from simeval.service.models import EvalOut
from simeval.web import charts
from simeval.web.pages._render import render, service_of
from simeval.web.sparkline import sparkline

router = APIRouter(include_in_schema=False)


@router.get("/dashboard")
def dashboard(
    request: Request,
    eval: str | None = None,
    bucket: str | None = None,
    window: str | None = None,
    sort: str | None = None,
) -> Response:
    """Every active eval over a window (worst first), one eval's health charts, and recent
    captures with pass/fail per eval."""
    service = service_of(request)
    overview = _overview(service, window or "24h", sort or "worst")
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
            "picked_eval": eval or None,  # kept by the overview's links and window selector
            **overview,
        },
    )


def _overview(service: Service, window: str, sort: str) -> dict[str, object]:
    """The overview for the page: rows with their sparklines, and the header links' sorts
    (the sorted column's link turns the order round). A bad ``window`` or ``sort`` shows its
    message above the default overview."""
    error = None

    def alerts() -> dict[str, int]:
        return dict(Counter(a.eval_name for a in service.alerts.open_alerts()))

    try:
        out = service.overview(window, sort, alerts=alerts)
    except InvalidInput as exc:
        error = str(exc)
        out = service.overview(alerts=alerts)
    slot = f"{out.slot_hours} h" if out.slot_hours < 48 else f"{out.slot_hours // 24} days"
    rows = [
        {
            "row": r,
            "spark": sparkline(
                r.sparkline,
                f"{r.eval_name}: pass rate per {slot}, oldest first",
                threshold=None,
            ),
        }
        for r in out.evals
    ]
    flip = {key: (f"-{key}" if out.sort == key else key) for key in _SORT_COLUMNS}
    return {"overview": out, "overview_rows": rows, "overview_error": error, "sorts": flip}


_SORT_COLUMNS = ("worst", "name", "pass_rate", "mean_score", "change", "results", "last")


def _health(service: Service, selected: EvalOut, bucket: str | None) -> dict[str, object]:
    """One eval's pass-rate trend (by day, or by hour while there are few days) and its score
    histogram, as chart JSON for the page."""
    if bucket not in ("hour", "day", "week"):
        trend = service.trend(selected.name, bucket="day")
        bucket = "day"
        if len(trend.buckets) <= 2:
            trend, bucket = service.trend(selected.name, bucket="hour"), "hour"
    else:
        trend = service.trend(selected.name, bucket=bucket)
    # the newest 5,000 results' scores, read from the packed results (not listed as results)
    recent = service.recent_verdicts(selected.name, limit=5000)
    scores = [score for score, _ in recent]
    # each result coloured by the verdict it was given (its own threshold, or its review),
    # as the pass count above counts it: not by today's threshold
    verdicts = [ok for _, ok in recent]
    return {
        "trend": trend,
        "bucket": bucket,
        "count": service.count_results(eval_name=selected.name),
        "pass_count": service.count_results(eval_name=selected.name, passed=True),
        "scores": len(scores),
        "trend_json": charts.as_json(charts.trend_spec(trend)) if trend.buckets else None,
        "hist_json": charts.as_json(charts.histogram_spec(scores, selected.threshold, verdicts))
        if scores
        else None,
    }
