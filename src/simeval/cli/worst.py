"""The worst cases of a run as a table, for file runs and engine runs alike."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from simeval.cli.common import console

if TYPE_CHECKING:  # the CLI starts without loading the runs package
    from simeval.runs.summary import RunSummary


def print_worst(s: RunSummary, title: str = "worst cases") -> None:
    """``s.worst`` (as many as ``--worst`` asked for) with where each is, its case, the
    terms it lacks and why it failed; nothing when there is none."""
    if not s.worst:
        return
    several = bool(s.evals)
    table = Table(title=escape(title), title_justify="left", show_edge=False)
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column("", no_wrap=True)
    if several:
        table.add_column("eval")
    table.add_column("where", no_wrap=True)
    table.add_column("case")
    table.add_column("missing terms")
    reasons = any(w.reason for w in s.worst)
    if reasons:
        table.add_column("reason")
    prefix = s.file + " "  # every row is from FILE, named on the run's first line
    for w in s.worst:
        case = w.id or w.input or w.output or ""
        case = " ".join(case.split())
        cells = [
            f"{w.score:.4f}",
            "[green]pass[/]" if w.passed else "[red]FAIL[/]",
            *([escape(w.eval or "")] if several else []),
            escape(w.where.removeprefix(prefix)),
            escape(case[:60] + ("..." if len(case) > 60 else "")),
            escape(", ".join(w.missing_terms) or "-"),
            *([escape(w.reason or "-")] if reasons else []),
        ]
        table.add_row(*cells)
    console.print(table)
