"""Results: listing, counting, one result with its explanation, reviews, and the labelled
examples calibration learns from."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from simeval.errors import InvalidInput, InvalidOption, InvalidType, NotFound
from simeval.models import ResultOut
from simeval.options import check_unit
from simeval.scorer import get_scorer
from simeval.service.checks import _check_id, _check_page, _get, _now, _utc
from simeval.service.queries import QueriesMixin, _effective_passed, _review_out, _version_refs
from simeval.store import Capture, EvalVersion, Result, Review


class ResultsMixin(QueriesMixin):
    """Results: list, count, show, review, labelled examples."""

    def _result_out(
        self,
        r: Result,
        cap: Capture | None,
        name: str | None,
        etype: str | None,
        review: Review | None,
        refs: dict[tuple[int, int], list[str]],
        explain: bool,
    ) -> ResultOut:
        if cap is not None:
            input_, output, conv, when = cap.input, cap.output, cap.conversation_id, cap.captured_at
        else:
            input_, output, conv, when = r.input or "", r.output or "", None, r.created_at
        ref_list: list[str] = []
        if r.eval_id is not None and r.eval_version is not None:
            ref_list = refs.get((r.eval_id, r.eval_version), [])
        if r.reference is not None:
            matched: str | None = r.reference
        elif r.matched_index < len(ref_list):
            matched = ref_list[r.matched_index]
        else:
            matched = None
        explanation = r.explanation
        if explanation is None and explain and cap is not None and ref_list:
            explanation = self._explain(r, output, ref_list)
        return ResultOut(
            id=r.id,
            capture_id=r.capture_id,
            run_id=r.run_id,
            eval_id=r.eval_id,
            eval_name=name if name is not None else r.eval_name,
            eval_type=etype or "similarity",
            eval_version=r.eval_version,
            input=input_,
            output=output,
            conversation_id=conv,
            captured_at=_utc(when),
            score=r.score,
            passed=_effective_passed(r, review),
            automated_passed=r.passed,
            threshold=r.threshold,
            fingerprint=r.fingerprint,
            matched_reference=matched,
            matched_index=r.matched_index,
            explanation=explanation,
            review=_review_out(review),
            created_at=_utc(r.created_at),
        )

    def _explain(self, r: Result, output: str, references: list[str]) -> dict[str, Any]:
        with self.store.read() as s:
            version = s.scalar(
                select(EvalVersion).where(
                    EvalVersion.eval_id == r.eval_id, EvalVersion.version == r.eval_version
                )
            )
        options = dict(version.options) if version else {}
        try:
            scorer = get_scorer(**options)
        except (InvalidInput, InvalidOption) as exc:
            return {"note": f"cannot explain: the eval's scorer cannot be built now ({exc})"}
        data = scorer.explain(output, references, top=10).to_dict()
        if scorer.fingerprint != r.fingerprint:
            data["note"] = (
                f"explained with scorer {scorer.fingerprint}; the result was scored with "
                f"{r.fingerprint}, so terms may not match the stored score exactly"
            )
        return data

    def list_results(
        self,
        eval_name: str | int | None = None,
        passed: bool | None = None,
        since: Any = None,
        until: Any = None,
        reviewed: bool | None = None,
        run_id: int | None = None,
        limit: int = 100,
        offset: int = 0,
        *,
        explain: bool = True,
    ) -> list[ResultOut]:
        """Results, newest first. ``passed`` filters on the effective verdict (reviews win);
        ``since``/``until`` take ISO times or ages like ``7d``. ``explain=False`` skips the
        explanations (they are computed on display for captured results)."""
        limit, offset = _check_page(limit, offset)
        with self.store.read() as s:
            q = self._results_query(s, eval_name, passed, since, until, reviewed, run_id)
            q = q.order_by(Result.created_at.desc(), Result.id.desc()).limit(limit).offset(offset)
            rows = s.execute(q).all()
            refs = _version_refs(s, {(r.eval_id, r.eval_version) for r, *_ in rows})
        return [self._result_out(r, c, n, t, v, refs, explain) for r, c, n, t, v in rows]

    def count_results(
        self,
        eval_name: str | int | None = None,
        passed: bool | None = None,
        since: Any = None,
        until: Any = None,
        reviewed: bool | None = None,
        run_id: int | None = None,
    ) -> int:
        """How many results ``list_results`` would give with these filters and no limit."""
        with self.store.read() as s:
            q = self._results_query(s, eval_name, passed, since, until, reviewed, run_id)
            return int(s.scalar(select(func.count()).select_from(q.subquery())) or 0)

    def get_result(self, result_id: int) -> ResultOut:
        """One result, with its explanation."""
        rid = _check_id(result_id, "result")
        with self.store.read() as s:
            row = s.execute(self._results_query(s).where(Result.id == rid)).first()
            if row is None:
                raise NotFound(f"no result with id {result_id}")
            refs = _version_refs(s, {(row[0].eval_id, row[0].eval_version)})
        r, c, n, t, v = row
        return self._result_out(r, c, n, t, v, refs, True)

    def review_result(self, result_id: int, score: float, note: str = "") -> ResultOut:
        """Override a result's score (in [0, 1]) with a note; it decides pass/fail from now on.
        A second review replaces the first."""
        rid = _check_id(result_id, "result")
        value = check_unit(score, "review score")
        if not isinstance(note, str):
            raise InvalidType(f"review note must be a string, not {type(note).__name__}")
        if len(note) > 10_000:
            raise InvalidInput("review note is longer than 10,000 characters")

        def work(s: Session) -> None:
            _get(s, Result, result_id, "result")
            existing = s.scalar(select(Review).where(Review.result_id == rid))
            if existing is None:
                s.add(Review(result_id=rid, score=value, note=note, created_at=_now()))
            else:
                existing.score, existing.note, existing.created_at = value, note, _now()

        self._write(work)
        return self.get_result(rid)

    def labelled_results(self, eval_name: str | int) -> list[tuple[float, bool]]:
        """(automated score, the reviewer's verdict) of every reviewed result of an eval: the
        labelled examples ``simeval calibrate --eval`` learns a threshold from."""
        with self.store.read() as s:
            ev = self._find_eval(s, eval_name)
            q = (
                select(Result.score, Review.score >= Result.threshold)
                .join(Review, Review.result_id == Result.id)
                .where(Result.eval_id == ev.id)
                .order_by(Result.id)
            )
            return [(float(sc), bool(ok)) for sc, ok in s.execute(q)]
