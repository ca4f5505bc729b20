"""The commands for evals, captures and results: ``simeval evals ...``, ``capture``,
``results ...``, ``trend``, ``settings`` and ``cleanup``. A thin layer over ``Service``.

Every command takes ``--db PATH`` (a SQLite file or a database URL; else
``SIMEVAL_DATABASE_URL``, else the per-user default file) and, where it prints data,
``--json``. Exit codes: 0 done, 1 a failed test or gate (``evals test`` below the threshold,
``evals activate`` refused, ``evals import`` that could not activate an eval), 2 bad input with
a one-line error and nothing written.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape
from rich.table import Table

from simeval.cli.common import (
    Group,
    UserError,
    console,
    err_console,
    print_json,
    progress_bar,
    read_input,
)
from simeval.cli.common import scorer_options as _scorer_options
from simeval.errors import Conflict, InvalidInput
from simeval.scoring.options import DEFAULT_THRESHOLD, RETENTION_CHOICES
from simeval.scoring.scorer import read_text_file

if TYPE_CHECKING:  # pydantic models load with the service, not with every command
    from simeval.service.models import EvalOut, ResultOut, TestOut, TrendOut

SPARKS = "▁▂▃▄▅▆▇█"
RETENTION_VALUES = (*map(str, RETENTION_CHOICES), "forever")

db_option = click.option(
    "--db",
    default=None,
    metavar="PATH|URL",
    help="SQLite file or database URL (default: SIMEVAL_DATABASE_URL, else the per-user file).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print the data as JSON.")


@contextmanager
def _service(db: str | None) -> Iterator[Any]:
    from simeval.service import Service

    svc = Service(db)
    try:
        yield svc
    finally:
        svc.close()


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json")


def _verdict(passed: bool) -> str:
    return "[green]PASS[/green]" if passed else "[red]FAIL[/red]"


def _short(text: str | None, width: int = 60) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _references(texts: Sequence[str], files: Sequence[str]) -> list[str] | None:
    refs = list(texts)
    for path in files:
        refs.append(read_input(None, path, "reference") or "")
    return refs or None


def _print_explanation(exp: dict[str, Any] | None) -> None:
    if not exp:
        return
    if exp.get("reason"):
        console.print(f"reason: {escape(exp['reason'])}")
    for title, key in (
        ("matched", "shared"),
        ("missing from output", "missing"),
        ("not in reference", "extra"),
    ):
        terms = exp.get(key) or []
        if terms:
            text = ", ".join(f"{t['term']} ({t['weight']:.3f})" for t in terms)
            console.print(f"{title}: {escape(text)}")
    if exp.get("note"):
        console.print(f"note: {escape(exp['note'])}")


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
        console.print(f"  reference {i}: {escape(_short(ref, 100))}")
    if ev.input_scope is not None:
        console.print(f"  input scope: {escape(ev.input_scope)}")
    if ev.options:
        opts = ", ".join(f"{k}={v}" for k, v in sorted(ev.options.items()))
        console.print(f"  scorer options: {escape(opts)}")
    if ev.last_test is not None:
        t = ev.last_test
        console.print(f"  last test: {t.score:.4f} {_verdict(t.passed)}")
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
        f"{test.score:.4f} {_verdict(test.passed)} (threshold {test.threshold:.2f}, "
        f"eval {escape(test.eval_name)} version {test.version})"
    )
    if not test.in_scope:
        console.print("note: the sample input is outside the eval's input scope")
    _print_explanation(test.explanation)


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
    with _service(db) as svc:
        rows = svc.list_evals(status=status, include_archived=include_archived)
    if as_json:
        print_json([_dump(e) for e in rows])
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
            escape(_short(e.input_scope, 24)) if e.input_scope else "-",
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
@_scorer_options
@db_option
@json_option
def create_eval(
    name: str,
    references: tuple[str, ...],
    reference_files: tuple[str, ...],
    threshold: str,
    scope: str | None,
    options: dict[str, Any],
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
    with _service(db) as svc:
        ev = svc.create_eval(name, refs, threshold=threshold, input_scope=scope, options=options)
    if as_json:
        print_json(_dump(ev))
        return
    console.print(
        f"created eval {escape(repr(ev.name))} (draft, version 1, threshold {ev.threshold:.2f} "
        f"{ev.strictness}); next: simeval evals test {escape(_quote(ev.name))} OUTPUT"
    )


def _quote(name: str) -> str:
    import shlex

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
    with _service(db) as svc:
        ev = svc.get_eval(name)
        versions = svc.eval_versions(ev.id)
    if as_json:
        data = _dump(ev)
        data["versions"] = [_dump(v) for v in versions]
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
@_scorer_options
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
    options: dict[str, Any],
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
    with _service(db) as svc:
        before = svc.get_eval(name)
        new_options: dict[str, Any] | None = None
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
        data = _dump(ev)
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
    with _service(db) as svc:
        if sample_input is None:
            scope = svc.get_eval(name).input_scope
            if scope is not None:
                raise UserError(
                    f"eval {name!r} scores only the input {scope!r}: give the sample input "
                    f"with -i (e.g. -i {_quote(scope)})"
                )
        test = svc.test_eval(name, sample_input or "", out)
    if as_json:
        print_json(_dump(test))
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
    with _service(db) as svc:
        try:
            ev = svc.activate_eval(name)
        except Conflict as exc:
            err_console.print(f"error: {escape(str(exc))}", soft_wrap=True)
            raise SystemExit(1) from None
    if as_json:
        print_json(_dump(ev))
    else:
        console.print(f"eval {escape(repr(ev.name))} is active (version {ev.version})")


def _status_command(verb: str, method: str, doc: str) -> click.Command:
    @db_option
    @json_option
    @click.argument("name")
    def command(name: str, db: str | None, as_json: bool) -> None:
        with _service(db) as svc:
            ev = getattr(svc, method)(name)
        if as_json:
            print_json(_dump(ev))
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


def _format(path: str | None, given: str | None, choices: tuple[str, ...], default: str) -> str:
    if given:
        return given
    if path and path != "-":
        suffix = Path(path).suffix.lower().lstrip(".")
        if suffix == "yml":
            suffix = "yaml"
        if suffix in choices:
            return suffix
    return default


@contextmanager
def _output(path: str | None) -> Iterator[Any]:
    """Stdout, or a file written whole or not at all (a temporary file renamed at the end)."""
    if path is None or path == "-":
        yield sys.stdout
        return
    target = Path(path)
    if target.is_dir():
        raise InvalidInput(f"output path {path} is a directory")
    tmp = target.with_name(target.name + ".partial")
    try:
        with tmp.open("w", encoding="utf-8", newline="") as fh:
            yield fh
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)


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
    import yaml

    kind = _format(file, fmt, ("yaml", "json"), "yaml")
    with _service(db) as svc:
        doc = svc.export_evals(include_archived=include_archived)
    if kind == "json":
        text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    else:
        text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100)
    with _output(file) as fh:
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
    with _service(db) as svc, progress_bar("importing evals", counts=True) as progress:
        report = svc.import_evals(doc, progress=progress)
    if as_json:
        print_json(report)
    else:
        for key in ("created", "updated", "unchanged", "activated", "deactivated", "archived"):
            if report[key]:
                console.print(f"{key}: {escape(', '.join(report[key]))}")
        for name, why in report["not_activated"].items():
            console.print(f"[red]not activated[/red] {escape(name)}: {escape(why)}")
    raise SystemExit(1 if report["not_activated"] else 0)


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
    prompt = read_input(input_text, input_file, "input") or ""
    meta = _metadata(metadata, "--metadata")
    with _service(db) as svc:
        cap = svc.capture(
            prompt, out, conversation_id, meta, explain=explain, captured_at=captured_at
        )
    if as_json:
        print_json(_dump(cap))
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
            _verdict(r.passed),
            f"{r.threshold:.2f}",
        )
    n = len(cap.results)
    console.print(f"captured #{cap.id}, scored by {n} active eval{'' if n == 1 else 's'}")
    console.print(table)
    for r in cap.results:
        if r.explanation:
            console.print(f"[bold]{escape(r.eval_name)}[/bold]:")
            _print_explanation(r.explanation)


def _metadata(text: str | None, where: str) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where} is not JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(value, dict):
        raise UserError(f"{where} must be a JSON object")
    return value


def _capture_file(path: str, db: str | None, as_json: bool, again: bool) -> None:
    from simeval.service import file_key_prefix, read_capture_lines

    data = _read_bytes(path, "captures")
    try:
        # newlines as a text file reads them (\r\n and \r are \n); a raw \r cannot be
        # inside a JSON string, so no capture's text changes
        text = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as exc:
        raise UserError(f"captures file {path} is not UTF-8 text (byte {exc.start})") from None
    # every line is checked before the first capture is stored
    rows = read_capture_lines(text, path, None if again else file_key_prefix(data))
    with (
        _service(db) as svc,
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


def _filters(func: Callable[..., Any]) -> Callable[..., Any]:
    """The result filter flags; the command receives them as ``filters`` (a dict of the
    service's filter arguments), as ``scorer_options`` hands over ``options``."""

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
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["filters"] = {n: kwargs.pop(n) for n in _FILTERS}
        kwargs["filters"]["meta"] = list(kwargs["filters"]["meta"]) or None
        return func(*args, **kwargs)

    return wrapper


@results.command("list")
@_filters
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--offset", default=0, show_default=True, type=click.IntRange(0))
@click.option("--explain", is_flag=True, help="Explain each failing result.")
@db_option
@json_option
def list_results(
    filters: dict[str, Any],
    limit: int,
    offset: int,
    explain: bool,
    db: str | None,
    as_json: bool,
) -> None:
    """List results, newest first. `pass` is the effective verdict: a review wins, and the
    automated score stays beside it.

    \b
    Examples:
        simeval results list --eval capital --failed --since 7d
        simeval results list --json --limit 1000
    """
    with _service(db) as svc:
        rows = svc.list_results(**filters, limit=limit, offset=offset, explain=explain)
        total = svc.count_results(**filters)
    if as_json:
        print_json([_dump(r) for r in rows])
        return
    if not rows:
        console.print("no results")
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
            _verdict(r.passed),
            escape(_short(r.output, 40)),
            r.captured_at.strftime("%Y-%m-%d %H:%M"),
        )
    console.print(table)
    console.print(f"{len(rows)} of {total} results")
    if explain:
        for r in rows:
            if not r.passed and r.explanation:
                console.print(f"[bold]result {r.id}[/bold] ({escape(r.eval_name or '')}):")
                _print_explanation(r.explanation)


