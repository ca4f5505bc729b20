"""Which run a report is of, and where its rows come from: a stored run (``ID``, ``run:ID``,
``run:latest``) read back from the database, or a run just made (``simeval run --html``),
read from the database when it was stored, else from its results file. A baseline (a results
file or a stored run) is loaded anew and compared row by row.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
from collections.abc import Iterator
from typing import TYPE_CHECKING

from simeval import service
from simeval.datafiles.columns import DEFAULT_COLUMNS, Columns
from simeval.errors import InvalidInput
from simeval.report.build import Report, build_report
from simeval.report.rows import ReportRow, file_rows, run_options, stored_rows
from simeval.runs.baseline import (
    STORED_RUN_PREFIX,
    Baseline,
    is_stored_run,
    load_baseline,
    load_stored_baseline,
)
from simeval.runs.config import load_evals
from simeval.runs.run import RunRequest
from simeval.runs.summary import RunSummary

if TYPE_CHECKING:
    from simeval.service import Service
    from simeval.service.models import RunOut

DEFAULT_TOLERANCE = 0.05


def find_run(svc: Service, spec: str) -> RunOut:
    """The stored run ``spec`` names: ``ID``, ``run:ID``, or ``run:latest`` (the newest run
    that has finished storing). ``InvalidInput`` when there is none, or it is not complete
    (still being stored, or interrupted: its rows are not all there)."""
    what = spec.strip().removeprefix(STORED_RUN_PREFIX).strip()
    if what == "latest":
        run = _newest_complete(svc)
        if run is None:
            raise InvalidInput(
                "no stored run to report on: store one with simeval run FILE --store"
            )
    elif what.isdigit():
        run = svc.get_run(int(what))
    else:
        raise InvalidInput(f"{spec!r} names no stored run: give ID, run:ID or run:latest")
    if run.status != "complete":
        raise InvalidInput(
            f"run {run.id} is {run.status}: its rows are not all stored, so there is nothing "
            "whole to report on"
        )
    return run


def _newest_complete(svc: Service) -> RunOut | None:
    offset = 0
    while True:
        page = svc.list_runs(limit=100, offset=offset)
        run = next((r for r in page if r.status == "complete"), None)
        if run is not None or len(page) < 100:
            return run
        offset += 100


def load_report_baseline(
    svc: Service | None, spec: str | None, name: str, run_id: int | None, columns: Columns
) -> Baseline | None:
    """The baseline ``spec`` names, loaded for a row-by-row comparison: a results file, or a
    stored run (``run:latest``: the newest stored run called ``name`` before run ``run_id``,
    so a stored run is never its own baseline). ``svc``: None to open the default service
    when a stored run is named."""
    if spec is None:
        return None
    if is_stored_run(spec):
        if svc is None:
            raise InvalidInput(f"--baseline {spec}: a stored run needs the database")
        return load_stored_baseline(svc, spec, name, before=run_id)
    return load_baseline(spec, columns)


def stored_report(
    svc: Service,
    spec: str,
    baseline: str | None = None,
    tolerance: float | None = None,
    columns: Columns = DEFAULT_COLUMNS,
) -> Report:
    """The report of stored run ``spec`` (see ``find_run``), against ``baseline`` when given
    (else with the baseline report its summary kept, if any). ``tolerance``: the score
    change that counts (default: the one the run was compared with, else 0.05)."""
    run = find_run(svc, spec)
    summary = RunSummary.from_dict(run.summary)
    summary.run_id = run.id
    if tolerance is None:
        tolerance = summary.baseline.tolerance if summary.baseline else DEFAULT_TOLERANCE
    base = load_report_baseline(svc, baseline, run.name, run.id, columns)
    about = {"id": run.id, "name": run.name, "created_at": f"{run.created_at:%Y-%m-%d %H:%M} UTC"}
    return build_report(
        summary,
        stored_rows(svc, run.id),
        run.options or {},
        base,
        tolerance,
        title=os.path.basename(summary.file or run.source),
        run=about,
        source=f"stored run {run.id}",
    )


def run_report(request: RunRequest, summary: RunSummary, temporary: bool = False) -> Report:
    """The report of a run ``request`` has just made (``summary``): its rows read back from
    the database when it was stored, else from its results file (``temporary``: one that
    ``keeping_rows`` made, whose lines name nothing: each row is named by its place)."""
    if summary.run_id is not None:
        spec = f"{STORED_RUN_PREFIX}{summary.run_id}"
        return stored_report(
            service.open_service(request.db),
            spec,
            request.baseline,
            request.tolerance,
            request.columns,
        )
    if summary.results_file is None:
        raise InvalidInput("the run kept its rows nowhere: no results file, not stored")
    evals = load_evals(request.evals_file) if request.evals_file is not None else None
    options = run_options(
        request.options, {e.name: dict(e.options) for e in evals} if evals else None
    )
    stored_baseline = request.baseline is not None and is_stored_run(request.baseline)
    svc = service.open_service(request.db) if stored_baseline else None
    base = load_report_baseline(svc, request.baseline, request.name, None, request.columns)
    rows = file_rows(summary.results_file, request.columns)
    source: str | None = f"results file {summary.results_file}"
    if temporary:
        rows = _numbered(rows)
        source = None
    return build_report(summary, rows, options, base, request.tolerance, source=source)


def _numbered(rows: Iterator[ReportRow]) -> Iterator[ReportRow]:
    """``rows`` each named by its place among the run's results (``result 12``)."""
    for row in rows:
        row.where = f"result {row.n}"
        yield row


@contextlib.contextmanager
def keeping_rows(request: RunRequest) -> Iterator[RunRequest]:
    """``request`` as it is when its run keeps its rows (a results file, or stored); else
    with a results file in a temporary directory, removed on leaving, for the report to read
    them back from (``--no-results`` with ``--html``)."""
    if request.write_results or request.store:
        yield request
        return
    with tempfile.TemporaryDirectory(prefix="simeval-report-") as tmp:
        yield dataclasses.replace(
            request, results=os.path.join(tmp, "results.jsonl"), write_results=True
        )
