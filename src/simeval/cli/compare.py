"""``simeval compare``, ``simeval runs`` and ``simeval rescore``: thin shells over the service."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
from rich.markup import escape
from rich.table import Table

from simeval.checks import check_id
from simeval.cli.browse import cursor_option, page_json, print_cursors
from simeval.cli.common import (
    Group,
    console,
    db_option,
    decimal,
    json_option,
    percent,
    print_json,
    service_at,
    short,
)
from simeval.runs import iter_results_file

if TYPE_CHECKING:  # pydantic models load with the service, not with every command
    from simeval.service.models import CompareReport


def _ci(ci: list[float] | None, pct: bool = False) -> str:
    if ci is None:
        return "-"
    if pct:
        return f"[{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}] pts"
    return f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"


def print_compare(report: CompareReport) -> None:
    """The comparison as a table per eval and the regressed cases."""
    console.print(f"A: {escape(report.a)}", soft_wrap=True)
    console.print(f"B: {escape(report.b)}", soft_wrap=True)
    console.print(f"cases {escape(report.pairing)}", soft_wrap=True)
    if report.sampled:
        console.print(
            f"sampled: a side held more than {report.limit:,} results; compared on "
            f"{escape(report.sampled)}",
            soft_wrap=True,
        )
    for e in report.evals:
        a, b = e.a, e.b
        console.print(f"\n[bold]{escape(e.eval)}[/bold]: {e.verdict}", soft_wrap=True)
        table = Table("", "n", "pass rate", "mean score")
        for key, side in (("A", a), ("B", b)):
            n = str(side.n) if side.total in (None, side.n) else f"{side.n} of {side.total}"
            table.add_row(key, n, percent(side.pass_rate), decimal(side.mean_score))
        if e.score_diff is not None and e.pass_rate_diff is not None:
            table.add_row(
                # paired: the differences are those of the paired subset, not of the sides
                "B − A, paired subset" if e.paired else "B − A",
                f"{e.pairs} paired" if e.paired else "unpaired",
                f"{100 * e.pass_rate_diff:+.1f} pts {_ci(e.pass_rate_ci, True)}",
                f"{e.score_diff:+.3f} {_ci(e.score_ci)}",
            )
        console.print(table)
        if e.repeated_pairs:
            console.print(
                f"{e.repeated_pairs} pairs share a repeated key: paired in order (key plus "
                "occurrence)"
            )
        if e.mcnemar_p is not None:
            console.print(
                f"pass→fail {e.flips_to_fail}, fail→pass {e.flips_to_pass}, "
                f"McNemar p = {e.mcnemar_p:.4f}"
            )
        for c in e.regressed:
            flip = " (pass→fail)" if c.passed_a and not c.passed_b else ""
            missing = ", ".join(c.missing_terms[:8])
            console.print(
                f"  {c.score_a:.3f} → {c.score_b:.3f}{flip}  {escape(c.case)}"
                + (f"  missing: {escape(missing)}" if missing else ""),
                soft_wrap=True,
            )
        more = (e.regressed_count or 0) - len(e.regressed)
        if more > 0:
            console.print(f"  … {more} more regressed")
    console.print(f"\nverdict: {report.verdict}")


@click.command("compare")
@click.argument("a")
@click.argument("b")
@click.option("--eval", "eval_name", default=None, help="Only this eval.")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0))
@click.option(
    "--resamples",
    default=2000,
    show_default=True,
    type=click.IntRange(100, 20_000),
    help="Bootstrap resamples.",
)
@click.option(
    "--top",
    default=10,
    show_default=True,
    type=click.IntRange(0, 1000),
    help="Regressed cases listed per eval.",
)
@db_option
@json_option
def compare(
    a: str,
    b: str,
    eval_name: str | None,
    seed: int,
    resamples: int,
    top: int,
    db: str | None,
    as_json: bool,
) -> None:
    """Compare side B with side A per eval: pass rate and mean score with 95% bootstrap
    intervals (paired on the same case id or input, McNemar on pass/fail flips), a verdict,
    and the cases that regressed most with their missing terms.

    A side is run:ID or run:latest (a stored run), a results file from `simeval run
    --output`, or captures:KEY=VALUE,... (captured results; eval=, since=, until= select,
    any other KEY=VALUE is capture metadata). Cases pair by case id (else input) plus
    occurrence: a key repeated on a side pairs in order. Exit code 1 when B is significantly
    worse on any eval (a CI gate; lower scores at the same pass rate are not), 0 otherwise, 2
    on bad input.

    \b
    Examples:
        simeval compare captures:engine=v1 captures:engine=v2,since=7d
        simeval compare run:12 run:latest --eval capital
        simeval compare baseline.jsonl results.jsonl --json
    """
    with service_at(db) as svc:
        report = svc.compare(
            a,
            b,
            eval_name=eval_name,
            seed=seed,
            resamples=resamples,
            keep=top,
            read_file=iter_results_file,
        )
    if as_json:
        print_json(report.model_dump())
    else:
        print_compare(report)
    raise SystemExit(1 if report.worse else 0)


@click.group(cls=Group)
def runs() -> None:
    """Data-set runs stored with `simeval run --store`: list, show, delete.

    A run killed while its rows were being stored is shown as ``interrupted``: its rows are
    incomplete; delete it and run the data set again.

    \b
    Example:
        simeval runs list
        simeval runs show 3
        simeval runs delete 3
    """


@runs.command("list")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 1000))
@click.option("--offset", default=0, show_default=True, type=click.IntRange(0))
@cursor_option
@db_option
@json_option
def list_runs(limit: int, offset: int, cursor: str | None, db: str | None, as_json: bool) -> None:
    """Stored runs, newest first: rows, pass rate, mean score, status; page on with
    ``--cursor`` a page's next_cursor.

    \b
    Example:
        simeval runs list --json
    """
    with service_at(db) as svc:
        page = svc.page_runs(limit=limit, offset=offset, cursor=cursor)
        total = svc.count_runs()
    items = page.items
    if as_json:
        print_json(page_json("runs", page, total, limit, offset))
        return
    if not items:
        console.print("no stored runs (simeval run FILE --store)")
        print_cursors(page)
        return
    table = Table("id", "name", "time (UTC)", "rows", "pass rate", "mean", "status")
    for column in table.columns:
        column.no_wrap = True
    for r in items:
        table.add_row(
            str(r.id),
            escape(r.name),
            r.created_at.strftime("%Y-%m-%d %H:%M"),
            str(r.results),
            percent(r.pass_rate),
            decimal(r.mean_score),
            r.status,
        )
    console.print(table)
    print_cursors(page)


@runs.command("show")
@click.argument("run_id", type=int)
@click.option("--worst", default=5, show_default=True, type=click.IntRange(0, 1000))
@db_option
@json_option
def show_run(run_id: int, worst: int, db: str | None, as_json: bool) -> None:
    """A stored run's summary and its worst rows.

    \b
    Example:
        simeval runs show 3 --worst 10
    """
    with service_at(db) as svc:
        run = svc.get_run(run_id)
        rows = svc.run_worst(run_id, worst) if worst else []
    if as_json:
        print_json(
            {**run.model_dump(mode="json"), "worst": [r.model_dump(mode="json") for r in rows]}
        )
        return
    console.print(
        f"run {run.id} {escape(run.name)} ({run.status}), {run.created_at:%Y-%m-%d %H:%M} UTC, "
        f"{escape(run.source)}",
        soft_wrap=True,
    )
    console.print(
        f"{run.results} rows, pass rate {percent(run.pass_rate)}, "
        f"mean score {decimal(run.mean_score)}"
    )
    if run.status == "interrupted":
        console.print("interrupted while storing: its rows are incomplete (simeval runs delete)")
    for r in rows:
        console.print(
            f"  {r.score:.3f} {'PASS' if r.passed else 'FAIL'}  {escape(r.eval_name or '-')}  "
            f"{escape(short(r.input, 80))}",
            soft_wrap=True,
        )


@click.command("rescore")
@click.option("--eval", "eval_name", required=True, help="The eval to score past captures with.")
@click.option("--since", default="7d", show_default=True, help="ISO time or an age (7d).")
@click.option("--until", default=None, help="ISO time or an age.")
@click.option(
    "--refresh",
    is_flag=True,
    help="Also replace its stored results of another scorer (e.g. before the bands scale).",
)
@db_option
@json_option
def rescore(
    eval_name: str, since: str, until: str | None, refresh: bool, db: str | None, as_json: bool
) -> None:
    """Store results of eval NAME for past captures it has not scored (captures stored while
    automatic evaluation was off, or before the eval existed), once per capture and eval, with
    the version in force. Running it again stores nothing new. With --refresh, results it
    stored with another scorer fingerprint (an older scale or options) are scored again and
    replaced; without it stored results keep what they were.

    \b
    Example:
        simeval rescore --eval capital --since 7d
        simeval rescore --eval capital --since 90d --refresh
    """
    with service_at(db) as svc:
        report = svc.rescore(eval_name, since=since, until=until, refresh=refresh)
    if as_json:
        print_json(report.model_dump())
        return
    console.print(
        f"eval {escape(report.eval)} version {report.version}: {report.added} results "
        f"stored ({report.passed} passed"
        + (f", {report.replaced} replaced" if report.replaced else "")
        + f") over {report.scanned} captures",
        soft_wrap=True,
    )


@runs.command("delete")
@click.argument("run_id")
@db_option
@json_option
def delete_run(run_id: str, db: str | None, as_json: bool) -> None:
    """Delete a stored run and its rows (not while it is still being stored).

    \b
    Example:
        simeval runs delete 3
    """
    with service_at(db) as svc:
        run = svc.delete_run(check_id(run_id, "run"))
    if as_json:
        print_json(run.model_dump(mode="json"))
        return
    console.print(f"deleted run {run.id} ({run.results} rows)")


COMMANDS: tuple[click.Command, ...] = (compare, runs, rescore)
