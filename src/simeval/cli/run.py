"""``simeval run`` (score a data-set file, gate CI on it) and ``simeval calibrate``."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from simeval import runs
from simeval.cli.common import (
    UserError,
    console,
    db_option,
    json_flag,
    print_json,
    progress_bar,
    scorer_options,
)
from simeval.cli.engines import engine_options, run_with_engines, wants_engines
from simeval.cli.report import HTML_HELP, markdown_option, run_reported, say_written
from simeval.cli.worst import print_worst
from simeval.errors import InvalidInput
from simeval.scoring import calibrate as calibrate_mod
from simeval.scoring.options import check_unit
from simeval.scoring.scorer import DEFAULT_THRESHOLD

FORMAT_CHOICE = click.Choice(["jsonl", "csv", "tsv", "parquet"])


def _unit_interval(name: str) -> Callable[[click.Context, click.Parameter, object], float | None]:
    def check(_ctx: click.Context, _param: click.Parameter, value: object) -> float | None:
        if value is None:
            return None
        try:
            return check_unit(value, name)
        except InvalidInput as exc:
            raise UserError(str(exc)) from None

    return check


def _columns(
    output_col: str, reference_cols: tuple[str, ...], input_col: str | None, id_col: str | None
) -> runs.Columns:
    return runs.Columns(
        output=output_col,
        references=tuple(reference_cols) or ("reference",),
        input=input_col or "input",
        id=id_col or "id",
        input_required=input_col is not None,
        id_required=id_col is not None,
    )


def _column_options(func: Callable[..., object]) -> Callable[..., object]:
    for decorator in reversed(
        [
            click.option(
                "--output-col",
                default="output",
                show_default=True,
                help="Column with the output to score.",
            ),
            click.option(
                "--reference-col",
                "reference_cols",
                multiple=True,
                help="Column with a reference answer (repeatable; a JSONL/Parquet cell "
                "may hold a list). Default: reference.",
            ),
            click.option(
                "--input-col",
                default=None,
                help="Column with the input/prompt (default: input, when present).",
            ),
            click.option(
                "--id-col", default=None, help="Column with a case id (default: id, when present)."
            ),
            click.option(
                "--format",
                "fmt",
                type=FORMAT_CHOICE,
                default=None,
                help="Input format (default: from the extension).",
            ),
            click.option(
                "--no-quoting",
                is_flag=True,
                help="Read CSV/TSV cells literally: a double quote is ordinary text "
                "(plain TSV files).",
            ),
            click.option(
                "--workers",
                type=int,
                default=None,
                metavar="N",
                help="Local processes (default: all cores; small files use one).",
            ),
            click.option(
                "--on-error",
                type=click.Choice(["fail", "skip"]),
                default="fail",
                show_default=True,
                help="Stop at a bad row, or list and skip bad rows.",
            ),
        ]
    ):
        func = decorator(func)
    return func


@click.command()
@click.argument("file")
@_column_options
@click.option(
    "-t",
    "--threshold",
    default=None,
    help=f"Minimum score that passes (with reference columns).  [default: {DEFAULT_THRESHOLD}]",
)
@click.option(
    "-o",
    "--results",
    "results_path",
    default=None,
    metavar="FILE",
    help="Results file (.jsonl, .csv, .tsv, .parquet). Default: FILE.results.EXT.",
)
@click.option("--no-results", is_flag=True, help="Write no results file.")
@click.option(
    "--junit",
    "junit_path",
    default=None,
    metavar="FILE",
    help="Write JUnit XML for CI: a test case per row, failures with score and missing terms.",
)
@click.option(
    "--min-pass-rate",
    type=float,
    default=None,
    callback=_unit_interval("--min-pass-rate"),
    help="Gate: exit 1 when the pass rate (0-1) is lower.",
)
@click.option(
    "--min-mean-score",
    type=float,
    default=None,
    callback=_unit_interval("--min-mean-score"),
    help="Gate: exit 1 when the mean score is lower.",
)
@click.option(
    "--evals",
    "evals_file",
    default=None,
    metavar="FILE",
    help="Score with the evals of a definitions file (YAML/JSON, as `evals export` writes) "
    "instead of reference columns: a row goes to the eval its id names, else to the evals "
    "whose input scope matches its input, and to every unscoped eval.",
)
@click.option(
    "--allow-unmatched",
    is_flag=True,
    help="With --evals: let rows that match no eval pass the gate (they are still counted "
    "and named in the summary).",
)
@click.option(
    "--store",
    is_flag=True,
    help="Store the run and its results in the database (see --db), for the studio and "
    "for later baselines (run:ID, run:latest).",
)
@click.option(
    "--run-name",
    default=None,
    help="Name of the stored run (default: the file name); run:latest finds runs by it.",
)
@db_option(purpose="for --store and run: baselines")
@click.option(
    "--baseline",
    default=None,
    metavar="FILE|run:ID|run:latest",
    help="Compare each case with an earlier run: its results file, or a stored run "
    "(run:ID, or run:latest for the newest stored run of the same name).",
)
@click.option(
    "--max-regressions",
    type=click.IntRange(min=0),
    default=None,
    help="Gate: exit 1 when more cases regressed than this (needs --baseline).",
)
@click.option(
    "--tolerance",
    type=float,
    default=0.05,
    show_default=True,
    callback=_unit_interval("--tolerance"),
    help="Score change that counts as improved/regressed (a pass/fail flip always does).",
)
@click.option(
    "--dask",
    "dask_address",
    default=None,
    metavar="ADDRESS",
    help="Score on a Dask cluster (scheduler address, e.g. tcp://host:8786).",
)
@click.option(
    "--worst",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="How many worst cases the summary shows.",
)
@click.option("--html", default=None, metavar="FILE", help=HTML_HELP)
@markdown_option
@json_flag("Print the summary as JSON.")
@scorer_options
@engine_options
def run(
    file: str,
    output_col: str,
    reference_cols: tuple[str, ...],
    input_col: str | None,
    id_col: str | None,
    fmt: str | None,
    no_quoting: bool,
    workers: int | None,
    on_error: str,
    threshold: str | None,
    results_path: str | None,
    no_results: bool,
    junit_path: str | None,
    min_pass_rate: float | None,
    min_mean_score: float | None,
    baseline: str | None,
    max_regressions: int | None,
    tolerance: float,
    evals_file: str | None,
    allow_unmatched: bool,
    store: bool,
    run_name: str | None,
    db: str | None,
    dask_address: str | None,
    worst: int,
    html: str | None,
    markdown: str | None,
    as_json: bool,
    options: dict[str, object],
    engine_args: dict[str, Any],
) -> None:
    """Score every row of a JSONL, CSV or Parquet FILE; gate a CI build on the result.

    Each row's output is scored against its reference answer(s). The results file gets the
    input columns plus score, pass, threshold, matched_index, matched_reference,
    missing_terms (filled for failing rows) and fingerprint; it is written to a temporary
    file and renamed into place, so a failed run leaves nothing half-written.

    Exit code 0 when every gate holds, 1 when a gate fails, 2 on bad usage or input (a bad
    row is named by file and line/row; `--on-error skip` lists and skips bad rows instead).

    \b
    Examples:
        simeval run cases.jsonl --min-pass-rate 0.9 --junit report.xml
        simeval run cases.csv --output-col answer --reference-col gold1 --reference-col gold2
        simeval run cases.jsonl --evals evals.yaml --min-pass-rate 0.9
        simeval run logs.parquet --workers 2 -o scored.parquet
        simeval run cases.jsonl --baseline main.results.jsonl --max-regressions 0
        simeval run cases.jsonl --store --baseline run:latest --max-regressions 0
        simeval run big.jsonl --dask tcp://scheduler:8786 --min-mean-score 0.7
        simeval run cases.jsonl --html report.html --markdown "$GITHUB_STEP_SUMMARY"

    With --engines FILE (or --engine URL --model M), the engines answer every case first
    (FILE, or a stored data set: dataset:NAME[@VERSION]); each engine's answers are scored,
    gated, written to FILE.ENGINE.results.jsonl, stored with --store (one run per engine, in
    one group) and compared with the first engine's. Exit 1 also when an engine is worse
    than the first by that comparison's verdict.

    \b
        simeval run golden.jsonl --engines engines.yaml --min-pass-rate 0.8 --store
        simeval run dataset:golden@2 --engines engines.yaml --evals evals.yaml
        simeval run golden.jsonl --engine http://127.0.0.1:8000/v1 --model m --repeat 3
    """
    _refuse_conflicts(
        results=no_results and bool(results_path),
        regressions=max_regressions is not None and baseline is None,
        evals_file=evals_file,
        per_row=bool(reference_cols),
        scorer_flags=bool(options) or threshold is not None,
        allow_unmatched=allow_unmatched,
        name_unstored=run_name is not None and not store,
    )
    request = runs.RunRequest(
        file,
        columns=_columns(output_col, reference_cols, input_col, id_col),
        threshold=DEFAULT_THRESHOLD if threshold is None else threshold,
        options=options,
        evals_file=evals_file,
        fmt=fmt,
        quoting=not no_quoting,
        results=results_path,
        write_results=not no_results,
        junit=junit_path,
        baseline=baseline,
        tolerance=tolerance,
        on_error=on_error,
        workers=workers,
        dask=dask_address,
        worst=worst,
        store=store,
        run_name=run_name,
        db=db,
        gates=runs.GateLimits(
            min_pass_rate, min_mean_score, max_regressions, allow_unmatched=allow_unmatched
        ),
    )
    if wants_engines(engine_args):
        if html is not None or markdown is not None:
            raise UserError(
                "--html and --markdown report a run of FILE's own outputs; with engines, store "
                "the runs (--store) and report each one: simeval report run:ID -o report.html"
            )
        run_with_engines(request, engine_args, as_json, _say)
    if file.startswith("dataset:"):
        raise UserError(f"{file}: a stored data set has no outputs to score: give --engines")

    def score(scored: runs.RunRequest) -> runs.RunSummary:
        with progress_bar(f"scoring {os.path.basename(file)}") as progress:
            return runs.run_request(scored, progress)

    summary, written = run_reported(request, html, markdown, score)
    if as_json:
        print_json({**summary.to_dict(), **({"report": written} if written else {})})
    else:
        _print_summary(summary)
        say_written(written)
    raise SystemExit(0 if summary.ok else 1)


def _refuse_conflicts(
    *,
    results: bool,
    regressions: bool,
    evals_file: str | None,
    per_row: bool,
    scorer_flags: bool,
    allow_unmatched: bool,
    name_unstored: bool,
) -> None:
    """A one-line usage error for ``run``'s options that cannot go together."""
    if results:
        raise UserError("give --results or --no-results, not both")
    if regressions:
        raise UserError("--max-regressions needs --baseline")
    if evals_file is not None and per_row:
        raise UserError("give --evals or --reference-col, not both")
    if evals_file is not None and scorer_flags:
        raise UserError(
            "with --evals, each eval's own threshold and scorer options apply: "
            "leave out --threshold and the scorer flags"
        )
    if allow_unmatched and evals_file is None:
        raise UserError("--allow-unmatched needs --evals: only an eval file leaves rows unmatched")
    if name_unstored:
        raise UserError("--run-name needs --store")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _say(*objects: Any, **kwargs: Any) -> None:
    """One line of the human summary; long paths are not wrapped (CI logs are wide)."""
    console.print(*objects, soft_wrap=True, **kwargs)


