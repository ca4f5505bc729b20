"""Capture: the cache of active evals (prepared once per revision), scoring an output
against every active eval in scope, and reading captures back."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, cast

from pydantic import TypeAdapter
from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from simeval import store as store_mod
from simeval.analyzer import scope_key
from simeval.errors import InvalidInput, InvalidOption, InvalidType
from simeval.models import CaptureOut, CaptureResultOut
from simeval.scorer import Scorer, _same_text, get_scorer
from simeval.service.base import ServiceBase
from simeval.service.checks import _check_page, _get, _now, _utc, check_capture
from simeval.service.queries import _effective_passed, _review_out, _version_refs
from simeval.service.settings import _AUTO_KEY, _REV_KEY
from simeval.store import Capture, Eval, Result, Review, Setting

log = logging.getLogger("simeval.service")

_CAPTURE_RESULTS = TypeAdapter(list[CaptureResultOut])


@dataclass
class _Active:
    id: int
    name: str
    version: int
    threshold: float
    references: list[str]
    prepared: list[bytes]


@dataclass
class _Group:
    """The active evals that share one scorer configuration (one output vector for all)."""

    scorer: Scorer
    unscoped: list[_Active] = field(default_factory=list)
    scoped: dict[str, list[_Active]] = field(default_factory=dict)


class CaptureMixin(ServiceBase):
    """Capture and the cache of prepared active evals it scores with."""

    _active: tuple[int, list[_Group]] | None = None

    def _groups(self, s: Session, revision: int) -> list[_Group]:
        """The active evals by scorer configuration, prepared once per ``revision``."""
        cached = self._active
        if cached is None or cached[0] != revision:
            with self._lock:
                # another thread may have prepared this revision while this one waited
                cached = self._active
                if cached is None or cached[0] != revision:
                    cached = self._active = (revision, self._prepare_active(s))
        return cached[1]

    def _prepare_active(self, s: Session) -> list[_Group]:
        groups: dict[str, _Group] = {}
        for ev in s.scalars(select(Eval).where(Eval.status == "active").order_by(Eval.id)):
            try:
                scorer = get_scorer(**ev.options)
                prepared = scorer.prepare(ev.references)
            except (InvalidInput, InvalidOption, InvalidType) as exc:
                # one broken eval (e.g. its IDF table file was deleted) must not stop the
                # others from scoring: it is skipped and said so in the log
                log.warning("eval %r is skipped: %s", ev.name, exc)
                continue
            group = groups.setdefault(
                scorer.fingerprint + repr(sorted(ev.options.items())), _Group(scorer)
            )
            active = _Active(
                ev.id, ev.name, ev.version, ev.threshold, list(ev.references), prepared
            )
            if ev.input_scope is None:
                group.unscoped.append(active)
            else:
                group.scoped.setdefault(scope_key(ev.input_scope), []).append(active)
        return list(groups.values())

    def capture(
        self,
        input: str,
        output: str,
        conversation_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        *,
        explain: bool = False,
        captured_at: Any = None,
    ) -> CaptureOut:
        """Store an engine response and score it against every active eval in scope.

        One transaction: the capture and all its results are stored, or nothing is. With
        automatic evaluation off the capture is stored unscored (``evaluated=False``).
        ``explain=True`` adds the explanation to each failing result in the answer (it is
        always available later from ``get_result``). ``captured_at`` (a datetime or ISO
        text, default now) dates a capture taken from a log, and its results with it.
        Texts longer than ``MAX_TEXT_CHARS`` are refused (``InvalidInput``), nothing stored.
        """
        input, output, conversation_id, metadata, when = check_capture(
            input, output, conversation_id, metadata, captured_at
        )
        key = scope_key(input)

        def work(s: Session) -> CaptureOut:
            now = when or _now()
            conn = s.connection()
            flags: dict[str, Any] = dict(
                conn.execute(
                    select(Setting.key, Setting.value).where(Setting.key.in_((_REV_KEY, _AUTO_KEY)))
                ).all()
            )
            auto = flags.get(_AUTO_KEY, True) is not False
            groups = self._groups(s, int(flags.get(_REV_KEY) or 0)) if auto else []
            capture_id = conn.execute(
                insert(store_mod.captures_table).values(
                    input=input,
                    output=output,
                    conversation_id=conversation_id,
                    metadata=metadata,
                    captured_at=now,
                    evaluated=auto,
                )
            ).inserted_primary_key[0]  # type: ignore[index]
            rows: list[tuple[Any, ...]] = []
            answers: list[dict[str, Any]] = []
            for group in groups:
                targets = group.unscoped + group.scoped.get(key, [])
                if not targets:
                    continue
                scorer = group.scorer
                fp = scorer.fingerprint
                vec = scorer.vector(output)
                best = scorer.best_vector
                for ev in targets:
                    score, at = best(vec, ev.prepared)
                    if 0.9999 < score < 1.0 and _same_text(output, ev.references[at]):
                        score = 1.0  # as `score` does: identical texts are exactly 1.0
                    ok = score >= ev.threshold
                    rows.append((ev.id, ev.version, score, ok, ev.threshold, at, fp))
                    answers.append(
                        {
                            "eval_id": ev.id,
                            "eval_name": ev.name,
                            "eval_version": ev.version,
                            "score": score,
                            "passed": ok,
                            "threshold": ev.threshold,
                            "fingerprint": fp,
                            "matched_index": at,
                            "matched_reference": ev.references[at],
                        }
                    )
                    if explain and not ok:
                        answers[-1]["explanation"] = scorer.explain(
                            output, ev.references, top=10
                        ).to_dict()
            if rows:
                store_mod.bulk_insert(
                    conn,
                    store_mod.results_table,
                    (
                        "eval_id",
                        "eval_version",
                        "score",
                        "passed",
                        "threshold",
                        "matched_index",
                        "fingerprint",
                    ),
                    rows,
                    {"capture_id": capture_id, "created_at": now},
                )
                ids = dict(
                    conn.execute(
                        select(Result.eval_id, Result.id).where(Result.capture_id == capture_id)
                    ).all()
                )
                for a in answers:
                    a["id"] = ids[a["eval_id"]]
            # every field is set here from checked values: the results are validated once, in
            # bulk, and the envelope not again (it would re-check each of 1,000 results)
            return CaptureOut.model_construct(
                id=capture_id,
                input=input,
                output=output,
                conversation_id=conversation_id,
                metadata=metadata,
                captured_at=_utc(now),
                evaluated=auto,
                results=_CAPTURE_RESULTS.validate_python(answers),
            )

        return self._write(work)

    def _capture_out(self, s: Session, cap: Capture) -> CaptureOut:
        rows = s.execute(
            select(Result, Eval.name, Review)
            .join(Eval, Eval.id == Result.eval_id)
            .outerjoin(Review, Review.result_id == Result.id)
            .where(Result.capture_id == cap.id)
            .order_by(Result.id)
        ).all()
        refs = _version_refs(s, {(r.eval_id, r.eval_version) for r, _, _ in rows})
        results = []
        for r, name, review in rows:
            eval_id, version = cast(int, r.eval_id), cast(int, r.eval_version)
            ref_list = refs.get((eval_id, version), [])
            results.append(
                CaptureResultOut(
                    id=r.id,
                    eval_id=eval_id,
                    eval_name=name,
                    eval_version=version,
                    score=r.score,
                    passed=_effective_passed(r, review),
                    threshold=r.threshold,
                    fingerprint=r.fingerprint,
                    matched_index=r.matched_index,
                    matched_reference=ref_list[r.matched_index]
                    if r.matched_index < len(ref_list)
                    else "",
                    review=_review_out(review),
                )
            )
        return CaptureOut(
            id=cap.id,
            input=cap.input,
            output=cap.output,
            conversation_id=cap.conversation_id,
            metadata=cap.meta,
            captured_at=_utc(cap.captured_at),
            evaluated=cap.evaluated,
            results=results,
        )

    def get_capture(self, capture_id: int) -> CaptureOut:
        """A stored capture with its results."""
        with self.store.read() as s:
            return self._capture_out(s, _get(s, Capture, capture_id, "capture"))

    def list_captures(
        self, limit: int = 50, offset: int = 0, conversation_id: str | None = None
    ) -> list[CaptureOut]:
        """Captures, newest first, with their results."""
        limit, offset = _check_page(limit, offset)
        with self.store.read() as s:
            q = select(Capture).order_by(Capture.captured_at.desc(), Capture.id.desc())
            if conversation_id is not None:
                q = q.where(Capture.conversation_id == str(conversation_id))
            return [self._capture_out(s, c) for c in s.scalars(q.limit(limit).offset(offset))]