def _print_result(r: ResultOut) -> None:
    console.print(
        f"[bold]result {r.id}[/bold]  eval {escape(r.eval_name or '-')} version "
        f"{r.eval_version or '-'}, {r.captured_at.strftime('%Y-%m-%d %H:%M:%S')} UTC"
    )
    line = f"score {r.score:.4f} {_verdict(r.passed)} (threshold {r.threshold:.2f})"
    if r.review is not None:
        line += (
            f", reviewed {r.review.score:.2f} (automated verdict "
            f"{'pass' if r.automated_passed else 'fail'})"
        )
    console.print(line)
    if r.review is not None and r.review.note:
        console.print(f"review note: {escape(r.review.note)}")
    if r.conversation_id:
        console.print(f"conversation: {escape(r.conversation_id)}")
    console.print(f"input: {escape(_short(r.input, 200))}")
    console.print(f"output: {escape(_short(r.output, 200))}")
    if r.matched_reference is not None:
        console.print(f"matched reference: {escape(_short(r.matched_reference, 200))}")
    _print_explanation(r.explanation)


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
    with _service(db) as svc:
        r = svc.get_result(result_id)
    if as_json:
        print_json(_dump(r))
    else:
        _print_result(r)


@results.command("review")
@click.argument("result_id")
@click.option("--score", "value", required=True, help="The reviewer's score in [0, 1].")
@click.option("--note", default="", help="Why.")
@db_option
@json_option
def review_result(result_id: str, value: str, note: str, db: str | None, as_json: bool) -> None:
    """Override result RESULT_ID's score: the review decides pass/fail in listings, trends
    and exports; the automated score is kept beside it. A new review replaces the old one.

    \b
    Example:
        simeval results review 42 --score 0.9 --note "correct, phrased differently"
    """
    with _service(db) as svc:
        r = svc.review_result(result_id, value, note)
    if as_json:
        print_json(_dump(r))
        return
    console.print(
        f"result {r.id}: {'pass' if r.automated_passed else 'fail'} -> "
        f"{_verdict(r.passed)} (automated score {r.score:.4f}, reviewed "
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
    filters: dict[str, Any],
    db: str | None,
) -> None:
    """Export results to FILE (default stdout) as CSV or JSON, oldest first.

    Columns: result_id, capture_id, run_id, conversation_id, captured_at, eval_name,
    eval_type, eval_version, input, output, score (automated), pass (reviews win),
    automated_pass, threshold, human_override_score, human_override_note, reviewed_at,
    fingerprint, matched_reference. A file is written whole or not at all.

    \b
    Examples:
        simeval results export results.csv --eval capital --since 30d
        simeval results export --format json | jq length
    """
    kind = _format(file, fmt, ("csv", "json"), "csv")
    with _service(db) as svc:
        total = svc.count_results(**filters)
        with progress_bar("exporting results", counts=True) as bar, _output(file) as fh:
            progress = None if bar is None else lambda done: bar(done, total)
            n = svc.write_export(fh, kind, progress=progress, **filters)
    if file and file != "-":
        err_console.print(f"wrote {n} results to {escape(file)}")


