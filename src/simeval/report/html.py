"""The report as one self-contained HTML page: the summary, pass rates, the baseline, the
histograms laid out by a Jinja template (autoescaped), and every row as JSON in a
``<script type="application/json">`` element that a small inline script pages, searches
and sorts. Nothing is fetched: the page's Content-Security-Policy allows no request at all,
and its one script runs by its hash.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from markupsafe import Markup

from simeval import __version__
from simeval.report.build import FAILED_TEXT_CHARS, PASSED_TEXT_CHARS, Report
from simeval.scoring.options import STRICTNESS_BANDS, band
from simeval.templating import environment

if TYPE_CHECKING:
    from jinja2 import Environment

TEMPLATES = Path(__file__).parent / "templates"
# what JSON may hold that would end or confuse a <script> element in HTML: escaped as \uXXXX
# (the same string to JSON.parse), so no text in a row can close the element
_SCRIPT_UNSAFE = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def script_json(data: object) -> Markup:
    """``data`` as JSON safe to put inside a ``<script>`` element as it is.

    >>> str(script_json({"output": "</script><b>"}))
    '{"output":"\\\\u003c/script\\\\u003e\\\\u003cb\\\\u003e"}'
    """
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return Markup(text.translate(_SCRIPT_UNSAFE))


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.4f}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _pts(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:+.1f} pts"


def _environment() -> Environment:
    env = environment(TEMPLATES)
    env.filters.update(num=_num, pct=_pct, pts=_pts, band=band)
    env.globals.update(version=__version__)
    return env


def report_data(report: Report) -> dict[str, object]:
    """The rows as the page's script reads them: a list per row (see ``report.js``), each
    reference text once in ``refs`` (an eval's rows share theirs)."""
    refs: dict[str, int] = {}
    rows = []
    # every row is from the run's file (or its results file), named on the page: "line 12"
    # says where, as the console's table does, and 100,000 copies of a path are not written
    s = report.summary
    prefixes = tuple(f"{p} " for p in (s.file, s.results_file) if p)
    for r in report.rows:
        ref = -1 if r.reference is None else refs.setdefault(r.reference, len(refs))
        rows.append(
            [
                r.n,
                r.eval,
                r.case,
                round(r.score, 6),
                1 if r.passed else 0,
                r.threshold,
                r.status,
                None if r.before is None else round(r.before, 6),
                r.input,
                r.output,
                ref,
                r.found,
                r.missing,
                r.reason,
                r.note,
                _short_where(r.where, prefixes),
            ]
        )
    return {
        "bands": [[b.low, b.label] for b in STRICTNESS_BANDS],
        "by_row": report.by_row,
        "evals": report.named_evals,
        "refs": list(refs),
        "rows": rows,
    }


def _short_where(where: str, prefixes: tuple[str, ...]) -> str:
    for prefix in prefixes:
        if where.startswith(prefix):
            return where[len(prefix) :]
    return where


def render_html(report: Report) -> str:
    """The report as one HTML page (see the module's docstring)."""
    script = (TEMPLATES / "report.js").read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    template = _environment().get_template("report.html")
    return template.render(
        report=report,
        css=Markup((TEMPLATES / "report.css").read_text(encoding="utf-8")),
        script=Markup(script),
        script_hash=f"sha256-{digest}",
        data_json=script_json(report_data(report)),
        passed_chars=PASSED_TEXT_CHARS,
        failed_chars=FAILED_TEXT_CHARS,
    )
