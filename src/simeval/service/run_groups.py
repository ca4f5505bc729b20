"""Run groups: the runs made together on one data set, one per engine (``simeval run …
--engines``), read side by side: cases as rows, engines as columns.

A case is aligned across a group's runs by where it came from: the data row's ordinal each
stored row keeps (``explanation.case.ordinal``, as ``simeval run`` stores it) and its eval
(an eval-file run has a row per case and eval). A row stored without an ordinal (rows added
by ``add_run_results`` from elsewhere) is a case of its own.

A page of cases is chosen in the database: the group's rows grouped by case, filtered
("only where the engines differ", "only failing", a search) and ordered there, with keyset
paging on (ordinal, eval); only that page's cells are read, so a page costs the same in
memory whatever the group's size. Reviews decide pass/fail, as everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from simeval.checks import MAX_NAME_CHARS, as_utc, check_page, check_storable, check_text
from simeval.errors import InvalidInput, InvalidType, NotFound, SimevalError
from simeval.jsontypes import JSONObject
from simeval.scoring.explain import TOP_MISSING, missing_terms
from simeval.scoring.required import missing_required
from simeval.scoring.scorer import get_scorer
from simeval.service.base import Core, Part
from simeval.service.models import ResultOut
from simeval.service.results import ResultService, run_row_options
from simeval.service.runstatus import effective_status
from simeval.store import Result, Review, Run, Tx
from simeval.store.run_groups_sql import (
    count_groups,
    group_runs,
    newest_group_names,
    pick_group_cases,
    rows_with_reviews,
    runs_of_groups,
)
from simeval.store.runs_sql import run_stats

MAX_GROUP_RUNS = 50  # the engines (columns) of one group that are read; later runs are left out
MAX_CASES_PAGE = 500  # cases on one page
MAX_SEARCH_CHARS = 200
MAX_KEY_CHARS = MAX_NAME_CHARS + 20  # a case's key: its ordinal, ":" and its eval's name
CELL_CHARS = 2_000  # of an output (and of an input) in a page of cases; a case's page has all
_KEY = re.compile(r"(-?[0-9]{1,18})(?::([^\x00]+))?", re.DOTALL)


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GroupEngineOut(_Out):
    """One engine of a group: its run and the run's figures (automated verdicts)."""

    engine: str = Field(description="The engine's name (the run's name if none was stored)")
    run_id: int
    run_name: str
    status: str
    results: int
    passed: int
    pass_rate: float | None
    mean_score: float | None


class RunGroupOut(_Out):
    """A group of runs: its engines in the order their runs were stored (the first is the
    one the others were compared with)."""

    name: str
    created_at: datetime
    dataset_name: str | None
    dataset_version: int | None
    engines: list[GroupEngineOut]


class GroupCellOut(_Out):
    """One engine's answer to one case."""

    result_id: str = Field(description='The stored row ("r<id>": GET /api/results/{id})')
    output: str = Field(description=f"The output (its first {CELL_CHARS:,} characters)")
    output_chars: int
    score: float = Field(description="The effective score (a review's when there is one)")
    passed: bool = Field(description="The effective verdict (a review decides)")
    automated_score: float
    reviewed: bool
    threshold: float
    missing_terms: list[str] = Field(
        description="What a failing output lacks: required terms first, then the reference's "
        "most important terms (empty for a passing one)"
    )


class GroupCaseOut(_Out):
    """One case across a group's engines (``cells`` in the order of ``engines``; None where
    an engine stored no row for it)."""

    key: str = Field(description='The case\'s key in its group: "<ordinal>" or "<ordinal>:<eval>"')
    ordinal: int = Field(description="The data row's index (negative: a row with no ordinal)")
    case_id: str | None
    eval_name: str | None
    input: str
    reference: str | None
    cells: list[GroupCellOut | None]
    differs: bool = Field(description="Engines disagree on pass/fail, or one has no row")
    failing: bool = Field(description="An engine fails it, or has no row for it")


class GroupCasesPage(_Out):
    """A page of a group's cases, in data-set order."""

    group: str
    engines: list[str]
    cases: list[GroupCaseOut]
    next: str | None = Field(description="The key to pass as ``after`` for the next page")


class GroupCaseDetail(_Out):
    """One case with each engine's result and explanation."""

    group: str
    engines: list[str]
    case: GroupCaseOut
    results: list[ResultOut | None]
    options: list[dict[str, Any]] = Field(description="Each engine's scorer options")


def check_group_name(name: object) -> str:
    """A group's name: a string of 1-200 characters (stripped), else ``InvalidInput``
    (``NotFound`` for one no database can hold)."""
    text = check_text(name, "run group").strip()
    if not text or len(text) > MAX_NAME_CHARS:
        raise InvalidInput(f"run group must have 1 to {MAX_NAME_CHARS} characters")
    try:
        return check_storable(text, "run group")
    except InvalidInput:  # a NUL or a lone surrogate names nothing (as every lookup)
        raise NotFound(f"no run group named {text!r}") from None


