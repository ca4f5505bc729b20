"""The JSON API of the overview (``/api/overview``): every active eval over a window, worst
first, read from the trend rollup (``Service.overview``); what the dashboard's top shows."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Literal

from fastapi import APIRouter, Query

from simeval.service.overview import SORTS, OverviewOut
from simeval.web.api.common import ServiceDep
from simeval.web.schema import ERRORS

router = APIRouter(prefix="/api", responses=ERRORS)

_SORT = "^-?(" + "|".join(SORTS) + ")$"


@router.get("/overview", response_model=OverviewOut, tags=["evals"])
def overview(
    service: ServiceDep,
    window: Annotated[
        Literal["24h", "7d", "30d"], Query(description="The window, ending with this hour")
    ] = "24h",
    sort: Annotated[
        str,
        Query(
            description="worst (drops first, then the lowest pass rates), name, pass_rate, "
            "mean_score, change, results or last; -NAME for descending",
            pattern=_SORT,
        ),
    ] = "worst",
) -> OverviewOut:
    """Every active eval over the window: results, pass rate, mean score, a pass-rate
    sparkline, the change of the pass rate against the window before with its 95% interval,
    the hour of the newest result and the open alerts."""
    return service.overview(
        window,
        sort,
        alerts=lambda: dict(Counter(a.eval_name for a in service.alerts.open_alerts())),
    )
