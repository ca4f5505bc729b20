"""``simeval alerts``: list the alerts and rules, and send a rule's test sample to its webhook.

The rules come from the evals YAML (``alerts:``, imported by ``simeval evals import``); the
server (``simeval serve``) evaluates them as results arrive and on a timer."""

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
    print_json,
    service_at,
    short,
)


@click.group(cls=Group)
def alerts() -> None:
    """Alerts when an eval's quality drops: rules from the evals YAML's `alerts:` section,
    evaluated by `simeval serve` as results arrive and on a timer, delivered to webhooks.

    \b
    Examples:
        simeval evals import evals.yaml      # its alerts: section holds the rules
        simeval alerts list
        simeval alerts list --open --json
        simeval alerts test capital-drop
    """


@alerts.command("list")
@click.option("--open", "only_open", is_flag=True, help="Only the open alerts.")
@click.option("--eval", "eval_name", default=None, help="Only this eval's alerts.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@db_option
@json_option
def list_alerts(
    only_open: bool, eval_name: str | None, limit: int, db: str | None, as_json: bool
) -> None:
    """List the alerts (open first, then the latest closed) and the rules.

    \b
    Examples:
        simeval alerts list
        simeval alerts list --open --eval capital --json
    """
    with service_at(db) as svc:
        opened = svc.alerts.open_alerts(eval_name)
        closed = [] if only_open else svc.alerts.list_alerts("closed", eval_name, limit)
        rules = svc.alerts.alert_rules()
    items = (opened + closed)[:limit] if not only_open else opened
    if as_json:
        print_json({"alerts": [dump(a) for a in items], "rules": [dump(r) for r in rules]})
        return
    if not rules:
        console.print(
            "no alert rules yet: add an `alerts:` section to your evals YAML and run "
            "`simeval evals import FILE`"
        )
        return
    if items:
        table = Table("id", "status", "eval", "rule", "what fired", "opened", "closed")
        for a in items:
            table.add_row(
                str(a.id),
                "[red]open[/]" if a.status == "open" else "closed",
                escape(a.eval_name),
                escape(a.rule),
                escape(short(a.message, 70)),
                a.opened_at.strftime("%Y-%m-%d %H:%M"),
                a.closed_at.strftime("%Y-%m-%d %H:%M") if a.closed_at else "",
            )
        console.print(table)
    else:
        console.print("no alerts" + (" open" if only_open else ""))
    console.print(f"{len(opened)} open; {len(rules)} rule{'' if len(rules) == 1 else 's'}")


@alerts.command("test")
@click.argument("name")
@click.option(
    "--attempts",
    type=click.IntRange(1, 10),
    default=5,
    show_default=True,
    help="Tries at most (retried with backoff on no answer or a 5xx).",
)
@click.option(
    "--backoff",
    type=click.FloatRange(0, 60),
    default=1.0,
    show_default=True,
    help="Seconds waited after the first failed try, doubled after each next one.",
)
@db_option
@json_option
def test_alert(name: str, attempts: int, backoff: float, db: str | None, as_json: bool) -> None:
    """Send a sample alert of rule NAME to its webhook (signed as a real one) and show every
    attempt. Exit 1 when it was not delivered.

    \b
    Example:
        SIMEVAL_ALERT_SECRET=... simeval alerts test capital-drop
    """
    with service_at(db) as svc:
        report = svc.alerts.test_alert(name, attempts=attempts, backoff=backoff)
    if as_json:
        print_json(dump(report))
    else:
        for a in report.attempts:
            what = f"HTTP {a.status}" if a.ok else (a.error or f"HTTP {a.status}")
            line = f"attempt {a.attempt}: {'delivered' if a.ok else 'failed'} ({escape(what)})"
            (console if a.ok else err_console).print(line)
        verdict = "delivered to" if report.delivered else "not delivered to"
        console.print(f"rule {escape(report.rule)}: sample {verdict} {escape(report.webhook)}")
    raise SystemExit(0 if report.delivered else 1)


@alerts.command("delete")
@click.argument("name")
@db_option
def delete_rule(name: str, db: str | None) -> None:
    """Delete rule NAME with its alerts and delivery log (importing a file without the rule
    keeps it: rules are replaced by name, never dropped by omission).

    \b
    Example:
        simeval alerts delete capital-drop
    """
    with service_at(db) as svc:
        svc.alerts.delete_alert_rule(name)
    console.print(f"deleted alert rule {escape(name)}")


COMMANDS: tuple[click.Command, ...] = (alerts,)