def case_key(ordinal: int, eval_name: str | None) -> str:
    """A case's key in its group: its ordinal, and its eval when it has one."""
    return str(ordinal) if not eval_name else f"{ordinal}:{eval_name}"


def parse_case_key(key: object) -> tuple[int, str]:
    """``(ordinal, eval name or "")`` of a key made by ``case_key``, else ``InvalidInput``."""
    if not isinstance(key, str):
        raise InvalidType(f"case key must be a string, not {type(key).__name__}")
    found = _KEY.fullmatch(key)
    if found is None or len(key) > MAX_KEY_CHARS:
        raise InvalidInput(f'case key must be "<ordinal>" or "<ordinal>:<eval>", not {key[:60]!r}')
    return int(found.group(1)), found.group(2) or ""


def _labels(runs: Sequence[Run]) -> list[str]:
    """Each run's engine label: its engine (its name if none), with its id where two share it."""
    plain = [r.engine or r.name for r in runs]
    return [
        label if plain.count(label) == 1 else f"{label} (#{r.id})"
        for label, r in zip(plain, runs, strict=True)
    ]


def _cut(text: str | None) -> str:
    text = text or ""
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


class RunGroupService(Part):
    """Run groups: listing them, a page of a group's cases side by side, one case."""

    def __init__(self, core: Core, results: ResultService):
        super().__init__(core)
        self.results = results

    def _group_runs(self, s: Tx, name: object) -> list[Run]:
        group = check_group_name(name)
        runs = group_runs(s, group, MAX_GROUP_RUNS)
        if not runs:
            raise NotFound(f"no run group named {group!r}")
        return runs

    def _engines(self, s: Tx, runs: Sequence[Run]) -> list[GroupEngineOut]:
        stats = run_stats(s, [r.id for r in runs])
        out = []
        for label, run in zip(_labels(runs), runs, strict=True):
            n, passed, mean = stats.get(run.id, (0, 0, None))
            out.append(
                GroupEngineOut(
                    engine=label,
                    run_id=run.id,
                    run_name=run.name,
                    status=effective_status(run),
                    results=n,
                    passed=passed,
                    pass_rate=passed / n if n else None,
                    mean_score=float(mean) if mean is not None else None,
                )
            )
        return out

    def _group_out(self, s: Tx, name: str, runs: Sequence[Run]) -> RunGroupOut:
        first = runs[0]
        return RunGroupOut(
            name=name,
            created_at=as_utc(max(r.created_at for r in runs)),
            dataset_name=first.dataset_name,
            dataset_version=first.dataset_version,
            engines=self._engines(s, runs),
        )

    def list_run_groups(self, limit: int = 50, offset: int = 0) -> list[RunGroupOut]:
        """The stored groups of runs, newest first, each with its engines' figures."""
        limit, offset = check_page(limit, offset)
        with self.store.read() as s:
            names = newest_group_names(s, limit, offset)
            if not names:
                return []
            rows = runs_of_groups(s, names)
            by_name: dict[str, list[Run]] = {n: [] for n in names}
            for run in rows:
                kept = by_name[run.group_name or ""]
                if len(kept) < MAX_GROUP_RUNS:
                    kept.append(run)
            return [self._group_out(s, n, by_name[n]) for n in names]

    def count_run_groups(self) -> int:
        """How many groups of runs are stored."""
        with self.store.read() as s:
            return count_groups(s)

    def get_run_group(self, name: str) -> RunGroupOut:
        """A group of runs (``NotFound`` when no run has that group): its engines, their runs
        and figures, the data set it ran on."""
        with self.store.read() as s:
            runs = self._group_runs(s, name)
            return self._group_out(s, runs[0].group_name or "", runs)

    def run_group_cases(
        self,
        name: str,
        *,
        differ: bool = False,
        failing: bool = False,
        search: str | None = None,
        after: str | None = None,
        limit: int = 50,
    ) -> GroupCasesPage:
        """A page of a group's cases side by side, in data-set order: each case with one cell
        per engine (output, effective score and verdict, missing terms of a failing one).

        ``differ``: only cases where the engines disagree on pass/fail (or one has no row for
        it); ``failing``: only cases an engine fails (or has no row for); ``search``: only
        cases whose id, input or an output contains it (case-insensitive); ``after``: the
        previous page's ``next`` key."""
        if (
            isinstance(limit, bool)
            or not isinstance(limit, int)
            or not 1 <= limit <= MAX_CASES_PAGE
        ):
            raise InvalidInput(f"limit must be an integer in [1, {MAX_CASES_PAGE}], not {limit!r}")
        if search is not None:
            search = check_text(search, "search").strip()
            if len(search) > MAX_SEARCH_CHARS:
                raise InvalidInput(f"search is longer than {MAX_SEARCH_CHARS} characters")
            check_storable(search, "search")
        start = parse_case_key(after) if after else None
        with self.store.read() as s:
            runs = self._group_runs(s, name)
            found = self._pick_cases(s, runs, differ, failing, search or None, start, limit + 1)
            more = len(found) > limit
            found = found[:limit]
            cases = self._cases_out(s, runs, found)
            return GroupCasesPage(
                group=runs[0].group_name or "",
                engines=_labels(runs),
                cases=cases,
                next=cases[-1].key if more and cases else None,
            )

    def run_group_case(self, name: str, key: str) -> GroupCaseDetail:
        """One case of a group with each engine's full result and its explanation."""
        ordinal, eval_name = parse_case_key(key)
        with self.store.read() as s:
            runs = self._group_runs(s, name)
            found = self._pick_cases(s, runs, False, False, None, None, 1, (ordinal, eval_name))
            shown = self._cases_out(s, runs, found, cut=False)
            if not shown:
                raise NotFound(f"run group {runs[0].group_name!r} has no case {key!r}")
            case_out = shown[0]
            labels = _labels(runs)
            options = [run_row_options(r.options or {}, eval_name or None) or {} for r in runs]
        results = [
            None if cell is None else self.results.get_result(cell.result_id)
            for cell in case_out.cells
        ]
        return GroupCaseDetail(
            group=runs[0].group_name or "",
            engines=labels,
            case=case_out,
            results=results,
            options=options,
        )

    def _pick_cases(
        self,
        s: Tx,
        runs: Sequence[Run],
        differ: bool,
        failing: bool,
        search: str | None,
        after: tuple[int, str] | None,
        limit: int,
        only: tuple[int, str] | None = None,
    ) -> list[tuple[Any, ...]]:
        """The page's cases: (ordinal, eval or "", the row id of each run's cell or None,
        whether the engines differ, whether one fails), grouped, filtered and ordered by the
        database."""
        ids = [r.id for r in runs]
        return pick_group_cases(s, ids, differ, failing, search, after, limit, only)

    def _cases_out(
        self, s: Tx, runs: Sequence[Run], found: list[tuple[Any, ...]], cut: bool = True
    ) -> list[GroupCaseOut]:
        """The cases ``_pick_cases`` chose, with their cells read by id (this page's only)."""
        wanted = [row for f in found for row in f[4:] if row is not None]
        rows = rows_with_reviews(s, wanted)
        options = [r.options or {} for r in runs]
        show = _cut if cut else (lambda t: t or "")
        out = []
        for o, e, differs, fails, *cell_ids in found:
            cells: list[GroupCellOut | None] = []
            first: Result | None = None
            for at, rid in enumerate(cell_ids):
                got = rows.get(rid) if rid is not None else None
                if got is None:
                    cells.append(None)
                    continue
                row, review = got
                first = first or row
                cells.append(self._cell(row, review, options[at], show))
            if first is None:  # its rows were deleted (with their run) since it was picked
                continue
            origin = first.explanation.get("case") if isinstance(first.explanation, dict) else None
            case_id = origin.get("id") if isinstance(origin, dict) else None
            out.append(
                GroupCaseOut(
                    key=case_key(int(o), e or None),
                    ordinal=int(o),
                    case_id=None if case_id is None else str(case_id),
                    eval_name=e or None,
                    input=show(first.input),
                    reference=first.reference,
                    cells=cells,
                    differs=bool(differs),
                    failing=bool(fails),
                )
            )
        return out

    def _cell(
        self,
        row: Result,
        review: Review | None,
        run_options: JSONObject,
        show: Callable[[str | None], str],
    ) -> GroupCellOut:
        score = review.score if review is not None else row.score
        passed = score >= row.threshold if review is not None else bool(row.passed)
        output = row.output or ""
        return GroupCellOut(
            result_id=f"r{row.id}",
            output=show(output),
            output_chars=len(output),
            score=score,
            passed=passed,
            automated_score=row.score,
            reviewed=review is not None,
            threshold=row.threshold,
            missing_terms=[] if passed else _missing(row, run_options),
        )


def _missing(row: Result, run_options: JSONObject) -> list[str]:
    """A failing row's missing terms, as its run named them: the required terms it lacks,
    then the reference's most important terms it lacks (computed now, from the scorer
    options its run kept; none when they were not kept or cannot be built)."""
    options = run_row_options(run_options, row.eval_name)
    if options is None or row.reference is None:
        return []
    try:
        scorer = get_scorer(**options)
        output = row.output or ""
        lacks = missing_required(scorer, output)
        terms = missing_terms(scorer, output, row.reference, TOP_MISSING, row.input)
    except SimevalError:
        return []
    return lacks + [t for t in terms if t not in lacks]