def _print_summary(s: runs.RunSummary) -> None:
    # a rate over a fraction of a second says more about start-up than about speed
    rate = f" ({s.rows_per_s:,.0f} rows/s)" if s.elapsed_s >= 1 and s.rows >= 1000 else ""
    _say(
        f"scored {s.results:,} results from {s.rows:,} rows of "
        f"{escape(s.file)} in {s.elapsed_s:.1f} s{rate}"
    )
    line = (
        f"pass rate [bold]{_pct(s.pass_rate)}[/bold] ({s.passed:,} of "
        f"{s.results:,}), mean score [bold]{_num(s.mean_score)}[/bold]"
    )
    if s.threshold is not None:
        line += f", threshold {s.threshold:.2f}"
    _say(line)
    for name, e in (s.evals or {}).items():
        _say(
            f"  eval {escape(name)}: {e.results:,} results, pass rate "
            f"{_pct(e.pass_rate)}, mean {_num(e.mean_score)}, threshold "
            f"{e.threshold:.2f}"
        )
    if s.unmatched_rows:
        _print_unmatched(s)
    if s.skipped:
        _say(f"[yellow]skipped {s.skipped:,} bad rows:[/yellow]")
        for where, error in s.skipped_rows[:20]:
            _say(f"  {escape(where)}: {escape(error)}", markup=True)
        if s.skipped > 20:
            _say(
                f"  ... and {s.skipped - 20:,} more (all in --json)"
                if len(s.skipped_rows) > 20
                else f"  ... and {s.skipped - 20:,} more"
            )
    print_worst(s)
    if s.most_missing:
        _say(
            "most often missing in failing rows: "
            + escape(", ".join(f"{t} ({n})" for t, n in s.most_missing))
        )
    if s.baseline:
        _print_baseline(s.baseline)
    files = [f"results: {s.results_file}"] if s.results_file else []
    if s.junit_file:
        files.append(f"junit: {s.junit_file}")
    if files:
        _say(escape(", ".join(files)))
    if s.run_id is not None:
        _say(f"stored as run {s.run_id} ({escape(s.run_name or '')})")
    for g in s.gates or ():
        mark = "[green]ok[/green]" if g.passed else "[red]FAILED[/red]"
        _say(
            f"gate {g.gate} {g.limit}: {mark} (value {g.value:.4g})"
            if isinstance(g.value, float)
            else f"gate {g.gate} {g.limit}: {mark} (value {g.value})"
        )


