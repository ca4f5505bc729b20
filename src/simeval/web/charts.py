"""Chart figures for the studio, as plotly.js specs (and plotly figures of them), drawn by
plotly.js.

The figures are serialised to JSON here and embedded in the page as inert
``<script type="application/json">`` blocks; ``static/studio.js`` hands them to the plotly.js
bundle served from the installed package (``/vendor/plotly.min.js``), so nothing comes from
the internet and no inline script is needed.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from markupsafe import Markup

from simeval.service.models import TrendOut

PASS_COLOR = "#15803d"
FAIL_COLOR = "#dc2626"
SCORE_COLOR = "#4f46e5"
RATE_COLOR = "#0891b2"
MUTED = "#64748b"


def _layout(**extra: object) -> dict[str, object]:
    layout: dict[str, object] = {
        # the template is added to the JSON (``as_json``): set on the figure, plotly validates
        # a deep copy of it each time (~50 ms a figure, most of a dashboard's time)
        "template": None,
        "margin": {"l": 48, "r": 16, "t": 24, "b": 40},
        "height": 300,
        "font": {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 12},
        "legend": {"orientation": "h", "y": -0.2, "x": 0},
        "hovermode": "x unified",
    }
    layout.update(extra)
    return layout


@functools.cache
def _template() -> dict[str, object]:
    """The figures' template (plotly_white) as JSON, built once."""
    import plotly.io as pio

    return dict(pio.templates["plotly_white"].to_plotly_json())


def as_json(fig: Any) -> Markup:
    """A figure (or a figure's spec: ``{"data": [...], "layout": {...}}``) as JSON that is
    safe inside a ``<script type="application/json">`` element, with the studio's template
    (plotly_white)."""
    from plotly.utils import PlotlyJSONEncoder

    spec = dict(fig) if isinstance(fig, dict) else fig.to_plotly_json()
    spec["layout"] = {**spec.get("layout", {}), "template": _template()}
    text = json.dumps(spec, cls=PlotlyJSONEncoder, separators=(",", ":"))
    # JSON allows \\u escapes anywhere in strings, and these characters occur nowhere else.
    safe = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Markup(safe)


def trend_spec(trend: TrendOut) -> dict[str, object]:
    """Mean score and pass rate per bucket, the threshold line, version and scorer changes,
    as plotly.js reads the figure: built without plotly's Python objects (their validation
    cost tens of milliseconds a figure, most of a dashboard's time)."""
    buckets = trend.buckets
    x = [b.start for b in buckets]
    data: list[dict[str, object]] = [
        {
            "type": "scatter",
            "x": x,
            "y": [b.mean_score for b in buckets],
            "name": "mean score",
            "mode": "lines+markers",
            "line": {"color": SCORE_COLOR, "width": 2.5},
            "customdata": [b.count for b in buckets],
            "hovertemplate": "mean score %{y:.3f} (%{customdata} results)<extra></extra>",
        },
        {
            "type": "scatter",
            "x": x,
            "y": [b.pass_rate for b in buckets],
            "name": "pass rate",
            "mode": "lines+markers",
            "line": {"color": RATE_COLOR, "width": 2, "dash": "dot"},
            "hovertemplate": "pass rate %{y:.0%}<extra></extra>",
        },
    ]
    axis = _time_axis(x, trend.bucket)
    # The threshold as a trace, not a shape: it is named in the legend instead of a label that
    # the score line can run through.
    data.append(
        {
            "type": "scatter",
            "x": axis.get("range", [x[0], x[-1]] if x else []),
            "y": [trend.threshold, trend.threshold],
            "name": f"threshold {trend.threshold:.2f}",
            "mode": "lines",
            "line": {"color": FAIL_COLOR, "width": 1.5, "dash": "dash"},
            "hoverinfo": "skip",
        }
    )
    shapes: list[dict[str, object]] = []
    notes: list[dict[str, object]] = []
    for i, b in enumerate(buckets):
        marks = []
        if i > 0 and b.version_change:
            marks.append("v" + "/".join(str(v) for v in b.versions))
        if b.fingerprint_break:
            marks.append("scorer changed: not comparable")
        if not marks:
            continue
        shapes.append(
            {
                "type": "line",
                "yref": "paper",
                "x0": b.start,
                "x1": b.start,
                "y0": 0,
                "y1": 1,
                "line": {"color": MUTED, "width": 1, "dash": "dot"},
            }
        )
        notes.append(
            {
                "x": b.start,
                "yref": "paper",
                "y": 1,
                "yanchor": "bottom",
                "text": ", ".join(marks),
                "showarrow": False,
                "font": {"color": MUTED, "size": 11},
            }
        )
    layout = _layout(
        shapes=shapes,
        annotations=notes,
        xaxis=axis,
        yaxis={"range": [0, 1.05], "tickformat": ".1f", "title": {"text": "score / rate"}},
    )
    return {"data": data, "layout": layout}


