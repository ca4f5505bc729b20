"""``simeval capture``, ``simeval results ...`` (list, show, review, export) and ``simeval
trend``: what engines' outputs scored, over time. A thin layer over ``Service``; the result
filter flags (``--eval``, ``--passed/--failed``, ``--since``...) build the service's
``ResultFilter``, as the API's query string and the studio's form do.
"""

from __future__ import annotations

import functools
import getpass
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape
from rich.table import Table

from simeval.checks import load_json, read_capture_file
from simeval.cli.browse import cursor_option, page_json, print_cursors
from simeval.cli.common import (
    Group,
    UserError,
    console,
    db_option,
    dump,
    err_console,
    json_option,
    output_file,
    output_format,
    print_explanation,
    print_json,
    progress_bar,
    read_input,
    service_at,
    short,
    verdict,
)
from simeval.jsontypes import JSONObject

if TYPE_CHECKING:  # pydantic models load with the service, not with every command
    from simeval.service import ResultFilter
    from simeval.service.models import ResultOut, TrendOut

SPARKS = "▁▂▃▄▅▆▇█"


# -- capture ------------------------------------------------------------------------------------
@click.command("capture")
@click.argument("output", required=False)
@click.option("-i", "--input", "input_text", default=None, help="The input (prompt).")
@click.option("--input-file", default=None, help="Read the input from a file.")
@click.option("--output-file", default=None, help="Read the output from a file (- = stdin).")
@click.option("--conversation-id", default=None, help="Group captures of one conversation.")
@click.option("--metadata", default=None, help="A JSON object stored with the capture.")
@click.option("--at", "captured_at", default=None, help="Capture time (ISO 8601), default now.")
@click.option(
    "--file",
    "jsonl",
    default=None,
    help="Capture every line of a JSONL file: {input, output, conversation_id, metadata, at, "
    "capture_key}. Run again, it stores only the lines not stored yet.",
)
@click.option(
    "--again",
    is_flag=True,
    help="With --file: store the file's lines again, as new captures (lines with their own "
    "capture_key are still stored once).",
)
@click.option("--explain", is_flag=True, help="Explain failing results.")
@db_option
@json_option
def capture(
    output: str | None,
    input_text: str | None,
    input_file: str | None,
    output_file: str | None,
    conversation_id: str | None,
    metadata: str | None,
    captured_at: str | None,
    jsonl: str | None,
    again: bool,
    explain: bool,
    db: str | None,
    as_json: bool,
) -> None:
    """Store an engine OUTPUT and score it with every active eval in scope.

    The capture and its results are stored together or not at all. Texts over 1,000,000
    characters are refused (exit 2, nothing stored). With automatic evaluation off
    (`simeval settings --no-auto-eval`) captures are stored unscored.

    With --file every line is checked before the first is stored, then the lines are stored
    200 to a transaction. A line without its own capture_key is keyed by the file's content
    and its line number, so a run that was interrupted, run again on the same file, stores
    only the lines still missing; --again stores the whole file once more.

    \b
    Examples:
        simeval capture "The capital of France is Paris." -i "Capital of France?"
        simeval capture --output-file reply.txt --conversation-id c42 --json
        simeval capture --file captures.jsonl
        simeval capture --file captures.jsonl --again
    """
    if jsonl is not None:
        if output is not None or output_file or input_text or input_file or metadata:
            raise UserError("--file takes the captures from the file: give no OUTPUT or --input")
        _capture_file(jsonl, db, as_json, again)
        return
    if again:
        raise UserError("--again goes with --file")
    out = read_input(output, output_file, "output")
    if out is None:
        raise UserError("missing OUTPUT: give it as an argument or with --output-file")
    if not out.strip():
        # typed on a command line, an empty OUTPUT is a slip (an unset "$VARIABLE"): not stored
        raise UserError("OUTPUT is empty: give the engine's output to capture")
    prompt = read_input(input_text, input_file, "input") or ""
    meta = _metadata(metadata, "--metadata")
    with service_at(db) as svc:
        cap = svc.capture(
            prompt, out, conversation_id, meta, explain=explain, captured_at=captured_at
        )
    if as_json:
        print_json(dump(cap))
        return
    if not cap.evaluated:
        console.print(f"captured #{cap.id}, not scored: automatic evaluation is off")
        return
    if not cap.results:
        console.print(f"captured #{cap.id}; no active eval matched it")
        return
    table = Table("result", "eval", "version", "score", "pass", "threshold")
    for r in cap.results:
        table.add_row(
            str(r.id),
            escape(r.eval_name),
            str(r.eval_version),
            f"{r.score:.4f}",
            verdict(r.passed),
            f"{r.threshold:.2f}",
        )
    n = len(cap.results)
    console.print(f"captured #{cap.id}, scored by {n} active eval{'' if n == 1 else 's'}")
    console.print(table)
    for r in cap.results:
        if r.explanation:
            console.print(f"[bold]{escape(r.eval_name)}[/bold]:")
            print_explanation(r.explanation)