def _print_unmatched(s: runs.RunSummary) -> None:
    _say(f"[yellow]{s.unmatched_rows:,} rows matched no eval:[/yellow]")
    named = (s.unmatched or [])[:20]
    for u in named:
        case = " ".join((u.id or u.input or "").split())
        case = case[:60] + ("..." if len(case) > 60 else "")
        _say(f"  {escape(u.where)}" + (f": {escape(case)}" if case else ""))
    total, listed = s.unmatched_rows or 0, len(s.unmatched or ())
    if total > len(named):
        where = ""
        if listed > len(named):
            where = " (all in --json)" if listed == total else f" (the first {listed} in --json)"
        _say(f"  ... and {total - len(named):,} more{where}")


def _print_baseline(b: runs.BaselineReport) -> None:
    _say(
        f"against {escape(b.baseline)}: [red]{b.regressed} regressed"
        f"[/red], [green]{b.improved} improved[/green], {b.unchanged} "
        f"unchanged, {b.new} new, {b.removed} removed"
    )
    if b.compared:
        _say(
            f"  mean score {b.mean_score_before:.4f} -> "
            f"{b.mean_score_after:.4f} ({b.mean_delta:+.4f}), pass rate "
            f"{_pct(b.pass_rate_before)} before"
        )
    for r in b.top_regressions:
        missing = ", ".join(r.missing_terms)
        _say(
            f"  [red]regressed[/red] {escape(r.case)}: {r.before:.4f} -> "
            f"{r.after:.4f}" + (f", missing: {escape(missing)}" if missing else "")
        )
    if b.warning:
        _say(f"[yellow]warning: {escape(b.warning)}[/yellow]")


