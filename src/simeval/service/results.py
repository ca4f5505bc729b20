"""Results: listing, counting, one result with its explanation, reviews, and the labelled
examples calibration learns from. Where results live and how they are filtered is in
``simeval.service.queries``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from datetime import datetime
from itertools import islice
from typing import Any, cast

from simeval.checks import as_utc, check_page, check_storable, utc_now
from simeval.errors import InvalidInput, InvalidType, NotFound, SimevalError
from simeval.jsontypes import JSONObject
from simeval.scoring.options import check_unit
from simeval.scoring.scorer import get_scorer
from simeval.service.actor import record, signed_in_user
from simeval.service.base import Part
from simeval.service.cursor import OLDER, Page, Position, keyset_page, page_position
from simeval.service.filters import ResultFilter, filter_of
from simeval.service.models import ResultOut
from simeval.service.queries import (
    ResultKey,
    Row,
    capture_rows,
    count_rows,
    iter_rows,
    parse_result_id,
    result_key,
    review_out,
    run_row,
)
from simeval.service.runstatus import effective_status
from simeval.store import Result, Tx
from simeval.store.results_sql import (
    add_review,
    capture_by_id,
    capture_reviews,
    eval_names_types,
    review_by_key,
    reviewed_captures,
    reviewed_run_scores,
    run_row_with_review,
    runs_by_id,
    stored_run_options,
    version_options,
    version_refs,
    worst_run_rows,
)


def _unexplained(explanation: Mapping[str, object] | None) -> bool:
    """Whether a stored run row's explanation is still to be computed (``None``, or only the
    row's origin: ``{"case": ...}``)."""
    return explanation is None or "score" not in explanation


def run_row_options(run_options: Mapping[str, object], eval_name: str | None) -> JSONObject | None:
    """The scorer options a run row was scored with, from its run's ``options`` (``scorer``
    for a plain run, ``evals`` by eval name for an eval-file run); None when not kept."""
    if eval_name is not None:
        evals = run_options.get("evals")
        got = evals.get(eval_name) if isinstance(evals, dict) else None
    else:
        got = run_options.get("scorer")
    return dict(got) if isinstance(got, dict) else None


def _explain_run_row(row: Result, run_options: Mapping[str, object]) -> dict[str, Any]:
    """The explanation of a run row stored without one: ``scorer.explain(output, reference,
    input=)`` of its own texts with its run's scorer options, ``matched_reference`` the index
    the row matched (as the explanation made at scoring time had it), then its ``case``."""
    stub = row.explanation or {}
    options = run_row_options(run_options, row.eval_name)
    data: dict[str, Any]
    if options is None or row.reference is None:
        data = {"note": "cannot explain: the run did not keep its scorer options"}
    else:
        try:
            scorer = get_scorer(**options)
        except SimevalError as exc:
            data = {"note": f"cannot explain: the run's scorer cannot be built now ({exc})"}
        else:
            data = scorer.explain(row.output or "", [row.reference], 10, row.input).to_dict()
            data["matched_reference"] = row.matched_index
            if scorer.fingerprint != row.fingerprint:
                data["note"] = (
                    f"explained with scorer {scorer.fingerprint}; the result was scored with "
                    f"{row.fingerprint}, so terms may not match the stored score exactly"
                )
    if "case" in stub:
        data["case"] = stub["case"]
    return data


MAX_REVIEWER_CHARS = 200  # the width of reviews.reviewer


def check_reviewer(reviewer: object) -> str | None:
    """A reviewer's name as stored: stripped, None when empty or not given; ``InvalidInput``
    for one that is too long or not storable, ``InvalidType`` for a non-string."""
    if reviewer is None:
        return None
    if not isinstance(reviewer, str):
        raise InvalidType(f"reviewer must be a string, not {type(reviewer).__name__}")
    name = reviewer.strip()
    if len(name) > MAX_REVIEWER_CHARS:
        raise InvalidInput(f"reviewer name is longer than {MAX_REVIEWER_CHARS} characters")
    check_storable(name, "reviewer")
    return name or None


def run_row_missing(row: Result, run_options: Mapping[str, object]) -> list[str]:
    """The missing terms of a stored run row: from its explanation, else explained now as
    ``_explain_run_row`` does (rows are stored without one)."""
    exp = row.explanation if not _unexplained(row.explanation) else None
    if exp is None:
        exp = _explain_run_row(row, run_options)
    terms = [m.get("term") if isinstance(m, dict) else m for m in exp.get("missing") or []]
    return [str(t) for t in terms if t]


