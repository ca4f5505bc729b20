"""The ``simeval`` command line: a thin layer over the library and the service."""

from __future__ import annotations

import click

from simeval import __version__
from simeval.cli.common import (
    ROOT_DB,
    ROOT_JSON,
    Group,
    UserError,
    console,
    json_flag,
    print_json,
    read_input,
    scorer_options,
)
from simeval.scoring.options import DEFAULT_THRESHOLD, check_threshold
from simeval.scoring.scorer import get_scorer


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="simeval")
@click.option(
    "--db",
    "root_db",
    default=None,
    metavar="PATH|URL",
    help="The database of the command that follows, as if given to it (its own --db wins).",
)
@click.option(
    "--json",
    ROOT_JSON,
    is_flag=True,
    help="Print JSON, as if --json were given to the command that follows.",
)
@click.pass_context
def cli(ctx: click.Context, root_db: str | None, root_json: bool) -> None:
    """simeval: score LLM and engine output against reference answers, offline.

    \b
    Example:
        simeval score "Paris is the capital." "The capital of France is Paris."
    """
    ctx.meta[ROOT_DB] = root_db


@cli.command()
@click.argument("texts", nargs=-1)
@click.option(
    "--output-file", type=str, default=None, help="Read the output from a file (- = stdin)."
)
@click.option(
    "--reference-file",
    "reference_files",
    multiple=True,
    help="Read a reference from a file (repeatable).",
)
@click.option(
    "-t",
    "--threshold",
    default=str(DEFAULT_THRESHOLD),
    show_default=True,
    help="Minimum score that passes.",
)
@click.option("-i", "--input", "input_text", default=None, help="The question the output answers.")
@click.option("--input-file", default=None, help="Read the question from a file (- = stdin).")
@click.option("--explain", is_flag=True, help="Show the terms behind the score.")
@json_flag("Print the result as JSON.")
@scorer_options
def score(
    texts: tuple[str, ...],
    output_file: str | None,
    reference_files: tuple[str, ...],
    threshold: str,
    input_text: str | None,
    input_file: str | None,
    explain: bool,
    as_json: bool,
    options: dict[str, object],
) -> None:
    """Score OUTPUT against one or more REFERENCE answers.

    With the question (--input), the terms it contains count at --input-weight (default 0.5)
    in both texts. Exit code 0 when the score is at or above the threshold, 1 below it, 2 on
    bad input.

    \b
    Examples:
        simeval score "The sky is blue." "The sky looks blue today." --explain
        simeval score "Paris." "Paris is the capital." -i "What is the capital of France?"
        simeval score --output-file answer.txt --reference-file gold.txt -t 0.7
        echo "some output" | simeval score - "the reference" --json
    """
    limit = check_threshold(threshold)
    question = read_input(input_text, input_file, "input")
    args = list(texts)
    output = read_input(
        None if output_file else (args.pop(0) if args else None), output_file, "output"
    )
    if output is None:
        raise UserError("missing OUTPUT: give it as the first argument or with --output-file")
    refs: list[str] = [read_input(r, None, "reference") or "" for r in args]
    refs += [read_input(None, p, "reference") or "" for p in reference_files]
    if not refs:
        raise UserError("missing REFERENCE: give it as an argument or with --reference-file")
    scorer = get_scorer(**options)
    result = scorer.explain(output, refs, input=question)
    # a required term (--require) missing fails the output whatever its score
    passed = result.score >= limit and not result.missing_required
    if as_json:
        data = {
            "score": result.score,
            "pass": passed,
            "threshold": limit,
            "matched_reference": result.matched_reference,
            "fingerprint": scorer.fingerprint,
            "options": scorer.describe(),
            "missing_required": result.missing_required,
        }
        if explain:
            data["explanation"] = {
                k: result.to_dict()[k]
                for k in (
                    "cosine",
                    "scale",
                    "shared",
                    "missing",
                    "extra",
                    "reason",
                    "demoted",
                    "negation",
                    "coverage",
                    "veto",
                )
            }
        elif result.reason:
            data["reason"] = result.reason
        print_json(data)
    else:
        verdict = "[green]PASS[/green]" if passed else "[red]FAIL[/red]"
        line = f"{result.score:.4f} {verdict} (threshold {limit:.2f})"
        if len(refs) > 1:
            line += f", best match: reference {result.matched_reference + 1}"
        console.print(line)
        if result.reason and not explain:
            console.print(f"reason: {result.reason}")
        if result.missing_required and not explain:
            console.print("fails: required term missing: " + ", ".join(result.missing_required))
        if explain:
            if result.scale != "cosine" and result.cosine is not None:
                console.print(
                    f"cosine {result.cosine:.4f} → score {result.score:.4f}", markup=False
                )
            console.print(
                str(result).split("\n", 1)[1] if "\n" in str(result) else "", markup=False
            )
    raise SystemExit(0 if passed else 1)


def _register() -> None:
    from simeval.cli import bench as cli_bench
    from simeval.cli import run as cli_run

    cli.add_command(cli_bench.bench)
    cli.add_command(cli_run.run)
    cli.add_command(cli_run.calibrate)

    from simeval.cli import serve as cli_serve

    cli.add_command(cli_serve.serve)

    from simeval.cli import proxy as cli_proxy

    cli.add_command(cli_proxy.proxy)

    from simeval.cli import alerts as cli_alerts
    from simeval.cli import browse as cli_browse
    from simeval.cli import compare as cli_compare
    from simeval.cli import datasets as cli_datasets
    from simeval.cli import evals as cli_evals
    from simeval.cli import report as cli_report
    from simeval.cli import results as cli_results
    from simeval.cli import settings as cli_settings
    from simeval.cli import users as cli_users

    modules = (cli_evals, cli_results, cli_browse, cli_settings, cli_compare, cli_datasets)
    for module in (*modules, cli_alerts, cli_report, cli_users):
        for command in module.COMMANDS:
            cli.add_command(command)


_register()


def main() -> None:
    """Entry point of the ``simeval`` console script."""
    cli(prog_name="simeval")
