"""``simeval report``: a stored run as one self-contained HTML page and a Markdown summary;
and what ``simeval run --html/--markdown`` share with it (the options, writing, the line
that says what was written). A thin layer over ``simeval.report``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypedDict

import click
from rich.markup import escape

from simeval.cli.common import (
    UserError,
    console,
    db_option,
    json_option,
    print_json,
    service_at,
)

if TYPE_CHECKING:
    from simeval.report.build import Report
    from simeval.runs.run import RunRequest
    from simeval.runs.summary import RunSummary

HTML_HELP = (
    "Write the report as one self-contained HTML page (nothing fetched: opens from disk or "
    "as a CI artifact): pass rates, the baseline, a histogram of scores, every row "
    "(failing rows first, explained), searchable and sortable."
)
MARKDOWN_HELP = (
    "Write the short form in Markdown (evals with pass rate, change and gate verdict, the "
    "ten worst rows); appended when FILE is $GITHUB_STEP_SUMMARY, written whole otherwise."
)


class WrittenFile(TypedDict):
    """A report file written: its path and size."""

    path: str
    bytes: int


class WrittenReport(TypedDict):
    """What ``write_outputs`` wrote, as ``--json`` prints it."""

    files: list[WrittenFile]
    rows: int
    failed: int
    seconds: float


def markdown_option(func: Callable[..., object]) -> Callable[..., object]:
    """``--markdown FILE``, on ``run`` and ``report``."""
    return click.option("--markdown", default=None, metavar="FILE", help=MARKDOWN_HELP)(func)


def check_outputs(html: str | None, markdown: str | None) -> None:
    """Refuse (exit 2, one line) a report path that cannot be written, before any work."""
    from simeval.report import check_output

    if html is not None:
        check_output(html, "HTML report")
    if markdown is not None:
        check_output(markdown, "Markdown summary")


def write_outputs(
    made: Report, html: str | None, markdown: str | None, started: float
) -> WrittenReport:
    """Write the report ``made`` to the paths given; returns what was written, as ``--json``
    prints it (path, bytes, rows, failed rows, seconds from ``started``)."""
    from simeval.report import write_report

    written = write_report(made, html, markdown)
    return {
        "files": [{"path": p, "bytes": n} for p, n in written.items()],
        "rows": len(made.rows),
        "failed": made.failed,
        "seconds": round(time.perf_counter() - started, 3),
    }


def run_reported(
    request: RunRequest,
    html: str | None,
    markdown: str | None,
    score: Callable[[RunRequest], RunSummary],
) -> tuple[RunSummary, WrittenReport | None]:
    """``simeval run``, with ``--html/--markdown``: the paths checked first, the run made
    (``score`` runs a ``RunRequest``), then its report written; returns the summary and what
    was written (None: no report asked for). A run that keeps its rows nowhere keeps them in
    a temporary file meanwhile."""
    from simeval.report import keeping_rows, run_report

    if html is None and markdown is None:
        return score(request), None
    check_outputs(html, markdown)
    with keeping_rows(request) as scored:
        summary = score(scored)
        started = time.perf_counter()
        made = run_report(scored, summary, temporary=scored is not request)
        written = write_outputs(made, html, markdown, started)
    if scored is not request:  # its rows went to a temporary file, gone now
        summary.results_file = None
    return summary, written


def say_written(info: WrittenReport | None) -> None:
    """The line that says what was written (none when nothing was)."""
    if info is None:
        return
    files = ", ".join(f"{escape(f['path'])} ({_size(f['bytes'])})" for f in info["files"])
    console.print(
        f"report: {files}: {info['rows']:,} rows, {info['failed']:,} failed, written in "
        f"{info['seconds']:.1f} s",
        soft_wrap=True,
    )


def _size(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 1e6 else f"{n / 1e3:,.1f} kB"


@click.command("report")
@click.argument("run")
@click.option("-o", "--output", "html", default=None, metavar="FILE", help=HTML_HELP)
@markdown_option
@click.option(
    "--baseline",
    default=None,
    metavar="FILE|run:ID|run:latest",
    help="Compare every row with an earlier run: its results file, or a stored run (run:latest: "
    "the newest stored before RUN with its name). Without it, the baseline the run was "
    "compared with when it ran (its largest changes) is shown.",
)
@click.option(
    "--tolerance",
    type=click.FloatRange(0, 1),
    default=None,
    help="Score change that counts as improved/regressed (default: the run's, else 0.05).",
)
@db_option
@json_option
def report(
    run: str,
    html: str | None,
    markdown: str | None,
    baseline: str | None,
    tolerance: float | None,
    db: str | None,
    as_json: bool,
) -> None:
    """Write the report of stored run RUN (ID, run:ID, or run:latest: the newest stored) as
    one HTML page (-o) and/or a Markdown summary (--markdown).

    \b
    Examples:
        simeval report run:latest -o report.html
        simeval report 12 -o report.html --baseline run:latest --markdown summary.md
        simeval report run:latest --markdown "$GITHUB_STEP_SUMMARY"
    """
    from simeval.report import stored_report

    if html is None and markdown is None:
        raise UserError("give -o FILE (the HTML report) and/or --markdown FILE")
    check_outputs(html, markdown)
    started = time.perf_counter()
    with service_at(db) as svc:
        made = stored_report(svc, run, baseline, tolerance)
    info = write_outputs(made, html, markdown, started)
    if as_json:
        print_json(info)
    else:
        say_written(info)


COMMANDS: tuple[click.Command, ...] = (report,)
