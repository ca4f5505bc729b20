"""The report's short form in Markdown, for a CI job's summary (GitHub's
``$GITHUB_STEP_SUMMARY``): the verdict, a table of evals with their pass rate, change
against the baseline and gate verdict, the gates, and the ten worst rows.

Every cell is escaped: a ``|`` would start a new cell, a line break would end the table, and
text such as ``<details>`` would be read as HTML.
"""

from __future__ import annotations

from simeval.report.build import EvalLine, Report

CELL_CHARS = 120  # a cell keeps this much of a text
OUTPUT_CHARS = 80  # and of an output
MISSING_SHOWN = 5  # missing terms a row names (the most important first), as the console's
_CELL = str.maketrans(
    {
        "\\": "\\\\",
        "|": "\\|",
        "`": "\\`",
        "*": "\\*",
        "_": "\\_",
        "[": "\\[",
        "]": "\\]",
        "<": "&lt;",
        ">": "&gt;",
        "&": "&amp;",
    }
)


def cell(text: object, limit: int = CELL_CHARS) -> str:
    """``text`` as one table cell: on one line, cut to ``limit`` characters, its Markdown
    and HTML made plain.

    >>> cell("a | b\\nc <br> *d*")
    'a \\\\| b c &lt;br&gt; \\\\*d\\\\*'
    """
    flat = " ".join(str(text).split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return flat.translate(_CELL)


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _change(line: EvalLine, report: Report) -> str:
    if not report.by_row:
        return "–"
    if not line.compared:
        return "no case in the baseline"
    change = f"{100 * (line.change or 0.0):+.1f} pts"
    return f"{change} ({line.regressed} regressed, {line.improved} improved)"


def render_markdown(report: Report) -> str:
    """The Markdown summary of ``report`` (ends with a blank line, so summaries appended one
    after another stay apart)."""
    s = report.summary
    if s.gates:
        verdict = "✅ every gate held" if s.ok else "❌ a gate failed"
    else:
        verdict = "no gate checked"
    out = [f"### simeval: {cell(report.title)} — {verdict}", ""]
    gate = "✅ held" if s.ok else "❌ failed"
    out += [
        "| eval | results | pass rate | change vs baseline | gate |",
        "|---|---:|---:|---|---|",
    ]
    for line in report.evals:
        name = "**all**" if line.name is None else cell(line.name)
        verdict_cell = (gate if s.gates else "–") if line.name is None else "–"
        out.append(
            f"| {name} | {line.results:,} | {_pct(line.pass_rate)} | {_change(line, report)} "
            f"| {verdict_cell} |"
        )
    out.append("")
    if s.gates:
        out.append(
            "Gates: "
            + " · ".join(
                f"{'✅' if g.passed else '❌'} `{g.gate}` {g.limit} (value {g.value:.4g})"
                for g in s.gates
            )
        )
        out.append("")
    b = report.baseline
    if b is not None:
        out.append(
            f"Against {cell(b.baseline)}: {b.regressed} regressed, {b.improved} improved, "
            f"{b.unchanged} unchanged, {b.new} new, {b.removed} removed."
        )
        out.append("")
    worst = report.worst
    if worst:
        several = report.named_evals
        out += [
            f"**The {len(worst)} worst rows**",
            "",
            "| score | result | "
            + ("eval | " if several else "")
            + "case | output | missing terms | why |",
            "|---:|---|" + ("---|" if several else "") + "---|---|---|---|",
        ]
        for r in worst:
            why = r.reason or (r.note or "")
            out.append(
                f"| {r.score:.3f} | {'pass' if r.passed else '**FAIL**'} | "
                + (f"{cell(r.eval or '')} | " if several else "")
                + f"{cell(r.case)} | {cell(r.output, OUTPUT_CHARS)} | "
                + f"{cell(', '.join(r.missing[:MISSING_SHOWN]))} | {cell(why)} |"
            )
        out.append("")
    return "\n".join(out) + "\n"