class ResultService(Part):
    """Results: list, count, show, review, labelled examples."""

    def _results_out(self, s: Tx, rows: Iterable[Row], explain: bool) -> list[ResultOut]:
        rows = list(rows)
        ids = {r.eval_id for r in rows if r.eval_id is not None}
        names = eval_names_types(s, ids)
        refs = version_refs(s, {(r.eval_id, r.eval_version) for r in rows if r.capture})
        known = version_options(s, set(refs)) if explain else {}
        out = [self._result_out(r, names, refs, explain, s, known) for r in rows]
        if explain:
            # a run row stored without its explanation (only where it came from): explained
            # now, from its own texts and the scorer options its run kept
            todo = [
                (o, r.run_row)
                for o, r in zip(out, rows, strict=True)
                if r.run_row is not None and _unexplained(r.run_row.explanation)
            ]
            if todo:
                run_ids = {row.run_id for _, row in todo}
                options = stored_run_options(s, run_ids)
                for o, row in todo:
                    o.explanation = _explain_run_row(row, options.get(row.run_id) or {})
        run_ids = {o.run_id for o in out if o.run_id is not None}
        if run_ids:
            status = {run.id: effective_status(run) for run in runs_by_id(s, run_ids)}
            out = [
                o if o.run_id is None else o.model_copy(update={"run_status": status.get(o.run_id)})
                for o in out
            ]
        return out

    def _result_out(
        self,
        r: Row,
        names: dict[int, tuple[str, str]],
        refs: dict[tuple[int, int], list[str]],
        explain: bool,
        session: Tx | None = None,
        options: Mapping[tuple[int, int], Mapping[str, object]] | None = None,
    ) -> ResultOut:
        cap, run = r.capture, r.run_row
        explanation = None
        if cap is not None:
            input_, output, conv = cap.input, cap.output, cap.conversation_id
            key = (r.eval_id or 0, r.eval_version or 0)
            ref_list = refs.get(key, [])
            matched = ref_list[r.matched_index] if r.matched_index < len(ref_list) else None
            if explain and ref_list:
                explanation = self._explain(
                    r, input_, output, ref_list, session, (options or {}).get(key)
                )
        else:
            assert run is not None
            input_, output, conv = run.input or "", run.output or "", None
            matched, explanation = run.reference, run.explanation
        name, etype = names.get(r.eval_id, (None, None)) if r.eval_id is not None else (None, None)
        return ResultOut(
            id=r.id,
            capture_id=cap.id if cap is not None else None,
            run_id=run.run_id if run is not None else None,
            eval_id=r.eval_id,
            eval_name=name if name is not None else (run.eval_name if run else None),
            eval_type=etype or "similarity",
            eval_version=r.eval_version,
            input=input_,
            output=output,
            conversation_id=conv,
            metadata=cap.meta if cap is not None else None,
            captured_at=as_utc(r.created_at),
            score=r.score,
            passed=r.passed,
            automated_passed=r.automated_passed,
            threshold=r.threshold,
            fingerprint=r.fingerprint,
            matched_reference=matched,
            matched_index=r.matched_index,
            explanation=explanation,
            review=review_out(r.review),
            created_at=as_utc(r.created_at),
        )

    def _explain(
        self,
        r: Row,
        input: str,
        output: str,
        references: list[str],
        session: Tx | None = None,
        known: Mapping[str, object] | None = None,
    ) -> dict[str, Any]:
        """The explanation of a captured result, with its eval version's scorer options
        (``known``: read already for a page of results; else read here, in the caller's
        read when it has one: an in-memory database has one connection, which cannot open a
        second transaction)."""
        if known is None:
            with contextlib.nullcontext(session) if session else self.store.read() as s:
                pair = (r.eval_id or 0, r.eval_version or 0)
                known = version_options(s, {pair}).get(pair, {})
        options = dict(known)
        try:
            scorer = get_scorer(**options)
        except SimevalError as exc:
            return {"note": f"cannot explain: the eval's scorer cannot be built now ({exc})"}
        data = scorer.explain(output, references, top=10, input=input).to_dict()
        if scorer.fingerprint != r.fingerprint:
            data["note"] = (
                f"explained with scorer {scorer.fingerprint}; the result was scored with "
                f"{r.fingerprint}, so terms may not match the stored score exactly"
            )
        return data

    def list_results(
        self,
        where: ResultFilter | None = None,
        *,
        limit: int = 100,
        offset: int = 0,
        cursor: str | None = None,
        explain: bool = True,
        **filters: Any,
    ) -> list[ResultOut]:
        """Results matching ``where`` (a ``ResultFilter``), newest first. Its fields may be
        given as keywords instead (``list_results(eval_name="capital", passed=False,
        since="7d")``: read by ``ResultFilter.parse``): ``passed`` is the effective verdict
        (reviews win), ``since``/``until`` ISO times or ages like ``7d``, ``meta``
        ``KEY=VALUE`` strings (all must hold; only captured results have metadata).
        ``cursor``: a page's cursor (``page_results``) instead of an ``offset``.
        ``explain=False`` skips the explanations (computed on display for captured results)."""
        return self.page_results(
            where, limit=limit, offset=offset, cursor=cursor, explain=explain, **filters
        ).items

    def page_results(
        self,
        where: ResultFilter | None = None,
        *,
        limit: int = 100,
        offset: int = 0,
        cursor: str | None = None,
        explain: bool = True,
        **filters: Any,
    ) -> Page[ResultOut]:
        """A page of ``list_results`` with the cursors going on from it: ``next_cursor`` (older
        results; None at the end) and ``prev_cursor`` (newer ones; None on the first page).
        With a ``cursor`` the page starts right after the result it names, through the time
        indexes: results stored meanwhile are not repeated and none is skipped. An ``offset``
        still skips rows (bounded); give one or the other."""
        f = filter_of(where, filters)
        limit, offset = check_page(limit, offset)
        position = page_position(cursor, offset, "results", (datetime, int, int, int))
        with self.store.read() as s:
            eval_id = self._eval_id(s, f)

            def fetch(at: Position | None, n: int) -> list[Row]:
                if at is None:
                    rows = iter_rows(s, f, eval_id, limit=offset + n)
                    return list(islice(rows, offset, offset + n))
                key = cast(ResultKey, at.key)
                rows = iter_rows(s, f, eval_id, at.direction == OLDER, key, limit=n)
                return list(islice(rows, n))

            page = keyset_page("results", fetch, result_key, limit, position, offset > 0)
            return Page(
                self._results_out(s, page.items, explain), page.next_cursor, page.prev_cursor
            )

    def count_results(self, where: ResultFilter | None = None, **filters: Any) -> int:
        """How many results ``list_results`` would give with this filter and no limit."""
        f = filter_of(where, filters)
        with self.store.read() as s:
            return count_rows(s, f, self._eval_id(s, f))

    def run_worst(self, run_id: int, limit: int = 10, explain: bool = True) -> list[ResultOut]:
        """A stored run's lowest-scoring rows (automated scores), worst first; ``explain``:
        with their explanations (missing terms), computed for rows stored without one."""
        limit, _ = check_page(limit, 0)
        with self.store.read() as s:
            rows = [run_row(r, review) for r, review in worst_run_rows(s, run_id, limit)]
            return self._results_out(s, rows, explain)

    def _row(self, s: Tx, result_id: object) -> Row:
        where = parse_result_id(result_id)
        if isinstance(where, int):
            found = run_row_with_review(s, where)
            if found is None:
                raise NotFound(f"no result with id {result_id}")
            return run_row(*found)
        capture_id, eval_id = where
        cap = capture_by_id(s, capture_id)
        if cap is not None:
            for row in capture_rows(s, cap, capture_reviews(s, [capture_id])):
                if row.eval_id == eval_id:
                    return row
        raise NotFound(f"no result with id {result_id}")

    def get_result(self, result_id: str) -> ResultOut:
        """One result, with its explanation."""
        with self.store.read() as s:
            row = self._row(s, result_id)
            return self._results_out(s, [row], True)[0]

    def review_result(
        self, result_id: str, score: float | str, note: str = "", reviewer: str | None = None
    ) -> ResultOut:
        """Override a result's score (in [0, 1]) with a note; it decides pass/fail from now on.
        ``reviewer``: who reviewed (up to 200 characters; empty or None: not recorded). A
        second review replaces the first, reviewer included."""
        value = check_unit(score, "review score")
        if not isinstance(note, str):
            raise InvalidType(f"review note must be a string, not {type(note).__name__}")
        if len(note) > 10_000:
            raise InvalidInput("review note is longer than 10,000 characters")
        check_storable(note, "review note")
        # a signed-in user reviews as themself: a name in the request cannot say otherwise
        who = signed_in_user() or check_reviewer(reviewer)

        def work(s: Tx) -> str:
            row = self._row(s, result_id)
            existing = review_by_key(s, row.id)
            if existing is None:
                add_review(
                    s,
                    result_key=row.id,
                    result_id=row.run_row.id if row.run_row is not None else None,
                    capture_id=row.capture.id if row.capture is not None else None,
                    eval_id=row.eval_id if row.capture is not None else None,
                    score=value,
                    note=note,
                    created_at=utc_now(),
                    reviewer=who,
                )
            else:
                existing.score, existing.note, existing.created_at = value, note, utc_now()
                existing.reviewer = who
            record(
                s,
                "review.set",
                f"result:{row.id}",
                score=value,
                reviewer=who,
                eval_id=row.eval_id,
                replaced=existing is not None,
            )
            return row.id

        key: str = self._write(work)
        return self.get_result(key)

    def labelled_results(self, eval_name: str | int) -> list[tuple[float, bool]]:
        """(automated score, the reviewer's verdict) of every reviewed result of an eval: the
        labelled examples ``simeval calibrate --eval`` learns a threshold from."""
        out: list[tuple[float, bool]] = []
        with self.store.read() as s:
            ev = self._find_eval(s, eval_name)
            for review, cap in reviewed_captures(s, ev.id):
                for row in capture_rows(s, cap, {}):
                    if row.eval_id == ev.id:
                        out.append((float(row.score), bool(review.score >= row.threshold)))
            out += [(float(sc), bool(ok)) for sc, ok in reviewed_run_scores(s, ev.id)]
        return out