def _metadata(text: str | None, where: str) -> JSONObject | None:
    if text is None:
        return None
    try:
        value = load_json(text, where)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where} is not JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(value, dict):
        raise UserError(f"{where} must be a JSON object")
    return value


def _capture_file(path: str, db: str | None, as_json: bool, again: bool) -> None:
    # every line is checked before the first capture is stored
    rows = read_capture_file(_read_bytes(path, "captures"), path, keyed=not again)
    with (
        service_at(db) as svc,
        progress_bar(f"capturing {os.path.basename(path)}", counts=True) as progress,
    ):
        report = svc.capture_many(rows, progress)
    if as_json:
        print_json(report.model_dump())
        return
    if report.replayed and not report.captures:
        console.print(
            f"nothing new: all {report.replayed} captures of {escape(path)} were stored "
            "already (--again stores them once more)"
        )
        return
    line = (
        f"captured {report.captures} outputs: {report.results} results, "
        f"{report.passed} passed, {report.failed} failed"
    )
    if report.replayed:
        line += f"; {report.replayed} stored already, skipped"
    console.print(line)


def _read_bytes(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise UserError(f"{what} file not found: {path}") from None
    except IsADirectoryError:
        raise UserError(f"{what} path {path} is a directory, not a file") from None
    except PermissionError:
        raise UserError(f"{what} file {path} cannot be read (permission denied)") from None


# -- results ------------------------------------------------------------------------------------
@click.group(cls=Group)
def results() -> None:
    """List, review and export results.

    \b
    Example:
        simeval results list --eval capital --failed
        simeval results review 42 --score 0.9 --note "correct, phrased differently"
        simeval results export results.csv
    """


_FILTERS = ("eval_name", "passed", "reviewed", "since", "until", "run_id", "meta")


def _filters(func: Callable[..., object]) -> Callable[..., object]:
    """The result filter flags; the command receives them as ``where``, the service's
    ``ResultFilter``, as ``scorer_options`` hands over ``options``."""

    @click.option("--eval", "eval_name", default=None, help="Only this eval.")
    @click.option(
        "--passed/--failed", "passed", default=None, help="Only passing / failing (reviews win)."
    )
    @click.option(
        "--reviewed/--unreviewed", "reviewed", default=None, help="Only (un)reviewed results."
    )
    @click.option("--since", default=None, help="From this time: ISO 8601 or an age (7d).")
    @click.option("--until", default=None, help="Before this time: ISO 8601 or an age.")
    @click.option("--run", "run_id", type=int, default=None, help="Only this run's rows.")
    @click.option(
        "--meta",
        multiple=True,
        metavar="KEY=VALUE",
        help="Only captures with this metadata (repeatable; all must hold).",
    )
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> object:
        from simeval.service import ResultFilter

        flags = {n: kwargs.pop(n) for n in _FILTERS}
        flags["meta"] = list(flags["meta"]) or None
        kwargs["where"] = ResultFilter.parse(**flags)
        return func(*args, **kwargs)

    return wrapper


@results.command("list")
@_filters
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--offset", default=0, show_default=True, type=click.IntRange(0))
@cursor_option
@click.option("--explain", is_flag=True, help="Explain each failing result.")
@db_option
@json_option
def list_results(
    where: ResultFilter,
    limit: int,
    offset: int,
    cursor: str | None,
    explain: bool,
    db: str | None,
    as_json: bool,
) -> None:
    """List results, newest first. `pass` is the effective verdict: a review wins, and the
    automated score stays beside it. Page on with ``--cursor`` a page's next_cursor (the
    JSON's, or the line under the table).

    \b
    Examples:
        simeval results list --eval capital --failed --since 7d
        simeval results list --json --limit 1000 | jq -r .next_cursor
    """
    with service_at(db) as svc:
        page = svc.page_results(where, limit=limit, offset=offset, cursor=cursor, explain=explain)
        total = svc.count_results(where)
    rows = page.items
    if as_json:
        print_json(page_json("results", page, total, limit, offset))
        return
    if not rows:
        console.print("no results")
        print_cursors(page)
        return
    table = Table("id", "eval", "v", "score", "review", "pass", "output")
    table.columns[0].no_wrap = True
    table.add_column("time (UTC)", no_wrap=True)
    for r in rows:
        table.add_row(
            str(r.id),
            escape(r.eval_name or "-"),
            str(r.eval_version or "-"),
            f"{r.score:.4f}",
            f"{r.review.score:.2f}" if r.review else "",
            verdict(r.passed),
            escape(short(r.output, 40)),
            r.captured_at.strftime("%Y-%m-%d %H:%M"),
        )
    console.print(table)
    console.print(f"{len(rows)} of {total} results")
    print_cursors(page)
    if explain:
        for r in rows:
            if not r.passed and r.explanation:
                console.print(f"[bold]result {r.id}[/bold] ({escape(r.eval_name or '')}):")
                print_explanation(r.explanation)


def _print_result(r: ResultOut) -> None:
    console.print(
        f"[bold]result {r.id}[/bold]  eval {escape(r.eval_name or '-')} version "
        f"{r.eval_version or '-'}, {r.captured_at.strftime('%Y-%m-%d %H:%M:%S')} UTC"
    )
    line = f"score {r.score:.4f} {verdict(r.passed)} (threshold {r.threshold:.2f})"
    if r.review is not None:
        line += (
            f", reviewed {r.review.score:.2f} (automated verdict "
            f"{'pass' if r.automated_passed else 'fail'})"
        )
        if r.review.reviewer:
            line += f" by {escape(r.review.reviewer)}"
    console.print(line)
    if r.review is not None and r.review.note:
        console.print(f"review note: {escape(r.review.note)}")
    if r.conversation_id:
        console.print(f"conversation: {escape(r.conversation_id)}")
    console.print(f"input: {escape(short(r.input, 200))}")
    console.print(f"output: {escape(short(r.output, 200))}")
    if r.matched_reference is not None:
        console.print(f"matched reference: {escape(short(r.matched_reference, 200))}")
    print_explanation(r.explanation)


@results.command("show")
@click.argument("result_id")
@db_option
@json_option
def show_result(result_id: str, db: str | None, as_json: bool) -> None:
    """Show one result with its explanation.

    \b
    Example:
        simeval results show 42
    """
    with service_at(db) as svc:
        r = svc.get_result(result_id)
    if as_json:
        print_json(dump(r))
    else:
        _print_result(r)


def _os_user() -> str | None:
    """The OS user name (``getpass.getuser``: $LOGNAME, $USER, ... or the password entry),
    None when there is none (a container running as a uid with no name)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


@results.command("review")
@click.argument("result_id")
@click.option("--score", "value", required=True, help="The reviewer's score in [0, 1].")
@click.option("--note", default="", help="Why.")
@click.option(
    "--reviewer",
    default=None,
    help="Who reviewed, kept with the review. Default: your OS user name; '' records none.",
)
@db_option
@json_option
def review_result(
    result_id: str, value: str, note: str, reviewer: str | None, db: str | None, as_json: bool
) -> None:
    """Override result RESULT_ID's score: the review decides pass/fail in listings, trends
    and exports; the automated score is kept beside it. A new review replaces the old one.

    \b
    Example:
        simeval results review 42 --score 0.9 --note "correct, phrased differently"
    """
    with service_at(db) as svc:
        r = svc.review_result(result_id, value, note, _os_user() if reviewer is None else reviewer)
    if as_json:
        print_json(dump(r))
        return
    console.print(
        f"result {r.id}: {'pass' if r.automated_passed else 'fail'} -> "
        f"{verdict(r.passed)} (automated score {r.score:.4f}, reviewed "
        f"{r.review.score if r.review else value}, threshold {r.threshold:.2f})"
    )


@results.command("export")
@click.argument("file", required=False)
@click.option("--format", "fmt", type=click.Choice(["csv", "json"]), help="Default: by suffix.")
@_filters
@db_option
def export_results(
    file: str | None,
    fmt: str | None,
    where: ResultFilter,
    db: str | None,
) -> None:
    """Export results to FILE (default stdout) as CSV or JSON, oldest first, streamed (the
    memory it holds does not grow with the results).

    Columns: result_id, capture_id, run_id, run_status, conversation_id, captured_at,
    eval_name, eval_type, eval_version, input, output, score (automated), pass (reviews win),
    automated_pass, threshold, human_override_score, human_override_note, reviewed_at,
    fingerprint, matched_reference, metadata, reasoning (the verdict in one line, a failing
    result's missing terms named), missing_required. A file is written whole or not at all.

    \b
    Examples:
        simeval results export results.csv --eval capital --since 30d
        simeval results export --format json | jq length
    """
    kind = output_format(file, fmt, ("csv", "json"), "csv")
    with service_at(db) as svc:
        total = svc.count_results(where)
        with progress_bar("exporting results", counts=True) as bar, output_file(file) as fh:
            progress = None if bar is None else lambda done: bar(done, total)
            n = svc.write_export(fh, kind, progress=progress, where=where)
    if file and file != "-":
        err_console.print(f"wrote {n} results to {escape(file)}")


# -- trend --------------------------------------------------------------------------------------
def sparkline(values: Sequence[float | None], breaks: Sequence[bool] = ()) -> str:
    """Values in [0, 1] as block characters on a fixed 0-1 scale (so two lines compare);
    ``│`` before a bucket marks a break in comparability.

    >>> sparkline([0.0, 0.5, 1.0])
    '▁▅█'
    >>> sparkline([0.2, 0.9], [False, True])
    '▂│▇'
    """
    out = []
    for i, v in enumerate(values):
        if i and i < len(breaks) and breaks[i]:
            out.append("│")
        if v is None:
            out.append(" ")
        else:
            clamped = min(1.0, max(0.0, v))
            out.append(SPARKS[min(len(SPARKS) - 1, int(clamped * (len(SPARKS) - 1) + 0.5))])
    return "".join(out)


def _print_trend(tr: TrendOut) -> None:
    if not tr.buckets:
        console.print(f"no captured results for eval {escape(repr(tr.eval_name))} in this range")
        return
    table = Table("start (UTC)", "count", "mean score", "pass rate", "reviewed", "versions", "note")
    fmt = "%Y-%m-%d %H:00" if tr.bucket == "hour" else "%Y-%m-%d"
    for b in tr.buckets:
        notes = []
        if b.fingerprint_break:
            notes.append("[yellow]scorer changed: not comparable[/yellow]")
        if b.version_change:
            notes.append("version change")
        table.add_row(
            b.start.strftime(fmt),
            str(b.count),
            f"{b.mean_score:.4f}",
            f"{b.pass_rate:.0%}",
            str(b.reviewed),
            ", ".join(str(v) for v in b.versions),
            "; ".join(notes),
        )
    console.print(
        f"eval {escape(repr(tr.eval_name))}, per {tr.bucket}, threshold {tr.threshold:.2f}"
    )
    console.print(table)
    breaks = [b.fingerprint_break for b in tr.buckets]
    console.print(f"mean score {sparkline([b.mean_score for b in tr.buckets], breaks)}")
    console.print(f"pass rate  {sparkline([b.pass_rate for b in tr.buckets], breaks)}")
    if any(breaks[1:]):
        console.print("│ marks a scorer change: scores on either side are not comparable")


@click.command("trend")
@click.argument("name")
@click.option(
    "--bucket", type=click.Choice(["hour", "day", "week"]), default="day", show_default=True
)
@click.option("--since", default=None, help="From this time: ISO 8601 or an age (30d).")
@click.option("--until", default=None, help="Before this time: ISO 8601 or an age.")
@db_option
@json_option
def trend(
    name: str, bucket: str, since: str | None, until: str | None, db: str | None, as_json: bool
) -> None:
    """Eval NAME's captured results over time: count, mean score and pass rate per hour, day
    or week (reviews win), the versions in force, and scorer changes flagged as breaks.

    \b
    Example:
        simeval trend capital --bucket week --since 90d
    """
    with service_at(db) as svc:
        tr = svc.trend(name, bucket=bucket, since=since, until=until)
    if as_json:
        print_json(dump(tr))
    else:
        _print_trend(tr)


COMMANDS: tuple[click.Command, ...] = (capture, results, trend)
