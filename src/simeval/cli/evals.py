"""``simeval evals ...``: define, test, activate, back-test, export and import evals. A thin
layer over ``Service``; captures and results are in ``cli.results``, settings and retention in
``cli.settings``.

Every command takes ``--db PATH`` (a SQLite file or a database URL; else
``SIMEVAL_DATABASE_URL``, else the per-user default file) and, where it prints data,
``--json``. Exit codes: 0 done, 1 a failed test or gate (``evals test`` below the threshold,
``evals activate`` refused, ``evals import`` that could not activate an eval), 2 bad input with
a one-line error and nothing written.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape
from rich.table import Table

from simeval.checks import read_text_file
from simeval.cli.common import (
    Group,
    UserError,
    console,
    db_option,
    decimal,
    dump,
    err_console,
    json_option,
    output_file,
    output_format,
    percent,
    print_explanation,
    print_json,
    progress_bar,
    read_input,
    scorer_options,
    service_at,
    short,
    verdict,
)
from simeval.errors import Conflict
from simeval.scoring.options import DEFAULT_THRESHOLD

if TYPE_CHECKING:  # pydantic models load with the service, not with every command
    from simeval.service.models import EvalOut, TestOut


def _references(texts: Sequence[str], files: Sequence[str]) -> list[str] | None:
    refs = list(texts)
    for path in files:
        refs.append(read_input(None, path, "reference") or "")
    return refs or None


def _print_eval(ev: EvalOut) -> None:
    console.print(
        f"[bold]{escape(ev.name)}[/bold]  {ev.status}, version {ev.version}, threshold "
        f"{ev.threshold:.2f} ({ev.strictness}), fingerprint {ev.fingerprint}"
    )
    if ev.pending_version is not None:
        console.print(
            f"  active version {ev.active_version} scores captures; version "
            f"{ev.pending_version} (below) is pending: test it, then activate to switch over"
        )
    for i, ref in enumerate(ev.references, 1):
        console.print(f"  reference {i}: {escape(short(ref, 100))}")
    if ev.input_scope is not None:
        console.print(f"  input scope: {escape(ev.input_scope)}")
    if ev.options:
        opts = ", ".join(f"{k}={v}" for k, v in sorted(ev.options.items()))
        console.print(f"  scorer options: {escape(opts)}")
    if ev.last_test is not None:
        t = ev.last_test
        console.print(f"  last test: {t.score:.4f} {verdict(t.passed)}")
    if ev.stats is not None and ev.stats.results:
        st = ev.stats
        console.print(
            f"  results: {st.results}, pass rate {st.pass_rate or 0:.0%}, "
            f"mean score {st.mean_score or 0:.4f}"
        )
    if ev.activation_blocker and (ev.status != "active" or ev.pending_version is not None):
        console.print(f"  not activatable: {escape(ev.activation_blocker)}")


def _print_test(test: TestOut) -> None:
    console.print(
        f"{test.score:.4f} {verdict(test.passed)} (threshold {test.threshold:.2f}, "
        f"eval {escape(test.eval_name)} version {test.version})"
    )
    if not test.in_scope:
        console.print("note: the sample input is outside the eval's input scope")
    print_explanation(test.explanation)


# -- evals --------------------------------------------------------------------------------------
@click.group(cls=Group)
def evals() -> None:
    """Define, test and activate similarity evals.

    \b
    Example:
        simeval evals create capital -r "Paris is the capital of France." -t 0.8
        simeval evals test capital "The capital of France is Paris."
        simeval evals activate capital
    """


@evals.command("list")
@click.option(
    "--status", type=click.Choice(["draft", "active", "archived"]), help="Only this status."
)
@click.option("--all", "include_archived", is_flag=True, help="Include archived evals.")
@db_option
@json_option
def list_evals(status: str | None, include_archived: bool, db: str | None, as_json: bool) -> None:
    """List evals with their status, threshold and results so far.

    \b
    Example:
        simeval evals list --status active --json
    """
    with service_at(db) as svc:
        rows = svc.list_evals(status=status, include_archived=include_archived)
    if as_json:
        print_json([dump(e) for e in rows])
        return
    if not rows:
        console.print("no evals yet: create one with `simeval evals create NAME -r REFERENCE`")
        return
    table = Table("name", "status", "version", "threshold", "refs", "scope", "results", "pass")
    for e in rows:
        st = e.stats
        table.add_row(
            escape(e.name),
            e.status,
            str(e.version),
            f"{e.threshold:.2f} {e.strictness}",
            str(len(e.references)),
            escape(short(e.input_scope, 24)) if e.input_scope else "-",
            str(st.results) if st else "0",
            f"{st.pass_rate:.0%}" if st and st.pass_rate is not None else "-",
        )
    console.print(table)


@evals.command("create")
@click.argument("name")
@click.option(
    "-r", "--reference", "references", multiple=True, help="A reference answer (repeatable)."
)
@click.option(
    "--reference-file",
    "reference_files",
    multiple=True,
    help="A reference from a file (repeatable).",
)
@click.option(
    "-t",
    "--threshold",
    default=f"{DEFAULT_THRESHOLD:.2f}",
    show_default=True,
    help="Minimum passing score.",
)
@click.option("--scope", default=None, help="Fire only on captures whose input is this text.")
@scorer_options
@db_option
@json_option
def create_eval(
    name: str,
    references: tuple[str, ...],
    reference_files: tuple[str, ...],
    threshold: str,
    scope: str | None,
    options: dict[str, object],
    db: str | None,
    as_json: bool,
) -> None:
    """Create a draft eval NAME with one or more reference answers.

    The best-matching reference scores. A new eval is a draft: test it, then activate it.

    \b
    Examples:
        simeval evals create capital -r "Paris is the capital of France." -t 0.8
        simeval evals create refund --reference-file refund.txt --scope "How do I get a refund?"
    """
    refs = _references(references, reference_files)
    if refs is None:
        raise UserError("give at least one reference answer with --reference or --reference-file")
    with service_at(db) as svc:
        ev = svc.create_eval(name, refs, threshold=threshold, input_scope=scope, options=options)
    if as_json:
        print_json(dump(ev))
        return
    console.print(
        f"created eval {escape(repr(ev.name))} (draft, version 1, threshold {ev.threshold:.2f} "
        f"{ev.strictness}); next: simeval evals test {escape(_quote(ev.name))} OUTPUT"
    )


def _quote(name: str) -> str:
    return shlex.quote(name)


@evals.command("show")
@click.argument("name")
@db_option
@json_option
def show_eval(name: str, db: str | None, as_json: bool) -> None:
    """Show an eval: its current version, latest test, results so far and every version.

    \b
    Example:
        simeval evals show capital --json
    """
    with service_at(db) as svc:
        ev = svc.get_eval(name)
        versions = svc.eval_versions(ev.id)
    if as_json:
        data = dump(ev)
        data["versions"] = [dump(v) for v in versions]
        print_json(data)
        return
    _print_eval(ev)
    table = Table("version", "created", "changes")
    for v in versions:
        table.add_row(
            str(v.version), v.created_at.strftime("%Y-%m-%d %H:%M"), escape(_changes(v.changes))
        )
    console.print(table)


def _changes(changes: dict[str, Any]) -> str:
    if changes.get("created"):
        return "created"
    parts = []
    for key, change in changes.items():
        if key == "fingerprint":
            continue
        if key in ("threshold", "status", "name"):
            parts.append(f"{key} {change['from']} -> {change['to']}")
        else:
            parts.append(key)
    return ", ".join(parts)


@evals.command("edit")
@click.argument("name")
@click.option("--name", "new_name", default=None, help="Rename the eval.")
@click.option(
    "-r", "--reference", "references", multiple=True, help="Replace the references (repeatable)."
)
@click.option("--reference-file", "reference_files", multiple=True, help="A reference from a file.")
@click.option("-t", "--threshold", default=None, help="New threshold in [0, 1].")
@click.option("--scope", default=None, help="New input scope.")
@click.option("--no-scope", is_flag=True, help="Remove the input scope (fire on every capture).")
@click.option("--reset-options", is_flag=True, help="Back to the default scorer options.")
@scorer_options
@db_option
@json_option
def edit_eval(
    name: str,
    new_name: str | None,
    references: tuple[str, ...],
    reference_files: tuple[str, ...],
    threshold: str | None,
    scope: str | None,
    no_scope: bool,
    reset_options: bool,
    options: dict[str, object],
    db: str | None,
    as_json: bool,
) -> None:
    """Change an eval; every change makes a new version that records what changed.

    Scorer options given here are merged into the eval's own. Changing what scores an active
    eval (references, threshold, scope, options) makes the new version pending: the active
    version keeps scoring captures until a test of the new one passes and it is activated.

    \b
    Examples:
        simeval evals edit capital --threshold 0.7
        simeval evals edit capital -r "Paris is France's capital." -r "The capital is Paris."
    """
    from simeval.service import UNSET

    if scope is not None and no_scope:
        raise UserError("give --scope or --no-scope, not both")
    refs = _references(references, reference_files)
    with service_at(db) as svc:
        before = svc.get_eval(name)
        new_options: dict[str, object] | None = None
        if reset_options:
            new_options = dict(options)
        elif options:
            new_options = {**before.options, **options}
        ev = svc.edit_eval(
            before.id,
            new_name=new_name,
            references=refs,
            threshold=threshold,
            input_scope=None if no_scope else (scope if scope is not None else UNSET),
            options=new_options,
        )
        changes = svc.eval_versions(ev.id)[-1].changes if ev.version != before.version else {}
    if as_json:
        data = dump(ev)
        data["changes"] = changes
        print_json(data)
        return
    if not changes:
        console.print(f"no change: eval {escape(repr(ev.name))} stays at version {ev.version}")
        return
    console.print(
        f"eval {escape(repr(ev.name))} is now version {ev.version} ({escape(_changes(changes))})"
    )
    if ev.pending_version is not None:
        console.print(
            f"version {ev.active_version} keeps scoring captures; version {ev.pending_version} "
            f"is pending: test it, then `simeval evals activate {_quote(ev.name)}` switches over"
        )


@evals.command("test")
@click.argument("name")
@click.argument("output", required=False)
@click.option("--output-file", default=None, help="Read the output from a file (- = stdin).")
@click.option("-i", "--input", "input_text", default=None, help="The sample input (prompt).")
@click.option("--input-file", default=None, help="Read the sample input from a file.")
@db_option
@json_option
def test_eval(
    name: str,
    output: str | None,
    output_file: str | None,
    input_text: str | None,
    input_file: str | None,
    db: str | None,
    as_json: bool,
) -> None:
    """Try eval NAME on a sample OUTPUT: score, pass/fail and why. The test is recorded;
    activation needs a passing test of the eval's current version.

    Exit code 0 when the output passes, 1 when it fails, 2 on bad input.

    \b
    Examples:
        simeval evals test capital "The capital of France is Paris." -i "Capital of France?"
        simeval evals test capital --output-file answer.txt --json
    """
    out = read_input(output, output_file, "output")
    if out is None:
        raise UserError("missing OUTPUT: give it as an argument or with --output-file")
    sample_input = read_input(input_text, input_file, "input")
    with service_at(db) as svc:
        if sample_input is None:
            scope = svc.get_eval(name).input_scope
            if scope is not None:
                raise UserError(
                    f"eval {name!r} scores only the input {scope!r}: give the sample input "
                    f"with -i (e.g. -i {_quote(scope)})"
                )
        test = svc.test_eval(name, sample_input or "", out)
    if as_json:
        print_json(dump(test))
    else:
        _print_test(test)
        if test.passed:
            console.print(f"activate it with: simeval evals activate {escape(_quote(name))}")
    raise SystemExit(0 if test.passed else 1)


@evals.command("activate")
@click.argument("name")
@db_option
@json_option
def activate_eval(name: str, db: str | None, as_json: bool) -> None:
    """Make eval NAME score every matching capture from now on.

    Refused (exit 1, with the reason) unless the latest test of its current version passed.

    \b
    Example:
        simeval evals activate capital
    """
    with service_at(db) as svc:
        try:
            ev = svc.activate_eval(name)
        except Conflict as exc:
            err_console.print(f"error: {escape(str(exc))}", soft_wrap=True)
            raise SystemExit(1) from None
    if as_json:
        print_json(dump(ev))
    else:
        console.print(f"eval {escape(repr(ev.name))} is active (version {ev.version})")


def _status_command(verb: str, method: str, doc: str) -> click.Command:
    @db_option
    @json_option
    @click.argument("name")
    def command(name: str, db: str | None, as_json: bool) -> None:
        with service_at(db) as svc:
            ev = getattr(svc, method)(name)
        if as_json:
            print_json(dump(ev))
        else:
            console.print(f"eval {escape(repr(ev.name))} is {ev.status}")

    command.__doc__ = doc
    return evals.command(verb)(command)


_status_command(
    "deactivate",
    "deactivate_eval",
    """Stop eval NAME scoring captures (it becomes a draft); also restores an archived eval.

    \b
    Example:
        simeval evals deactivate capital
    """,
)
_status_command(
    "archive",
    "archive_eval",
    """Archive eval NAME: it stops scoring and leaves listings; its results are kept.

    \b
    Example:
        simeval evals archive capital
    """,
)


@evals.command("export")
@click.argument("file", required=False)
@click.option("--format", "fmt", type=click.Choice(["yaml", "json"]), help="Default: by suffix.")
@click.option("--all", "include_archived", is_flag=True, help="Include archived evals.")
@db_option
def export_evals(file: str | None, fmt: str | None, include_archived: bool, db: str | None) -> None:
    """Write the eval definitions to FILE (default stdout) as YAML or JSON, for version
    control; `simeval evals import` reads it back.

    \b
    Examples:
        simeval evals export evals.yaml
        simeval evals export --format json > evals.json
    """
    from simeval.service import dump_evals_document

    kind = output_format(file, fmt, ("yaml", "json"), "yaml")
    with service_at(db) as svc:
        doc = svc.export_evals(include_archived=include_archived)
    text = dump_evals_document(doc, kind)
    with output_file(file) as fh:
        fh.write(text)
    if file and file != "-":
        n = len(doc["evals"])
        err_console.print(f"wrote {n} eval{'' if n == 1 else 's'} to {escape(file)}")


@evals.command("import")
@click.argument("file")
@db_option
@json_option
def import_evals(file: str, db: str | None, as_json: bool) -> None:
    """Create or update evals from a YAML or JSON FILE (- = stdin), idempotent by name.

    An unchanged eval is left alone, a changed one gets a new version; `status: active`
    activates through the usual gate, running the file's `test` when needed. Everything is
    validated first and imported in one transaction. Exit 1 when an eval could not be activated.

    \b
    Example:
        simeval evals import evals.yaml --json
    """
    from simeval.service import parse_evals_document

    if file == "-":
        doc = parse_evals_document(sys.stdin.buffer.read(), "<stdin>")
    else:
        doc = parse_evals_document(read_text_file(file, "evals"), file)
    with service_at(db) as svc, progress_bar("importing evals", counts=True) as progress:
        report = svc.import_evals(doc, progress=progress)
    if as_json:
        print_json(report.model_dump())
    else:
        for key in ("created", "updated", "unchanged", "activated", "deactivated", "archived"):
            names = getattr(report, key)
            if names:
                console.print(f"{key}: {escape(', '.join(names))}")
        for name, why in report.not_activated.items():
            console.print(f"[red]not activated[/red] {escape(name)}: {escape(why)}")
    raise SystemExit(1 if report.not_activated else 0)


@evals.command("backtest")
@click.argument("name")
@click.option(
    "--limit",
    default=500,
    show_default=True,
    type=click.IntRange(1, 10_000),
    help="The most recent captures in the eval's scope.",
)
@click.option(
    "--days",
    default=30,
    show_default=True,
    type=click.IntRange(1, 365),
    help="At most this many days back.",
)
@db_option
@json_option
def backtest(name: str, limit: int, days: int, db: str | None, as_json: bool) -> None:
    """Score eval NAME's current version (a draft, or an active eval's pending version) on
    recent captures, storing nothing: how would it have judged them?

    \b
    Example:
        simeval evals backtest capital --limit 200
    """
    with service_at(db) as svc:
        report = svc.backtest_eval(name, limit=limit, days=days)
    if as_json:
        print_json(report.model_dump())
        return
    console.print(
        f"eval {escape(report.eval)} version {report.version} (threshold "
        f"{report.threshold:.2f}) on {report.n} captures from the last {days} days: "
        f"pass rate {percent(report.pass_rate)}, mean score {decimal(report.mean_score)}",
        soft_wrap=True,
    )
    for title, cases in (("worst", report.worst), ("borderline", report.borderline)):
        if cases:
            console.print(f"{title}:")
        for c in cases:
            missing = ", ".join(c.missing_terms[:6])
            console.print(
                f"  {c.score:.3f} {'PASS' if c.passed else 'FAIL'}  capture "
                f"{c.capture_id}  {escape(short(c.input, 60))}"
                + (f"  missing: {escape(missing)}" if missing and not c.passed else "")
                + (
                    f"  required missing: {escape(', '.join(c.missing_required))}"
                    if c.missing_required
                    else ""
                ),
                soft_wrap=True,
            )


COMMANDS: tuple[click.Command, ...] = (evals,)