# -- trend, settings, cleanup -------------------------------------------------------------------
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
    with _service(db) as svc:
        tr = svc.trend(name, bucket=bucket, since=since, until=until)
    if as_json:
        print_json(_dump(tr))
    else:
        _print_trend(tr)


@click.command("settings")
@click.option(
    "--auto-eval/--no-auto-eval",
    "auto_eval",
    default=None,
    help="Score captures automatically (off: captures are stored unscored).",
)
@click.option(
    "--retention",
    type=click.Choice(RETENTION_VALUES),
    default=None,
    help="Keep captures and results this many days (`simeval cleanup` deletes older ones).",
)
@db_option
@json_option
def settings(auto_eval: bool | None, retention: str | None, db: str | None, as_json: bool) -> None:
    """Show or change the settings: automatic evaluation and retention.

    \b
    Examples:
        simeval settings
        simeval settings --retention 30 --no-auto-eval
    """
    from simeval.service import UNSET
    from simeval.store import describe_url

    days: Any = UNSET
    if retention is not None:
        days = None if retention == "forever" else int(retention)
    with _service(db) as svc:
        out = svc.update_settings(auto_evaluate=auto_eval, retention_days=days)
        where = describe_url(svc.url)
    if as_json:
        print_json({**_dump(out), "database": where})
        return
    console.print(f"database: {escape(where)}")
    console.print(f"automatic evaluation: {'on' if out.auto_evaluate else 'off'}")
    kept = "forever" if out.retention_days is None else f"{out.retention_days} days"
    console.print(f"retention: {kept}")


@click.command("cleanup")
@db_option
@json_option
def cleanup(db: str | None, as_json: bool) -> None:
    """Delete captures, results and runs older than the retention period, and old tests of
    superseded eval versions; report the counts. Nothing is deleted with retention forever.

    \b
    Example:
        simeval settings --retention 90 && simeval cleanup
    """
    with _service(db) as svc:
        out = svc.cleanup()
    if as_json:
        print_json(_dump(out))
        return
    if out.cutoff is None:
        console.print("retention is forever: nothing deleted (set it with simeval settings)")
        return
    console.print(
        f"deleted everything before {out.cutoff:%Y-%m-%d %H:%M} UTC: {out.captures} captures, "
        f"{out.results} results, {out.runs} runs, {out.tests} old tests"
    )


COMMANDS: tuple[click.Command, ...] = (
    evals,
    capture,
    results,
    trend,
    settings,
    cleanup,
)
