"""Sparklines: a small inline SVG of a series, built on the server (no script, nothing
fetched), for tables where a plotly chart per row would be far too heavy (the overview)."""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup, escape

WIDTH, HEIGHT, PAD = 96, 24, 2.5


def sparkline(values: Sequence[float | None], label: str, threshold: float | None = None) -> Markup:
    """Values in [0, 1] as a line over equal slots, oldest first; a slot without a value
    breaks the line (a lone value is a dot). ``threshold`` draws a dashed line at that height.
    ``label`` is the accessible name (and the tooltip)."""
    n = len(values)
    step = (WIDTH - 2 * PAD) / max(1, n - 1)

    def x(i: int) -> float:
        return PAD + i * step if n > 1 else WIDTH / 2

    def y(v: float) -> float:
        return HEIGHT - PAD - max(0.0, min(1.0, v)) * (HEIGHT - 2 * PAD)

    runs: list[list[tuple[float, float]]] = [[]]
    for i, v in enumerate(values):
        if v is None:
            if runs[-1]:
                runs.append([])
            continue
        runs[-1].append((x(i), y(v)))
    parts = []
    if threshold is not None:
        ty = y(threshold)
        parts.append(
            f'<line class="spark-threshold" x1="0" x2="{WIDTH}" y1="{ty:.1f}" y2="{ty:.1f}"/>'
        )
    for run in runs:
        if len(run) == 1:
            parts.append(f'<circle cx="{run[0][0]:.1f}" cy="{run[0][1]:.1f}" r="1.8"/>')
        elif run:
            points = " ".join(f"{px:.1f},{py:.1f}" for px, py in run)
            parts.append(f'<polyline points="{points}"/>')
    text = escape(label)
    return Markup(
        f'<svg class="sparkline" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" preserveAspectRatio="none" role="img" '
        f'aria-label="{text}"><title>{text}</title>{"".join(parts)}</svg>'
    )
