"""Export of results as flat rows, CSV or JSON, streamed."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterator
from itertools import islice
from typing import IO, Any

from simeval.errors import InvalidInput
from simeval.service.filters import ResultFilter, filter_of
from simeval.service.models import ResultOut
from simeval.service.queries import iter_rows
from simeval.service.results import ResultsMixin

EXPORT_COLUMNS = (
    "result_id",
    "capture_id",
    "run_id",
    "run_status",
    "conversation_id",
    "captured_at",
    "eval_name",
    "eval_type",
    "eval_version",
    "input",
    "output",
    "score",
    "pass",
    "automated_pass",
    "threshold",
    "human_override_score",
    "human_override_note",
    "reviewed_at",
    "fingerprint",
    "matched_reference",
    "metadata",
    "reasoning",
    "missing_required",
)


def reasoning(out: ResultOut) -> str:
    """The verdict in one line: "0.65 < 0.80: missing seine, paris" (or "0.91 ≥ 0.80")."""
    score = out.review.score if out.review is not None else out.score
    sign = "≥" if out.passed else "<"
    line = f"{score:.2f} {sign} {out.threshold:.2f}"
    if out.review is not None:
        line += " (reviewed)"
    exp = out.explanation or {}
    required = exp.get("missing_required") or []
    if required and out.review is None:
        # failed whatever the score: the number alone would not say why
        return f"{score:.2f}: required term missing: " + ", ".join(required)
    missing = [m.get("term") if isinstance(m, dict) else str(m) for m in exp.get("missing") or []]
    missing = [m for m in missing if m][:5]
    if not out.passed and missing:
        line += ": missing " + ", ".join(missing)
    elif not out.passed and exp.get("reason"):
        line += f": {exp['reason']}"
    return line


# A spreadsheet runs a cell that starts with one of these as a formula (CSV injection)
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def neutralise_formula(text: str) -> str:
    """``text`` as a spreadsheet shows it, never runs it: a leading ``'`` before a formula
    prefix (OWASP's advice for CSV exports).

    >>> neutralise_formula("=HYPERLINK(1)"), neutralise_formula("Paris")
    ("'=HYPERLINK(1)", 'Paris')
    """
    return "'" + text if text.startswith(FORMULA_PREFIXES) else text


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, str):
        return neutralise_formula(value)
    return value


class ExportMixin(ResultsMixin):
    """Results export."""

    def iter_export_rows(
        self, where: ResultFilter | None = None, **filters: Any
    ) -> Iterator[dict[str, Any]]:
        """The results matching ``where`` (or its fields as keywords, as ``list_results``
        takes them) as flat rows (``EXPORT_COLUMNS``), oldest first, streamed: ``score`` is
        the automated score, ``pass`` the effective verdict, ``human_override_*`` the review."""
        f = filter_of(where, filters)
        with self.store.read() as s:
            rows = iter_rows(s, f, self._eval_id(s, f), newest=False)
            while chunk := list(islice(rows, 1000)):
                outs = self._results_out(s, chunk, explain=False)
                # the reasoning of a failed captured result names its missing terms: explain
                # those (computed on display, never stored), not every row
                failed = [i for i, o in enumerate(outs) if not o.passed and o.capture_id]
                if failed:
                    explained = self._results_out(s, [chunk[i] for i in failed], explain=True)
                    for i, o in zip(failed, explained, strict=True):
                        outs[i] = o
                for out in outs:
                    yield {
                        "result_id": out.id,
                        "capture_id": out.capture_id,
                        "run_id": out.run_id,
                        "run_status": out.run_status,
                        "conversation_id": out.conversation_id,
                        "captured_at": out.captured_at.isoformat(),
                        "eval_name": out.eval_name,
                        "eval_type": out.eval_type,
                        "eval_version": out.eval_version,
                        "input": out.input,
                        "output": out.output,
                        "score": out.score,
                        "pass": out.passed,
                        "automated_pass": out.automated_passed,
                        "threshold": out.threshold,
                        "human_override_score": out.review.score if out.review else None,
                        "human_override_note": out.review.note if out.review else None,
                        "reviewed_at": out.review.created_at.isoformat() if out.review else None,
                        "fingerprint": out.fingerprint,
                        "matched_reference": out.matched_reference,
                        "metadata": out.metadata,
                        "reasoning": reasoning(out),
                        "missing_required": ", ".join(
                            (out.explanation or {}).get("missing_required") or []
                        ),
                    }

    def write_export(
        self,
        fp: IO[str],
        fmt: str = "csv",
        progress: Callable[[int], None] | None = None,
        where: ResultFilter | None = None,
        **filters: Any,
    ) -> int:
        """Write the results matching ``where`` (or its fields as keywords) as CSV or JSON to
        a text file object, streaming; returns the count. ``progress(n)`` is called every
        1,000 rows."""
        if fmt not in ("csv", "json"):
            raise InvalidInput(f"export format must be csv or json, not {fmt!r}")
        f = filter_of(where, filters)
        n = 0
        if fmt == "csv":
            writer = csv.DictWriter(fp, fieldnames=EXPORT_COLUMNS, lineterminator="\n")
            writer.writeheader()
            for row in self.iter_export_rows(f):
                writer.writerow({k: _csv_value(v) for k, v in row.items()})
                n += 1
                if progress and n % 1000 == 0:
                    progress(n)
        else:
            fp.write("[")
            for row in self.iter_export_rows(f):
                fp.write(("\n" if n == 0 else ",\n") + json.dumps(row, ensure_ascii=False))
                n += 1
                if progress and n % 1000 == 0:
                    progress(n)
            fp.write("\n]\n" if n else "]\n")
        if progress:
            progress(n)
        return n

    def export_results(
        self, fmt: str = "csv", where: ResultFilter | None = None, **filters: Any
    ) -> str:
        """The results matching ``where`` (or its fields as keywords) as a CSV or JSON
        document (see ``iter_export_rows`` for the columns)."""
        buf = io.StringIO()
        self.write_export(buf, fmt, where=filter_of(where, filters))
        return buf.getvalue()