BUCKET_WIDTH = {"hour": timedelta(hours=1), "day": timedelta(days=1), "week": timedelta(days=7)}
TICK_FORMAT = {"hour": "%H:%M<br>%b %d", "day": "%b %d", "week": "%b %d"}


def _time_axis(x: Sequence[datetime], bucket: str) -> dict[str, object]:
    """An x axis padded by a bucket on each side and labelled at the bucket's scale.

    Left to itself plotly zooms a single point down to milliseconds ("03:59:59.9995").
    """
    width = BUCKET_WIDTH.get(bucket, timedelta(days=1))
    if not x:
        return {}
    pad = width if len(x) < 6 else width / 2
    axis: dict[str, object] = {
        "range": [(min(x) - pad).isoformat(), (max(x) + pad).isoformat()],
        "tickformat": TICK_FORMAT.get(bucket, "%b %d"),
        "hoverformat": "%Y-%m-%d %H:%M",
    }
    if (max(x) - min(x)) / width <= 12:
        # One tick per bucket, on the bucket starts (else "Nov 30" could repeat every 12 h).
        axis.update(tick0=min(x).isoformat(), dtick=width.total_seconds() * 1000)
    return axis


def histogram_spec(
    scores: Sequence[float], threshold: float, passed: Sequence[bool] | None = None
) -> dict[str, object]:
    """Distribution of the raw scores, passing and failing bars apart, the threshold marked,
    as plotly.js reads the figure (built without plotly's Python objects).

    ``passed``: each score's verdict as it was scored (against the threshold of its time);
    without it a score passes at ``threshold``, the threshold in force, which is marked."""
    # Binned here, 20 bins over [0, 1] with 1.0 in the last one: plotly's own bins put a
    # score of exactly 1.0 in a bin [1.0, 1.05) past the axis end, where it never showed.
    size = 0.05
    n_bins = 20
    fails, passes = [0] * n_bins, [0] * n_bins
    verdicts = passed if passed is not None else [score >= threshold for score in scores]
    for score, ok in zip(scores, verdicts, strict=True):
        k = min(n_bins - 1, max(0, int(score * n_bins)))
        (passes if ok else fails)[k] += 1
    centers = [round((k + 0.5) * size, 4) for k in range(n_bins)]
    data = [
        {
            "type": "bar",
            "x": centers,
            "y": counts,
            "width": size,
            "name": name,
            "marker": {"color": color},
            "opacity": 0.85,
            "hovertemplate": f"{name}: %{{y}}<extra></extra>",
        }
        for name, counts, color in (("fail", fails, FAIL_COLOR), ("pass", passes, PASS_COLOR))
    ]
    return {
        "data": data,
        "layout": _layout(
            barmode="stack",
            hovermode="closest",
            bargap=0.05,
            xaxis={"range": [0, 1.0], "title": {"text": "score"}},
            yaxis=_count_axis(scores, size),
            shapes=[
                {
                    "type": "line",
                    "yref": "paper",
                    "x0": threshold,
                    "x1": threshold,
                    "y0": 0,
                    "y1": 1,
                    "line": {"color": "#0f172a", "width": 1.5, "dash": "dash"},
                }
            ],
            annotations=[
                {
                    "x": threshold,
                    "yref": "paper",
                    "y": 1,
                    "yanchor": "bottom",
                    "text": f"threshold {threshold:.2f}",
                    "showarrow": False,
                    "font": {"size": 11},
                }
            ],
        ),
    }


def _count_axis(scores: Sequence[float], size: float) -> dict[str, object]:
    """A y axis of whole counts: with few results plotly would otherwise tick 0.5, 1.5..."""
    per_bin: dict[int, int] = {}
    for s in scores:
        k = min(int(s / size), round(1 / size) - 1)
        per_bin[k] = per_bin.get(k, 0) + 1
    axis: dict[str, object] = {"title": {"text": "results"}, "rangemode": "tozero"}
    if max(per_bin.values(), default=0) <= 8:
        axis.update(tick0=0, dtick=1)
    return axis
