"""``simeval settings`` and ``simeval cleanup``: automatic evaluation, retention, and deleting
what is older than it. A thin layer over ``Service``."""

from __future__ import annotations

import click
from rich.markup import escape

from simeval.cli.common import console, db_option, dump, json_option, print_json, service_at
from simeval.scoring.options import RETENTION_CHOICES

RETENTION_VALUES = (*map(str, RETENTION_CHOICES), "forever")


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
@click.option(
    "--otlp-export",
    default=None,
    metavar="URL",
    help="OTLP/HTTP endpoint `simeval serve` sends each result to from its next start "
    '("" sends nothing).',
)
@click.option(
    "--indexed-meta",
    default=None,
    metavar="KEYS",
    help="Metadata keys to index beside the defaults, comma-separated (filters on them are "
    'answered by the database; the stored captures are indexed now; "" declares none).',
)
@db_option
@json_option
def settings(
    auto_eval: bool | None,
    retention: str | None,
    otlp_export: str | None,
    indexed_meta: str | None,
    db: str | None,
    as_json: bool,
) -> None:
    """Show or change the settings: automatic evaluation, retention, where scores are sent.

    \b
    Examples:
        simeval settings
        simeval settings --retention 30 --no-auto-eval
        simeval settings --otlp-export http://127.0.0.1:4318
        simeval settings --indexed-meta team,region
    """
    from simeval.checks import Unset
    from simeval.service import UNSET
    from simeval.service.store_names import describe_url

    days: int | Unset | None = UNSET
    if retention is not None:
        days = None if retention == "forever" else int(retention)
    with service_at(db) as svc:
        out = svc.update_settings(
            auto_evaluate=auto_eval,
            retention_days=days,
            otlp_export=UNSET if otlp_export is None else otlp_export,
            indexed_meta=UNSET
            if indexed_meta is None
            else [k.strip() for k in indexed_meta.split(",") if k.strip()],
        )
        where = describe_url(svc.url)
    if as_json:
        print_json({**dump(out), "database": where})
        return
    console.print(f"database: {escape(where)}")
    console.print(f"automatic evaluation: {'on' if out.auto_evaluate else 'off'}")
    kept = "forever" if out.retention_days is None else f"{out.retention_days} days"
    console.print(f"retention: {kept}")
    console.print(f"scores out (OTLP): {escape(out.otlp_export or 'none')}")
    declared = ", ".join(out.indexed_meta) if out.indexed_meta else "none"
    console.print(f"indexed metadata keys (beside the defaults): {escape(declared)}")


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
    with service_at(db) as svc:
        out = svc.cleanup()
    if as_json:
        print_json(dump(out))
        return
    if out.cutoff is None:
        console.print("retention is forever: nothing deleted (set it with simeval settings)")
        return
    console.print(
        f"deleted everything before {out.cutoff:%Y-%m-%d %H:%M} UTC: {out.captures} captures, "
        f"{out.results} results, {out.runs} runs, {out.tests} old tests"
    )


COMMANDS: tuple[click.Command, ...] = (settings, cleanup)
