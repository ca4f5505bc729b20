"""``simeval datasets``: import, list, show and export stored datasets (every change a version)."""

from __future__ import annotations

import click
from rich.markup import escape
from rich.table import Table

from simeval.cli.common import (
    Group,
    console,
    db_option,
    dump,
    err_console,
    json_option,
    output_file,
    output_format,
    print_json,
    service_at,
    short,
)

FORMAT_CHOICE = click.Choice(["jsonl", "csv", "tsv", "parquet"])


@click.group(cls=Group)
def datasets() -> None:
    """Named sets of cases (id, input, references, metadata) kept in the database; every
    change makes a new version, and a run records the version it used.

    \b
    Examples:
        simeval datasets import golden.jsonl --name golden
        simeval datasets list
        simeval datasets show golden --version 1
        simeval datasets export golden -o golden-v2.csv
        simeval run dataset:golden@2 --engines engines.yaml --evals evals.yaml
    """


@datasets.command("import")
@click.argument("file")
@click.option("--name", required=True, help="The dataset's name (a new one, or see --replace).")
@click.option(
    "--format",
    "fmt",
    type=FORMAT_CHOICE,
    default=None,
    help="The file's format (default: from the extension).",
)
@click.option(
    "--no-quoting",
    is_flag=True,
    help="Read CSV/TSV cells literally: a double quote is ordinary text.",
)
@click.option(
    "--replace",
    is_flag=True,
    help="The dataset exists: make a new version holding exactly the file's cases.",
)
@db_option
@json_option
def import_dataset(
    file: str,
    name: str,
    fmt: str | None,
    no_quoting: bool,
    replace: bool,
    db: str | None,
    as_json: bool,
) -> None:
    """Store the cases of FILE (JSONL, CSV/TSV or Parquet, the columns `simeval run` reads:
    `id`, `input`, `reference` or `references`, optional `metadata`) as dataset NAME.

    Every row is checked first: a bad row stores nothing and is named with its line.

    \b
    Examples:
        simeval datasets import golden.jsonl --name golden
        simeval datasets import golden.csv --name golden --replace --json
    """
    with service_at(db) as svc:
        out = svc.import_dataset(name, file, fmt=fmt, quoting=not no_quoting, replace=replace)
    if as_json:
        print_json(dump(out))
        return
    console.print(
        f"dataset {escape(out.name)} version {out.version}: {out.cases} "
        f"case{'' if out.cases == 1 else 's'}"
    )


@datasets.command("list")
@db_option
@json_option
def list_datasets(db: str | None, as_json: bool) -> None:
    """List datasets with their newest version and case counts.

    \b
    Example:
        simeval datasets list --json
    """
    with service_at(db) as svc:
        rows = svc.list_datasets()
    if as_json:
        print_json([dump(d) for d in rows])
        return
    if not rows:
        console.print("no datasets yet: import one with `simeval datasets import FILE --name NAME`")
        return
    table = Table("name", "version", "cases", "drafts", "updated")
    for d in rows:
        table.add_row(
            escape(d.name),
            str(d.version),
            str(d.cases),
            str(d.drafts),
            d.updated_at.strftime("%Y-%m-%d %H:%M"),
        )
    console.print(table)


@datasets.command("show")
@click.argument("name")
@click.option(
    "--version", "version", type=click.IntRange(min=1), default=None, help="Default: newest."
)
@click.option("--limit", type=click.IntRange(1, 100_000), default=50, show_default=True)
@click.option("--offset", type=click.IntRange(min=0), default=0)
@db_option
@json_option
def show_dataset(
    name: str, version: int | None, limit: int, offset: int, db: str | None, as_json: bool
) -> None:
    """Show a version of dataset NAME: its cases and every version's note.

    \b
    Examples:
        simeval datasets show golden
        simeval datasets show golden --version 1 --json
    """
    with service_at(db) as svc:
        out = svc.show_dataset(name, version, limit=limit, offset=offset)
    if as_json:
        print_json(dump(out))
        return
    console.print(
        f"dataset {escape(out.name)} version {out.version} of {out.latest}: {out.total} "
        f"case{'' if out.total == 1 else 's'}, {out.drafts} draft{'' if out.drafts == 1 else 's'}"
    )
    table = Table("id", "input", "references", "draft")
    for c in out.cases:
        refs = short(c.references[0], 50) + (
            f" (+{len(c.references) - 1})" if len(c.references) > 1 else ""
        )
        table.add_row(
            escape(c.id), escape(short(c.input, 50)), escape(refs), "draft" if c.draft else ""
        )
    console.print(table)
    if out.total > out.offset + len(out.cases):
        console.print(f"… {out.total - out.offset - len(out.cases)} more (--offset, --limit)")
    console.print("versions:")
    for v in out.versions:
        console.print(
            f"  {v.version}  {v.created_at:%Y-%m-%d %H:%M}  {v.cases} cases  {escape(v.note)}"
        )


@datasets.command("export")
@click.argument("name")
@click.option("-o", "--output", "path", default=None, help="File to write (default: stdout).")
@click.option(
    "--version", "version", type=click.IntRange(min=1), default=None, help="Default: newest."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "csv"]),
    default=None,
    help="Default: from the file's suffix, else jsonl.",
)
@db_option
def export_dataset(
    name: str, path: str | None, version: int | None, fmt: str | None, db: str | None
) -> None:
    """Write a version of dataset NAME as JSONL or CSV, the columns `simeval datasets
    import` reads (a file is written whole or not at all).

    \b
    Examples:
        simeval datasets export golden -o golden.jsonl
        simeval datasets export golden --version 1 --format csv > golden-v1.csv
    """
    kind = output_format(path, fmt, ("jsonl", "csv"), "jsonl")
    with service_at(db) as svc:
        used, lines = svc.export_dataset(name, version, kind)
        with output_file(path) as fh:
            for line in lines:
                fh.write(line)
    if path and path != "-":
        err_console.print(f"wrote dataset {escape(name)} version {used} to {escape(path)}")


COMMANDS: tuple[click.Command, ...] = (datasets,)