@click.command()
@click.argument("file", required=False)
@_column_options
@click.option("--label-col", default=None, help="Column with the human label.")
@click.option(
    "--cut",
    type=float,
    default=None,
    help="For graded labels: values at or above the cut count as a pass.",
)
@click.option(
    "--by",
    type=click.Choice(calibrate_mod.METRICS),
    default="f1",
    show_default=True,
    help="Metric the suggested threshold maximises.",
)
@click.option(
    "--eval",
    "eval_name",
    default=None,
    help="A stored eval: its reviewed results count as labels, and FILE's rows (if any) "
    "are scored with its references and options.",
)
@click.option(
    "--apply", is_flag=True, help="Write the suggested threshold to the eval named by --eval."
)
@db_option(purpose="for --eval")
@json_flag("Print the report as JSON.")
@scorer_options
def calibrate(
    file: str | None,
    output_col: str,
    reference_cols: tuple[str, ...],
    input_col: str | None,
    id_col: str | None,
    fmt: str | None,
    no_quoting: bool,
    workers: int | None,
    on_error: str,
    label_col: str | None,
    cut: float | None,
    by: str,
    eval_name: str | None,
    apply: bool,
    db: str | None,
    as_json: bool,
    options: dict[str, object],
) -> None:
    """Choose a threshold from labelled examples: FILE with a label column, and/or the
    human reviews of a stored eval's results.

    Scores every row, sweeps the threshold and reports precision, recall, F1, accuracy and
    ROC AUC, and suggests the threshold that maximises F1 or accuracy. Labels are pass/fail,
    true/false, yes/no, 0/1, or a graded score with --cut. A review counts as a pass when
    its score is at or above the threshold of the result it reviews.

    \b
    Examples:
        simeval calibrate labelled.csv --label-col verdict
        simeval calibrate pairs.jsonl --label-col rating --cut 4 --by accuracy --json
        simeval calibrate --eval capital-answers --apply
        simeval calibrate more-labels.csv --label-col verdict --eval capital-answers
    """
    if file is None and eval_name is None:
        raise UserError(
            "give a labelled FILE (with --label-col), or --eval NAME to use its reviews"
        )
    if file is not None and label_col is None:
        raise UserError("--label-col is required with a FILE")
    if file is None and label_col is not None:
        raise UserError("--label-col needs a FILE")
    if apply and eval_name is None:
        raise UserError("--apply needs --eval NAME: the eval to write the threshold to")
    if eval_name is not None and (reference_cols or options):
        raise UserError(
            "with --eval, rows are scored with the eval's references and scorer options: "
            "leave out --reference-col and the scorer flags"
        )
    request = runs.CalibrationRequest(
        file,
        label_col=label_col,
        cut=cut,
        by=by,
        eval_name=eval_name,
        apply=apply,
        db=db,
        columns=_columns(output_col, reference_cols, input_col, id_col),
        options=options,
        fmt=fmt,
        quoting=not no_quoting,
        workers=workers,
        on_error=on_error,
    )
    bar = progress_bar(f"scoring {os.path.basename(file)}") if file else contextlib.nullcontext()
    with bar as progress:
        report = runs.calibrate_request(request, progress)
    if as_json:
        print_json(report.to_dict())
    else:
        _show_calibration(report)


