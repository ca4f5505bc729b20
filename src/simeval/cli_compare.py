"""``simeval compare``, ``simeval runs`` and ``simeval rescore``: thin shells over the service."""

from __future__ import annotations

from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from simeval.cli_common import console, print_json
from simeval.cli_evals import _service, db_option, json_option


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _ci(ci: list[float] | None, pct: bool = False) -> str:
    if ci is None:
        return "-"
    if pct:
        return f"[{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}] pts"
    return f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"


def print_compare(report: dict[str, Any]) -> None:
    """The comparison as a table per eval and the regressed cases."""
    console.print(f"A: {escape(report['a'])}", soft_wrap=True)
    console.print(f"B: {escape(report['b'])}", soft_wrap=True)
    for e in report["evals"]:
        a, b = e["a"], e["b"]
        console.print(f"\n[bold]{escape(e['eval'])}[/bold]: {e['verdict']}", soft_wrap=True)
        table = Table("", "n", "pass rate", "mean score")
        table.add_row("A", str(a["n"]), _pct(a["pass_rate"]), _num(a["mean_score"]))
        table.add_row("B", str(b["n"]), _pct(b["pass_rate"]), _num(b["mean_score"]))
        if e.get("score_diff") is not None:
            table.add_row(
                "B − A",
                f"{e['pairs']} paired" if e["paired"] else "unpaired",
                f"{100 * e['pass_rate_diff']:+.1f} pts {_ci(e['pass_rate_ci'], True)}",
                f"{e['score_diff']:+.3f} {_ci(e['score_ci'])}",
            )
        console.print(table)
        if e.get("mcnemar_p") is not None:
            console.print(
                f"pass→fail {e['flips_to_fail']}, fail→pass {e['flips_to_pass']}, "
                f"McNemar p = {e['mcnemar_p']:.4f}"
            )
        for c in e.get("regressed", []):
            flip = " (pass→fail)" if c["passed_a"] and not c["passed_b"] else ""
            missing = ", ".join(c["missing_terms"][:8])
            console.print(
                f"  {c['score_a']:.3f} → {c['score_b']:.3f}{flip}  {escape(c['case'])}"
                + (f"  missing: {escape(missing)}" if missing else ""),
                soft_wrap=True,
            )
        if e.get("regressed_count", 0) > len(e.get("regressed", [])):
            console.print(f"  … {e['regressed_count'] - len(e['regressed'])} more regressed")
    console.print(f"\nverdict: {report['verdict']}")


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
    any other KEY=VALUE is capture metadata). Exit code 1 when B is significantly worse on any
    eval (a CI gate), 0 otherwise, 2 on bad input.

    \b
    Examples:
        simeval compare captures:engine=v1 captures:engine=v2,since=7d
        simeval compare run:12 run:latest --eval capital
        simeval compare baseline.jsonl results.jsonl --json
    """
    with _service(db) as svc:
        report = svc.compare(a, b, eval_name=eval_name, seed=seed, resamples=resamples, keep=top)
    if as_json:
        print_json(report)
    else:
        print_compare(report)
    raise SystemExit(1 if report["worse"] else 0)


COMMANDS: tuple[click.Command, ...] = (compare,)
