"""A run's report: one self-contained HTML page (``render_html``) and a short Markdown summary
(``render_markdown``, for a CI job's summary), both laid out from a ``Report``.

``build_report(summary, rows, options)`` makes a ``Report`` from a run's ``RunSummary`` and
its rows; ``stored_report`` (``simeval report RUN``) and ``run_report`` (``simeval run
--html``) find the rows and the baseline. The modules, one concern each:

- ``rows``: a run's rows (stored, or from a results file) and the explanation of a failing row;
- ``build``: the report's numbers: pass rates, histograms, the baseline row by row;
- ``source``: which run, where its rows come from, its baseline;
- ``html`` and ``markdown``: the two layouts (``templates/``: the page, its CSS and script);
- ``outputs``: the files, checked before any work and written whole.
"""

from __future__ import annotations

from simeval.report.build import EvalLine, Histogram, Report, build_report
from simeval.report.html import render_html
from simeval.report.markdown import render_markdown
from simeval.report.outputs import appends, check_output, write_report, write_text
from simeval.report.rows import ReportRow, file_rows, stored_rows
from simeval.report.source import find_run, keeping_rows, run_report, stored_report

__all__ = [
    "EvalLine",
    "Histogram",
    "Report",
    "ReportRow",
    "appends",
    "build_report",
    "check_output",
    "file_rows",
    "find_run",
    "keeping_rows",
    "render_html",
    "render_markdown",
    "run_report",
    "stored_report",
    "stored_rows",
    "write_report",
    "write_text",
]
