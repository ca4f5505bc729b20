"""A run's report (``Report``): its summary, the pass rate per eval, the change against a
baseline row by row, the histograms of scores, and every row (failing rows first, explained).

``build_report`` takes the run's ``RunSummary`` and its rows; the HTML page and the Markdown
summary (``simeval.report.html``, ``simeval.report.markdown``) only lay a ``Report`` out.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from simeval.report.rows import Explainer, ReportRow
from simeval.runs.baseline import Baseline, BaselineReport, Comparison
from simeval.runs.summary import RunSummary

BINS = 20  # histogram bars: 0.05 of score each
# a page of tens of thousands of rows stays small: a passing row keeps this much of a text,
# a failing one (what the reader came for) much more
PASSED_TEXT_CHARS = 300
FAILED_TEXT_CHARS = 5000


@dataclass
class EvalLine:
    """An eval's line of the report (``name`` None: all the run's results): its numbers and,
    against a row-by-row baseline, the pass rates before and after on the cases both runs
    have (``compared``) with how many regressed and improved."""

    name: str | None
    results: int
    passed: int
    pass_rate: float | None
    mean_score: float | None
    threshold: float | None
    compared: int = 0
    pass_rate_before: float | None = None
    pass_rate_after: float | None = None
    regressed: int = 0
    improved: int = 0

    @property
    def change(self) -> float | None:
        """The pass rate's change on the compared cases (None without a baseline)."""
        if self.pass_rate_before is None or self.pass_rate_after is None:
            return None
        return self.pass_rate_after - self.pass_rate_before


@dataclass
class Histogram:
    """The scores of an eval's results (``name`` None: all of them) in ``BINS`` bars from 0
    to 1, passing and failing counted apart, with the threshold to draw (None when the rows
    have several)."""

    name: str | None
    threshold: float | None
    passed: list[int]
    failed: list[int]

    @property
    def peak(self) -> int:
        """The tallest bar's count (at least 1: the scale of the drawing)."""
        return max([1, *(p + f for p, f in zip(self.passed, self.failed, strict=True))])


@dataclass
class Report:
    """Everything the report shows. ``rows``: failing rows first (lowest score first), then
    the passing ones in the run's order; ``baseline``: the comparison row by row when a
    baseline was given (``by_row``), else the one the run's summary kept (counts and the
    largest changes only)."""

    summary: RunSummary
    title: str
    evals: list[EvalLine]
    histograms: list[Histogram]
    rows: list[ReportRow]
    baseline: BaselineReport | None = None
    by_row: bool = False
    run: Mapping[str, object] | None = None  # a stored run's id, name and time
    source: str | None = None  # where the rows were read: "stored run 3", "results file x"
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def worst(self) -> list[ReportRow]:
        """The ten lowest-scoring rows, lowest first (ties in the run's order)."""
        return sorted(self.rows, key=lambda r: (r.score, r.n))[:10]

    @property
    def named_evals(self) -> bool:
        """Whether the rows belong to named evals (an eval-file run)."""
        return any(e.name is not None for e in self.evals)

    @property
    def failed(self) -> int:
        """How many of the rows failed."""
        return sum(not r.passed for r in self.rows)


def cut(text: str | None, limit: int) -> str | None:
    """``text`` cut to ``limit`` characters, saying how many more there were.

    >>> cut("abcdef", 3)
    'abc… (3 more characters)'
    """
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters)"


def _bins(score: float) -> int:
    return min(BINS - 1, max(0, int(score * BINS)))


def build_report(
    summary: RunSummary,
    rows: Iterable[ReportRow],
    options: Mapping[str, object],
    baseline: Baseline | None = None,
    tolerance: float = 0.05,
    title: str | None = None,
    run: Mapping[str, object] | None = None,
    source: str | None = None,
) -> Report:
    """The report of a run: ``summary`` (its numbers, gates, baseline report) and ``rows``
    (all its results, in the run's order); ``options``: the scorer options the run kept
    (``Run.options`` or ``rows.run_options``), which explain the failing rows. With
    ``baseline`` (loaded anew: a comparison consumes it) each row is compared with it, as
    the run compared them; without, the summary's baseline report is shown as it is.
    ``title``, ``run`` and ``source`` (where the rows were read) are shown as they are."""
    explainer = Explainer(options)
    comparison = Comparison(baseline, tolerance) if baseline is not None else None
    kept: list[ReportRow] = []
    lines: dict[str | None, EvalLine] = {}
    before_passed: dict[str | None, int] = {}
    after_passed: dict[str | None, int] = {}
    sums: dict[str | None, float] = {}
    hist: dict[str | None, Histogram] = {}
    thresholds: dict[str | None, set[float]] = {}
    for row in rows:  # in the run's order: a baseline pairs repeated cases in that order
        if not row.passed:
            explainer.explain(row)  # from the whole texts, before they are cut
        if comparison is not None:  # a regression's missing terms are named with it
            row.status, row.before, row.passed_before = comparison.add(
                row.key, row.score, row.passed, row.case, row.missing
            )
        limit = PASSED_TEXT_CHARS if row.passed else FAILED_TEXT_CHARS
        row.input, row.output = cut(row.input, limit), cut(row.output, limit) or ""
        row.reference = cut(row.reference, limit)
        kept.append(row)
        for name in {None, row.eval}:
            line = lines.get(name)
            if line is None:
                line = lines[name] = EvalLine(name, 0, 0, None, None, None)
                hist[name] = Histogram(name, None, [0] * BINS, [0] * BINS)
                thresholds[name] = set()
                before_passed[name] = after_passed[name] = 0
                sums[name] = 0.0
            line.results += 1
            line.passed += row.passed
            sums[name] += row.score
            (hist[name].passed if row.passed else hist[name].failed)[_bins(row.score)] += 1
            if row.threshold is not None:
                thresholds[name].add(row.threshold)
            if row.status in ("unchanged", "regressed", "improved"):
                line.compared += 1
                line.regressed += row.status == "regressed"
                line.improved += row.status == "improved"
                after_passed[name] += row.passed
                before_passed[name] += bool(row.passed_before)
    for name, line in lines.items():
        line.mean_score = sums[name] / line.results if line.results else None
        line.pass_rate = line.passed / line.results if line.results else None
        only = thresholds[name]
        line.threshold = hist[name].threshold = next(iter(only)) if len(only) == 1 else None
        if comparison is not None and line.compared:
            line.pass_rate_before = before_passed[name] / line.compared
            line.pass_rate_after = after_passed[name] / line.compared
    for name, stats in (summary.evals or {}).items():  # an eval no row went to: 0 results
        lines.setdefault(name, EvalLine(name, 0, 0, None, None, stats.threshold))
    report_baseline = summary.baseline
    if comparison is not None:
        report_baseline = comparison.report(set(summary.fingerprints))
    evals = sorted((n for n in lines if n is not None), key=str)
    kept.sort(key=lambda r: (r.passed, r.score if not r.passed else 0.0, r.n))
    overall = lines.get(None) or EvalLine(None, 0, 0, None, None, None)
    return Report(
        summary=summary,
        title=title or os.path.basename(summary.file) or "simeval run",
        evals=[overall, *(lines[n] for n in evals)],
        histograms=[hist[n] for n in ([None] if len(evals) < 2 else evals) if n in hist],
        rows=kept,
        baseline=report_baseline,
        by_row=comparison is not None,
        run=run,
        source=source,
    )