def _threshold(t: float) -> str:
    return f"{t:.2f}" if round(t, 2) == t else f"{t:.4g}"


def _show_calibration(report: runs.CalibrationSummary) -> None:
    source = []
    if report.source:
        source.append(escape(report.source))
    if report.reviews and report.eval:
        source.append(f"{report.reviews:,} reviews of eval {escape(report.eval['name'])}")
    _say(
        f"{report.examples:,} labelled examples ({report.positives:,} pass, "
        f"{report.negatives:,} fail) from {' and '.join(source)}; "
        f"ROC AUC {report.roc_auc:.3f}"
    )
    if report.warning:
        _say(f"[yellow]warning: {escape(report.warning)}[/yellow]")
    table = Table(show_edge=False)
    for name in ("threshold", "precision", "recall", "F1", "accuracy"):
        table.add_column(name, justify="right")
    table.add_column("")
    marks: dict[float, list[str]] = {}
    rows: dict[float, dict[str, float]] = {}
    for r in report.table:
        if round(r["threshold"] * 10, 6) % 1 == 0:  # the 0.1 steps: enough to see the shape
            rows[r["threshold"]] = r
    rows[0.8] = report.at_default
    marks.setdefault(0.8, []).append("default")
    if report.eval:
        e = report.eval
        rows[e["threshold"]] = e["at_threshold"]
        marks.setdefault(e["threshold"], []).append(f"eval {escape(e['name'])} now")
    s = report.suggested
    rows[s["threshold"]] = s
    marks.setdefault(s["threshold"], []).insert(0, "[bold green]suggested[/]")
    for t in sorted(rows):
        r = rows[t]
        table.add_row(
            _threshold(t),
            f"{r['precision']:.3f}",
            f"{r['recall']:.3f}",
            f"{r['f1']:.3f}",
            f"{r['accuracy']:.3f}",
            ", ".join(marks.get(t, [])),
            style="bold" if t == s["threshold"] else None,
        )
    console.print(table)
    d = report.at_default
    _say(
        f"suggested threshold (max {report.by}): [bold]{_threshold(s['threshold'])}[/bold]"
        f" - F1 {s['f1']:.3f}, accuracy {s['accuracy']:.3f}; at the 0.80 default: "
        f"F1 {d['f1']:.3f}, accuracy {d['accuracy']:.3f}"
    )
    if report.skipped:
        _say(f"[yellow]skipped {report.skipped} rows[/yellow]")
    a = report.applied
    if a and not a["changed"]:
        _say(f"eval {escape(a['eval'])} already has threshold {_threshold(a['threshold'])}")
    elif a:
        _say(
            f"eval {escape(a['eval'])}: threshold {_threshold(a['threshold_before'])} -> "
            f"{_threshold(a['threshold'])} (version {a['version']})"
        )
        if a.get("pending_version") is not None:
            _say(
                f"[yellow]eval {escape(a['eval'])}: version {a['active_version']} keeps scoring "
                f"captures; version {a['pending_version']} (the new threshold) is pending: "
                "test it and activate it to switch over[/yellow]"
            )
    sys.stdout.flush()
