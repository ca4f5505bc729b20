"""The service: the one API the CLI, the HTTP API and the studio pages call.

``Service(db)`` opens a store (creating or migrating it) and offers the eval lifecycle, captures
and their results, reviews, trends, settings, retention, export/import, and data-set runs. User
mistakes raise ``SimevalError`` subclasses with a one-line message (``NotFound`` 404,
``Conflict`` 409, ``InvalidInput``/``InvalidOption``/``InvalidType`` 400).

Decisions worth knowing:

- Input scope: an eval with a scope fires only on captures whose input *equals* the scope after
  Unicode NFKC normalisation, case folding and whitespace folding (``scope_key``); an unscoped
  eval fires on every capture.
- Capture: the capture and all its results are written in one transaction. The reference
  vectors of the active evals are prepared once per process and cached; the cache is keyed by a
  revision counter stored in the database, which every change to an eval bumps, so a change
  made by another process is picked up on the next capture. The output is vectorised once per
  scorer configuration and compared with every eval's prepared references.
- Explanations of capture results are computed when a result is shown, not when it is stored:
  an explanation is a pure function of the output, the matched eval version's references and
  its scorer options, all of which are stored, and computing it for 1,000 evals per capture
  would cost ten times the scoring itself. If the scorer's fingerprint today differs from the
  stored one (e.g. a corpus IDF table changed), the explanation carries a ``note`` saying so.
  Tests and data-set run rows store their explanation.
- Reviews override pass/fail everywhere (listings, trends, stats, exports): the effective
  score is the review's, and a result passes when it is at or above the threshold used.
  The automated score and verdict stay visible beside it.
- Editing the references, threshold, scope or options of an active eval makes it a draft
  again: the new version needs its own passing test before it scores captures (renaming
  keeps the status). ``deactivate`` makes an active or archived eval a draft.
- Size: a capture's or a test's input and output may each have up to ``MAX_TEXT_CHARS``
  (1,000,000) characters, the most the HTTP API's default 1 MiB body can carry, so the library,
  the CLI and the API accept the same captures. A longer text (say a 10 MB runaway generation)
  is refused with ``InvalidInput`` naming its size, and nothing is stored: a store that keeps
  every capture should not silently grow by megabytes per response, and truncating would store
  something the engine never said. Data-set runs (``add_run_results``) have no such limit.
- ``capture(..., captured_at=...)`` backfills a capture from a log: the capture and its results
  are dated then (trends and retention use that time).
- Trends and eval stats count captured results; data-set runs are listed by ``run_id``.

>>> svc = Service(":memory:")
>>> ev = svc.create_eval("capital", "Paris is the capital of France.")
>>> svc.test_eval("capital", "Capital of France?", "The capital of France is Paris.").passed
True
>>> svc.activate_eval("capital").status
'active'
>>> [r.passed for r in svc.capture("Capital of France?", "Paris is France's capital.").results]
[True]
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import logging
import math
import os
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import IO, Any, TypeVar, cast

from pydantic import TypeAdapter
from sqlalchemy import (
    and_,
    case,
    delete,
    false,
    func,
    insert,
    or_,
    select,
    true,
)
from sqlalchemy.engine import CursorResult
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from simeval import store as store_mod
from simeval.analyzer import scope_key
from simeval.errors import Conflict, InvalidInput, InvalidOption, InvalidType, NotFound
from simeval.models import (
    CaptureOut,
    CaptureResultOut,
    CleanupOut,
    EvalOut,
    EvalStats,
    EvalVersionOut,
    ResultOut,
    ReviewOut,
    RunOut,
    SettingsOut,
    TestOut,
    TrendBucket,
    TrendOut,
    strictness,
)
from simeval.scorer import (
    DEFAULT_THRESHOLD,
    Scorer,
    _same_text,
    check_references,
    check_text,
    check_threshold,
    get_scorer,
    read_text_file,
)
from simeval.store import (
    Capture,
    Eval,
    EvalTest,
    EvalVersion,
    Result,
    Review,
    Run,
    Setting,
    Store,
    resolve_db_url,
)

log = logging.getLogger(__name__)

MAX_TEXT_CHARS = 1_000_000
MAX_NAME_CHARS = 200
RETENTION_CHOICES = (7, 30, 90, 180)
BUCKETS = ("hour", "day", "week")
EXPORT_COLUMNS = (
    "result_id",
    "capture_id",
    "run_id",
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
)
EVALS_FORMAT = 1
_EVAL_KEYS = {
    "name",
    "type",
    "status",
    "references",
    "reference",
    "threshold",
    "input_scope",
    "options",
    "test",
}
_REV_KEY, _AUTO_KEY, _RETENTION_KEY = "evals_revision", "auto_evaluate", "retention_days"
_RUN_CHUNK = 10_000


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()
"""Marker for "leave unchanged" where None is a meaningful value (e.g. no input scope)."""

_CAPTURE_RESULTS = TypeAdapter(list[CaptureResultOut])
_M = TypeVar("_M", Capture, Result, Run)


# -- small helpers --------------------------------------------------------------------------------
def _now() -> datetime:
    """Naive UTC: what the database stores."""
    return datetime.now(UTC).replace(tzinfo=None)


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([mhdw])\s*$", re.IGNORECASE)


def parse_time(value: Any, what: str = "time", now: datetime | None = None) -> datetime | None:
    """A point in time as naive UTC: a datetime, a date, ISO 8601 text, or a relative age such
    as ``30m``, ``24h``, ``7d``, ``2w`` (that long before now). Naive times are taken as UTC.

    >>> parse_time("2024-05-01T12:00:00+02:00")
    datetime.datetime(2024, 5, 1, 10, 0)
    >>> parse_time("2d", now=datetime(2024, 5, 3))
    datetime.datetime(2024, 5, 1, 0, 0)
    """
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return _utc(value).replace(tzinfo=None)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day)
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a date or time, not {value!r}")
    match = _RELATIVE.match(value)
    if match:
        amount, unit = float(match.group(1)), match.group(2).lower()
        span = {
            "m": timedelta(minutes=amount),
            "h": timedelta(hours=amount),
            "d": timedelta(days=amount),
            "w": timedelta(weeks=amount),
        }[unit]
        return (now or _now()) - span
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidInput(
            f"{what} {value!r} is not an ISO 8601 date/time or an age like 24h, 7d"
        ) from None
    return _utc(parsed).replace(tzinfo=None)


def _check_name(name: Any) -> str:
    if not isinstance(name, str):
        raise InvalidType(f"eval name must be a string, not {type(name).__name__}")
    clean = name.strip()
    if not clean:
        raise InvalidInput("eval name is empty")
    if len(clean) > MAX_NAME_CHARS:
        raise InvalidInput(f"eval name is longer than {MAX_NAME_CHARS} characters")
    if any(unicodedata.category(c) == "Cc" for c in clean):
        raise InvalidInput("eval name contains a control character (e.g. a newline)")
    return clean


def _check_scope(scope: Any) -> str | None:
    if scope is None:
        return None
    if not isinstance(scope, str):
        raise InvalidType(f"input scope must be a string or null, not {type(scope).__name__}")
    # a blank scope from a form means "no scope"
    return scope.strip() or None


def _check_options(options: Any) -> tuple[dict[str, Any], str]:
    """Validated scorer options (as given, None values dropped) and their fingerprint."""
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise InvalidOption(f"scorer options must be a mapping, not {type(options).__name__}")
    opts = {k: v for k, v in options.items() if v is not None}
    for key, value in opts.items():
        if not isinstance(value, str | int | float | bool):
            raise InvalidOption(f"scorer option {key!r} must be a plain value, not {value!r}")
    idf = opts.get("idf")
    if isinstance(idf, str) and idf not in ("background", "pair") and idf.strip():
        # a corpus table file: store where it is, so captures from another directory find it
        opts["idf"] = str(Path(idf).expanduser().resolve())
    scorer = get_scorer(**opts)
    return opts, scorer.fingerprint


def _check_text_size(text: str, what: str) -> None:
    if len(text) > MAX_TEXT_CHARS:
        raise InvalidInput(
            f"{what} has {len(text):,} characters; simeval stores at most {MAX_TEXT_CHARS:,} "
            "per text (nothing was stored)"
        )


def _check_texts(input: Any, output: Any) -> None:
    """A capture's or a test's input and output: strings of at most ``MAX_TEXT_CHARS``."""
    check_text(input, "input")
    check_text(output, "output")
    _check_text_size(input, "input")
    _check_text_size(output, "output")


def check_capture(
    input: Any,
    output: Any,
    conversation_id: Any = None,
    metadata: Any = None,
    captured_at: Any = None,
) -> tuple[str, str, str | None, dict[str, Any] | None, datetime | None]:
    """The arguments of ``Service.capture`` checked, as it stores them: ``InvalidInput`` or
    ``InvalidType`` naming the problem. Lets a caller check a whole batch before storing any.

    >>> check_capture("q", "a", 42, None, "2024-05-01T12:00:00Z")
    ('q', 'a', '42', None, datetime.datetime(2024, 5, 1, 12, 0))
    """
    _check_texts(input, output)
    if conversation_id is not None:
        if isinstance(conversation_id, bool) or not isinstance(conversation_id, str | int):
            raise InvalidType("conversation_id must be a string")
        conversation_id = str(conversation_id)
        if len(conversation_id) > 200:
            raise InvalidInput("conversation_id is longer than 200 characters")
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise InvalidType(f"metadata must be a JSON object, not {type(metadata).__name__}")
        try:
            json.dumps(metadata)
        except (TypeError, ValueError) as exc:
            raise InvalidType(f"metadata is not JSON: {exc}") from None
    return input, output, conversation_id, metadata, parse_time(captured_at, "captured_at")


def _check_unit(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidInput(f"{what} must be a number in [0, 1], not {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise InvalidInput(f"{what} must be a number in [0, 1], not {value!r}") from None
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise InvalidInput(f"{what} must be a number in [0, 1], not {value!r}")
    return number


def _effective_pass() -> ColumnElement[bool]:
    """SQL: the result passes, a review's score deciding when there is one."""
    return or_(
        and_(Review.score.is_not(None), Review.score >= Result.threshold),
        and_(Review.score.is_(None), Result.passed == true()),
    )


def _effective_fail() -> ColumnElement[bool]:
    return or_(
        and_(Review.score.is_not(None), Review.score < Result.threshold),
        and_(Review.score.is_(None), Result.passed == false()),
    )


def _in_range(q: Any, start: datetime | None, end: datetime | None) -> Any:
    """``q`` limited to results created in [start, end) (either end may be open)."""
    if start is not None:
        q = q.where(Result.created_at >= start)
    if end is not None:
        q = q.where(Result.created_at < end)
    return q


def _effective_passed(r: Result, review: Review | None) -> bool:
    """A result's verdict, a review's score deciding when there is one (``_effective_pass``)."""
    return review.score >= r.threshold if review else r.passed


def _review_out(review: Review | None) -> ReviewOut | None:
    if review is None:
        return None
    return ReviewOut(score=review.score, note=review.note, created_at=_utc(review.created_at))


def _version_row(ev: Eval, changes: dict[str, Any]) -> EvalVersion:
    """The eval's current version as the row kept for ever, with what changed."""
    return EvalVersion(
        eval_id=ev.id,
        version=ev.version,
        references=ev.references,
        threshold=ev.threshold,
        input_scope=ev.input_scope,
        options=ev.options,
        fingerprint=ev.fingerprint,
        changes=changes,
        created_at=ev.updated_at,
    )


# -- the cache of active evals ------------------------------------------------------------------
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


# -- the service ----------------------------------------------------------------------------------
class Service:
    """One database's evals, captures and results. Thread-safe; one per process is enough
    (``open_service``)."""

    def __init__(self, db: str | os.PathLike[str] | None = None):
        self.url = resolve_db_url(db)
        self.store = Store(self.url)
        self._active: tuple[int, list[_Group]] | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the database connections."""
        self.store.close()
        with _SERVICES_LOCK:
            if _SERVICES.get(self.url) is self:
                del _SERVICES[self.url]

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- lookups --------------------------------------------------------------------------------
    def _find_eval(self, s: Session, name_or_id: Any) -> Eval:
        if isinstance(name_or_id, Eval):
            return name_or_id
        if isinstance(name_or_id, bool) or not isinstance(name_or_id, str | int):
            raise InvalidType(f"eval name must be a string, not {type(name_or_id).__name__}")
        if isinstance(name_or_id, str):
            found = s.scalar(select(Eval).where(Eval.name == name_or_id.strip()))
            if found is not None:
                return found
        if isinstance(name_or_id, int) or name_or_id.strip().isdigit():
            by_id = s.get(Eval, int(name_or_id))
            if by_id is not None:
                return by_id
        names = list(s.scalars(select(Eval.name)))
        close = difflib.get_close_matches(str(name_or_id), names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise NotFound(f"no eval named {str(name_or_id)!r}{hint}")

    def _latest_test(self, s: Session, ev: Eval, passed: bool = False) -> EvalTest | None:
        """The latest test of the eval's current version (the latest passing one if asked)."""
        q = select(EvalTest).where(EvalTest.eval_id == ev.id, EvalTest.version == ev.version)
        if passed:
            q = q.where(EvalTest.passed == true())
        return s.scalar(q.order_by(EvalTest.id.desc()).limit(1))

    @staticmethod
    def _blocker(ev: Eval, test: EvalTest | None) -> str | None:
        if ev.status == "active":
            return None
        if ev.status == "archived":
            return f"eval {ev.name!r} is archived: restore it with deactivate first"
        if test is None:
            return (
                f"eval {ev.name!r} has no test of its current version {ev.version}: run a test "
                "that passes, then activate"
            )
        if not test.passed:
            return (
                f"the latest test of eval {ev.name!r} version {ev.version} failed (score "
                f"{test.score:.4f} below the threshold {test.threshold:.2f}): run a test that "
                "passes, then activate"
            )
        return None

    def _test_out(self, ev_name: str, t: EvalTest, references: list[str]) -> TestOut:
        return TestOut(
            id=t.id,
            eval_name=ev_name,
            version=t.version,
            input=t.input,
            output=t.output,
            score=t.score,
            passed=t.passed,
            threshold=t.threshold,
            matched_index=t.matched_index,
            matched_reference=references[t.matched_index]
            if 0 <= t.matched_index < len(references)
            else "",
            explanation=t.explanation,
            fingerprint=t.fingerprint,
            in_scope=t.in_scope,
            created_at=_utc(t.created_at),
        )

    def _stats(self, s: Session, eval_ids: Sequence[int]) -> dict[int, EvalStats]:
        if not eval_ids:
            return {}
        q = (
            select(
                Result.eval_id,
                func.count(Result.id),
                func.avg(func.coalesce(Review.score, Result.score)),
                func.sum(case((_effective_pass(), 1), else_=0)),
            )
            .outerjoin(Review, Review.result_id == Result.id)
            .where(Result.eval_id.in_(eval_ids), Result.capture_id.is_not(None))
            .group_by(Result.eval_id)
        )
        out = {}
        for eval_id, count, mean, passes in s.execute(q):
            out[eval_id] = EvalStats(
                results=count,
                pass_rate=(passes or 0) / count if count else None,
                mean_score=float(mean) if mean is not None else None,
            )
        return out

    def _eval_out(
        self,
        s: Session,
        ev: Eval,
        test: EvalTest | _Unset | None = UNSET,
        stats: EvalStats | _Unset | None = UNSET,
    ) -> EvalOut:
        if isinstance(test, _Unset):
            test = self._latest_test(s, ev)
        if isinstance(stats, _Unset):
            stats = self._stats(s, [ev.id]).get(
                ev.id, EvalStats(results=0, pass_rate=None, mean_score=None)
            )
        blocker = self._blocker(ev, test)
        return EvalOut(
            id=ev.id,
            name=ev.name,
            type="similarity",
            status=ev.status,  # type: ignore[arg-type]
            version=ev.version,
            references=list(ev.references),
            threshold=ev.threshold,
            strictness=strictness(ev.threshold),
            input_scope=ev.input_scope,
            options=dict(ev.options),
            fingerprint=ev.fingerprint,
            created_at=_utc(ev.created_at),
            updated_at=_utc(ev.updated_at),
            can_activate=ev.status == "draft" and blocker is None,
            activation_blocker=blocker,
            last_test=self._test_out(ev.name, test, ev.references) if test else None,
            stats=stats,
        )

    def _bump_revision(self, s: Session) -> None:
        """Tell every process's capture cache that the evals changed."""
        row = s.scalar(select(Setting).where(Setting.key == _REV_KEY).with_for_update())
        if row is None:
            s.add(Setting(key=_REV_KEY, value=1))
        else:
            row.value = int(row.value or 0) + 1
        s.flush()

    # -- evals ----------------------------------------------------------------------------------
    def create_eval(
        self,
        name: str,
        references: str | Sequence[str],
        threshold: float = DEFAULT_THRESHOLD,
        input_scope: str | None = None,
        options: dict[str, Any] | None = None,
    ) -> EvalOut:
        """Create a draft eval (version 1).

        ``references``: one reference answer or a list (the best match scores). Raises
        ``Conflict`` for a name in use, ``InvalidInput`` for an empty name or reference or a
        threshold outside [0, 1], ``InvalidOption`` for a bad scorer option.
        """
        clean = _check_name(name)
        refs = check_references(references)
        limit = check_threshold(threshold)
        scope = _check_scope(input_scope)
        opts, fp = _check_options(options)

        def work(s: Session) -> EvalOut:
            ev = self._create(s, clean, refs, limit, scope, opts, fp)
            return self._eval_out(
                s, ev, test=None, stats=EvalStats(results=0, pass_rate=None, mean_score=None)
            )

        return self._write(work)

    def _write(self, fn: Callable[[Session], Any]) -> Any:
        try:
            return self.store.run_write(fn)
        except IntegrityError as exc:  # a race lost to another process: same as the check
            if "name" in str(exc.orig).lower():
                raise Conflict("an eval with that name already exists") from None
            raise

    def _create(
        self,
        s: Session,
        name: str,
        refs: list[str],
        threshold: float,
        scope: str | None,
        opts: dict[str, Any],
        fp: str,
    ) -> Eval:
        if s.scalar(select(Eval.id).where(Eval.name == name)) is not None:
            raise Conflict(f"an eval named {name!r} already exists")
        now = _now()
        ev = Eval(
            name=name,
            type="similarity",
            status="draft",
            version=1,
            references=refs,
            threshold=threshold,
            input_scope=scope,
            options=opts,
            fingerprint=fp,
            created_at=now,
            updated_at=now,
        )
        s.add(ev)
        s.flush()
        s.add(_version_row(ev, {"created": True}))
        self._bump_revision(s)
        return ev

    def get_eval(self, name_or_id: str | int) -> EvalOut:
        """An eval by name (or id), with its latest test and its stats."""
        with self.store.read() as s:
            return self._eval_out(s, self._find_eval(s, name_or_id))

    def list_evals(
        self, status: str | None = None, include_archived: bool = False
    ) -> list[EvalOut]:
        """Evals by name; archived ones only when asked (or with ``status="archived"``)."""
        if status is not None and status not in ("draft", "active", "archived"):
            raise InvalidInput(f"status must be draft, active or archived, not {status!r}")
        with self.store.read() as s:
            q = select(Eval).order_by(Eval.name)
            if status is not None:
                q = q.where(Eval.status == status)
            elif not include_archived:
                q = q.where(Eval.status != "archived")
            evs = list(s.scalars(q))
            ids = [e.id for e in evs]
            stats = self._stats(s, ids)
            tests: dict[int, EvalTest] = {}
            if ids:
                latest = (
                    select(func.max(EvalTest.id))
                    .join(Eval, and_(Eval.id == EvalTest.eval_id, Eval.version == EvalTest.version))
                    .where(EvalTest.eval_id.in_(ids))
                    .group_by(EvalTest.eval_id)
                )
                for t in s.scalars(select(EvalTest).where(EvalTest.id.in_(latest))):
                    tests[t.eval_id] = t
            empty = EvalStats(results=0, pass_rate=None, mean_score=None)
            return [self._eval_out(s, e, tests.get(e.id), stats.get(e.id, empty)) for e in evs]

    def eval_versions(self, name: str | int) -> list[EvalVersionOut]:
        """Every version of an eval, oldest first, with what each one changed."""
        with self.store.read() as s:
            ev = self._find_eval(s, name)
            rows = s.scalars(
                select(EvalVersion)
                .where(EvalVersion.eval_id == ev.id)
                .order_by(EvalVersion.version)
            )
            return [
                EvalVersionOut(
                    version=v.version,
                    created_at=_utc(v.created_at),
                    changes=v.changes,
                    references=list(v.references),
                    threshold=v.threshold,
                    input_scope=v.input_scope,
                    options=dict(v.options),
                    fingerprint=v.fingerprint,
                )
                for v in rows
            ]

    def edit_eval(
        self,
        name: str | int,
        *,
        new_name: str | None = None,
        references: str | Sequence[str] | None = None,
        threshold: float | None = None,
        input_scope: Any = UNSET,
        options: dict[str, Any] | None = None,
    ) -> EvalOut:
        """Change an eval; any change makes a new version that records what changed.

        ``input_scope=None`` removes the scope (leave it out to keep it); ``options={}`` resets
        the scorer options to the defaults. Changing what scores (references, threshold,
        scope, options) of an active eval makes it a draft until a test of the new version
        passes and it is activated again.
        """
        changes_in: dict[str, Any] = {}
        if new_name is not None:
            changes_in["name"] = _check_name(new_name)
        if references is not None:
            changes_in["references"] = check_references(references)
        if threshold is not None:
            changes_in["threshold"] = check_threshold(threshold)
        if not isinstance(input_scope, _Unset):
            changes_in["input_scope"] = _check_scope(input_scope)
        if options is not None:
            changes_in["options"], changes_in["fingerprint"] = _check_options(options)

        def edit(s: Session, ev: Eval) -> None:
            if ev.status == "archived":
                raise Conflict(f"eval {ev.name!r} is archived: restore it with deactivate first")
            self._edit(s, ev, changes_in)

        return self._change_eval(name, edit)

    def _change_eval(self, name: str | int, change: Callable[[Session, Eval], Any]) -> EvalOut:
        """``change(session, eval)`` in a write transaction; the eval as it is then."""

        def work(s: Session) -> EvalOut:
            ev = self._find_eval(s, name)
            change(s, ev)
            return self._eval_out(s, ev)

        out: EvalOut = self._write(work)
        return out

    def _edit(self, s: Session, ev: Eval, wanted: dict[str, Any]) -> dict[str, Any]:
        changes: dict[str, Any] = {}
        for key in ("name", "references", "threshold", "input_scope", "options", "fingerprint"):
            if key in wanted and wanted[key] != getattr(ev, key):
                changes[key] = {"from": getattr(ev, key), "to": wanted[key]}
        if not changes:
            return {}
        if (
            "name" in changes
            and s.scalar(select(Eval.id).where(Eval.name == wanted["name"], Eval.id != ev.id))
            is not None
        ):
            raise Conflict(f"an eval named {wanted['name']!r} already exists")
        for key, change in changes.items():
            setattr(ev, key, change["to"])
        scoring = set(changes) - {"name"}
        if scoring and ev.status == "active":
            ev.status = "draft"
            changes["status"] = {"from": "active", "to": "draft"}
        ev.version += 1
        ev.updated_at = _now()
        s.add(_version_row(ev, changes))
        self._bump_revision(s)
        return changes

    def test_eval(self, name: str | int, input: str, output: str) -> TestOut:
        """Score a sample input/output with the eval's current version, store and return it
        (with the full explanation)."""
        _check_texts(input, output)

        def work(s: Session) -> TestOut:
            ev = self._find_eval(s, name)
            return self._test(s, ev, input, output)

        return self._write(work)

    def _test(self, s: Session, ev: Eval, input: str, output: str) -> TestOut:
        scorer = get_scorer(**ev.options)
        exp = scorer.explain(output, ev.references, top=10)
        in_scope = ev.input_scope is None or scope_key(input) == scope_key(ev.input_scope)
        test = EvalTest(
            eval_id=ev.id,
            version=ev.version,
            input=input,
            output=output,
            score=exp.score,
            passed=exp.score >= ev.threshold,
            threshold=ev.threshold,
            matched_index=exp.matched_reference,
            explanation=exp.to_dict(),
            fingerprint=scorer.fingerprint,
            in_scope=in_scope,
            created_at=_now(),
        )
        s.add(test)
        s.flush()
        return self._test_out(ev.name, test, ev.references)

    def activate_eval(self, name: str | int) -> EvalOut:
        """Make an eval score every matching capture. ``Conflict`` (saying why) unless the
        latest test of its current version passed."""
        return self._change_eval(name, self._activate)

    def _activate(self, s: Session, ev: Eval) -> bool:
        if ev.status == "active":
            return False
        blocker = self._blocker(ev, self._latest_test(s, ev))
        if blocker:
            raise Conflict(f"cannot activate: {blocker}")
        self._set_status(s, ev, "active")
        return True

    def _set_status(self, s: Session, ev: Eval, status: str) -> bool:
        if ev.status == status:
            return False
        ev.status = status
        ev.updated_at = _now()
        self._bump_revision(s)
        return True

    def deactivate_eval(self, name: str | int) -> EvalOut:
        """Stop an eval scoring captures (status draft); also restores an archived eval."""
        return self._change_eval(name, lambda s, ev: self._set_status(s, ev, "draft"))

    def archive_eval(self, name: str | int) -> EvalOut:
        """Hide an eval from listings and stop it scoring; its results are kept."""
        return self._change_eval(name, lambda s, ev: self._set_status(s, ev, "archived"))

    # -- capture --------------------------------------------------------------------------------
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
        refs = self._version_refs(s, {(r.eval_id, r.eval_version) for r, _, _ in rows})
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

    # -- results --------------------------------------------------------------------------------
    @staticmethod
    def _version_refs(s: Session, pairs: set[tuple[Any, Any]]) -> dict[tuple[int, int], list[str]]:
        eval_ids = {e for e, _ in pairs if e is not None}
        if not eval_ids:
            return {}
        q = select(EvalVersion.eval_id, EvalVersion.version, EvalVersion.references).where(
            EvalVersion.eval_id.in_(eval_ids)
        )
        return {(e, v): list(refs) for e, v, refs in s.execute(q) if (e, v) in pairs}

    def _results_query(
        self,
        s: Session,
        eval_name: str | int | None = None,
        passed: bool | None = None,
        since: Any = None,
        until: Any = None,
        reviewed: bool | None = None,
        run_id: int | None = None,
    ) -> Any:
        q = (
            select(Result, Capture, Eval.name, Eval.type, Review)
            .outerjoin(Capture, Capture.id == Result.capture_id)
            .outerjoin(Eval, Eval.id == Result.eval_id)
            .outerjoin(Review, Review.result_id == Result.id)
        )
        if eval_name is not None:
            q = q.where(Result.eval_id == self._find_eval(s, eval_name).id)
        if passed is not None:
            q = q.where(_effective_pass() if passed else _effective_fail())
        q = _in_range(q, parse_time(since, "since"), parse_time(until, "until"))
        if reviewed is not None:
            q = q.where(Review.id.is_not(None) if reviewed else Review.id.is_(None))
        if run_id is not None:
            q = q.where(Result.run_id == _check_id(run_id, "run"))
        return q

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
            refs = self._version_refs(s, {(r.eval_id, r.eval_version) for r, *_ in rows})
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
            refs = self._version_refs(s, {(row[0].eval_id, row[0].eval_version)})
        r, c, n, t, v = row
        return self._result_out(r, c, n, t, v, refs, True)

    def review_result(self, result_id: int, score: float, note: str = "") -> ResultOut:
        """Override a result's score (in [0, 1]) with a note; it decides pass/fail from now on.
        A second review replaces the first."""
        rid = _check_id(result_id, "result")
        value = _check_unit(score, "review score")
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

    # -- trend ----------------------------------------------------------------------------------
    def trend(
        self, eval_name: str | int, bucket: str = "day", since: Any = None, until: Any = None
    ) -> TrendOut:
        """An eval's captured results per hour, day or week (UTC): count, mean score and pass
        rate (reviews win), the versions and scorer fingerprints in force. A bucket whose
        fingerprints differ from the previous bucket's (or vary within it) is flagged as a
        break: scores on either side are not comparable."""
        if bucket not in BUCKETS:
            raise InvalidInput(f"bucket must be hour, day or week, not {bucket!r}")
        start, end = parse_time(since, "since"), parse_time(until, "until")
        with self.store.read() as s:
            ev = self._find_eval(s, eval_name)
            b = store_mod.bucket_start(self.store.dialect, bucket, Result.created_at).label("b")
            q = (
                select(
                    b,
                    Result.eval_version,
                    Result.fingerprint,
                    func.count(Result.id),
                    func.sum(func.coalesce(Review.score, Result.score)),
                    func.sum(case((_effective_pass(), 1), else_=0)),
                    func.count(Review.id),
                )
                .outerjoin(Review, Review.result_id == Result.id)
                .where(Result.eval_id == ev.id, Result.capture_id.is_not(None))
                .group_by(b, Result.eval_version, Result.fingerprint)
                .order_by(b)
            )
            rows = s.execute(_in_range(q, start, end)).all()
            name, threshold = ev.name, ev.threshold
        merged: dict[datetime, dict[str, Any]] = {}
        for when, version, fp, count, total, passes, reviewed in rows:
            slot = merged.setdefault(
                store_mod.parse_bucket(when),
                {
                    "count": 0,
                    "total": 0.0,
                    "passes": 0,
                    "reviewed": 0,
                    "versions": set(),
                    "fingerprints": set(),
                },
            )
            slot["count"] += count
            slot["total"] += float(total or 0.0)
            slot["passes"] += int(passes or 0)
            slot["reviewed"] += int(reviewed or 0)
            slot["versions"].add(version)
            slot["fingerprints"].add(fp)
        buckets: list[TrendBucket] = []
        prev_fps: set[str] | None = None
        prev_versions: set[int] | None = None
        for when in sorted(merged):
            slot = merged[when]
            fps, versions = slot["fingerprints"], slot["versions"]
            buckets.append(
                TrendBucket(
                    start=_utc(when),
                    count=slot["count"],
                    mean_score=slot["total"] / slot["count"],
                    pass_rate=slot["passes"] / slot["count"],
                    reviewed=slot["reviewed"],
                    versions=sorted(versions),
                    fingerprints=sorted(fps),
                    fingerprint_break=len(fps) > 1 or (prev_fps is not None and fps != prev_fps),
                    version_change=len(versions) > 1
                    or (prev_versions is not None and versions != prev_versions),
                )
            )
            prev_fps, prev_versions = fps, versions
        return TrendOut(
            eval_name=name,
            bucket=bucket,  # type: ignore[arg-type]
            threshold=threshold,
            buckets=buckets,
        )

    # -- settings and retention -----------------------------------------------------------------
    def get_settings(self) -> SettingsOut:
        """Automatic evaluation and retention."""
        with self.store.read() as s:
            values: dict[str, Any] = dict(s.execute(select(Setting.key, Setting.value)).all())
        auto = values.get(_AUTO_KEY, True)
        retention = values.get(_RETENTION_KEY)
        return SettingsOut(
            auto_evaluate=auto is not False,
            retention_days=int(retention) if retention is not None else None,
        )

    def update_settings(
        self, auto_evaluate: bool | None = None, retention_days: Any = UNSET
    ) -> SettingsOut:
        """Change settings; ``retention_days`` is 7, 30, 90, 180 or None (keep forever)."""
        updates: dict[str, Any] = {}
        if auto_evaluate is not None:
            if not isinstance(auto_evaluate, bool):
                raise InvalidType("auto_evaluate must be true or false")
            updates[_AUTO_KEY] = auto_evaluate
        if not isinstance(retention_days, _Unset):
            if retention_days is not None and (
                isinstance(retention_days, bool) or retention_days not in RETENTION_CHOICES
            ):
                raise InvalidInput(
                    "retention must be 7, 30, 90, 180 days or forever (None), "
                    f"not {retention_days!r}"
                )
            updates[_RETENTION_KEY] = int(retention_days) if retention_days is not None else None

        def work(s: Session) -> None:
            for key, value in updates.items():
                row = s.get(Setting, key)
                if row is None:
                    s.add(Setting(key=key, value=value))
                else:
                    row.value = value

        if updates:
            self._write(work)
        return self.get_settings()

    def cleanup(self, now: Any = None) -> CleanupOut:
        """Delete what is older than the retention period: captures with their results and
        reviews, runs with their results, and tests of eval versions that are no longer
        current. With retention "forever" nothing is deleted."""
        days = self.get_settings().retention_days
        if days is None:
            return CleanupOut(captures=0, results=0, tests=0, runs=0, cutoff=None)
        cutoff = (parse_time(now, "now") or _now()) - timedelta(days=days)

        def work(s: Session) -> CleanupOut:
            old_captures = select(Capture.id).where(Capture.captured_at < cutoff)
            old_runs = select(Run.id).where(Run.created_at < cutoff)
            results = _deleted(
                s,
                delete(Result).where(
                    or_(Result.capture_id.in_(old_captures), Result.run_id.in_(old_runs))
                ),
            )
            captures = _deleted(s, delete(Capture).where(Capture.captured_at < cutoff))
            runs = _deleted(s, delete(Run).where(Run.created_at < cutoff))
            current = select(Eval.version).where(Eval.id == EvalTest.eval_id).scalar_subquery()
            tests = _deleted(
                s, delete(EvalTest).where(EvalTest.created_at < cutoff, EvalTest.version < current)
            )
            return CleanupOut(
                captures=captures, results=results, tests=tests, runs=runs, cutoff=_utc(cutoff)
            )

        out: CleanupOut = self._write(work)
        return out

    # -- export ---------------------------------------------------------------------------------
    def iter_export_rows(
        self,
        eval_name: str | int | None = None,
        passed: bool | None = None,
        since: Any = None,
        until: Any = None,
        reviewed: bool | None = None,
        run_id: int | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Results as flat rows (``EXPORT_COLUMNS``), oldest first, streamed: ``score`` is the
        automated score, ``pass`` the effective verdict, ``human_override_*`` the review."""
        with self.store.read() as s:
            refs = {
                (e, v): list(r)
                for e, v, r in s.execute(
                    select(EvalVersion.eval_id, EvalVersion.version, EvalVersion.references)
                )
            }
            q = self._results_query(s, eval_name, passed, since, until, reviewed, run_id)
            q = q.order_by(Result.created_at, Result.id).execution_options(yield_per=2000)
            for r, cap, name, etype, review in s.execute(q):
                out = self._result_out(r, cap, name, etype, review, refs, explain=False)
                yield {
                    "result_id": out.id,
                    "capture_id": out.capture_id,
                    "run_id": out.run_id,
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
                }

    def write_export(
        self,
        fp: IO[str],
        fmt: str = "csv",
        progress: Callable[[int], None] | None = None,
        **filters: Any,
    ) -> int:
        """Write results as CSV or JSON to a text file object, streaming; returns the count.
        ``progress(n)`` is called every 1,000 rows."""
        if fmt not in ("csv", "json"):
            raise InvalidInput(f"export format must be csv or json, not {fmt!r}")
        n = 0
        if fmt == "csv":
            writer = csv.DictWriter(fp, fieldnames=EXPORT_COLUMNS, lineterminator="\n")
            writer.writeheader()
            for row in self.iter_export_rows(**filters):
                writer.writerow({k: _csv_value(v) for k, v in row.items()})
                n += 1
                if progress and n % 1000 == 0:
                    progress(n)
        else:
            fp.write("[")
            for row in self.iter_export_rows(**filters):
                fp.write(("\n" if n == 0 else ",\n") + json.dumps(row, ensure_ascii=False))
                n += 1
                if progress and n % 1000 == 0:
                    progress(n)
            fp.write("\n]\n" if n else "]\n")
        if progress:
            progress(n)
        return n

    def export_results(self, fmt: str = "csv", **filters: Any) -> str:
        """Results as a CSV or JSON document (see ``iter_export_rows`` for the columns)."""
        buf = io.StringIO()
        self.write_export(buf, fmt, **filters)
        return buf.getvalue()

    # -- eval definitions: export / import ------------------------------------------------------
    def export_evals(self, include_archived: bool = False) -> dict[str, Any]:
        """The eval definitions as a YAML/JSON-ready document. Each carries its latest passing
        test of the current version (if any), so an import can activate it through the gate."""
        with self.store.read() as s:
            q = select(Eval).order_by(Eval.name)
            if not include_archived:
                q = q.where(Eval.status != "archived")
            items = []
            for ev in s.scalars(q):
                item: dict[str, Any] = {
                    "name": ev.name,
                    "type": ev.type,
                    "status": ev.status,
                    "references": list(ev.references),
                    "threshold": ev.threshold,
                }
                if ev.input_scope is not None:
                    item["input_scope"] = ev.input_scope
                if ev.options:
                    item["options"] = dict(ev.options)
                test = self._latest_test(s, ev, passed=True)
                if test is not None:
                    item["test"] = {"input": test.input, "output": test.output}
                items.append(item)
        return {"simeval": EVALS_FORMAT, "evals": items}

    def import_evals(
        self, doc_or_path: Any, progress: Callable[[int, int], None] | None = None
    ) -> dict[str, Any]:
        """Create or update evals from a document (a dict/list) or a YAML/JSON file path.

        Idempotent by name: an eval whose definition is unchanged is left alone, a changed one
        gets a new version. ``status: active`` activates through the usual gate, running the
        document's ``test`` when the current version has no passing test. The whole import is
        one transaction and every entry is validated before anything is written.
        Returns a report: created, updated, unchanged, activated, deactivated, archived,
        not_activated ({name: reason}).
        """
        if isinstance(doc_or_path, dict | list):
            doc = doc_or_path
            source = "document"
        elif isinstance(doc_or_path, str | os.PathLike):
            source = os.fspath(doc_or_path)
            doc = parse_evals_document(read_text_file(source, "evals"), source)
        else:
            raise InvalidType("import_evals takes a document (dict or list) or a file path")
        entries = _validate_evals_document(doc, source)
        report: dict[str, Any] = {
            k: []
            for k in ("created", "updated", "unchanged", "activated", "deactivated", "archived")
        }
        report["not_activated"] = {}

        def work(s: Session) -> None:
            for k in report:
                report[k] = {} if k == "not_activated" else []
            for i, e in enumerate(entries):
                self._import_one(s, e, report)
                if progress:
                    progress(i + 1, len(entries))

        self._write(work)
        return report

    def _import_one(self, s: Session, e: dict[str, Any], report: dict[str, Any]) -> None:
        name = e["name"]
        ev = s.scalar(select(Eval).where(Eval.name == name))
        acted = False
        if ev is None:
            ev = self._create(
                s,
                name,
                e["references"],
                e["threshold"],
                e["input_scope"],
                e["options"],
                e["fingerprint"],
            )
            report["created"].append(name)
            before, acted = "draft", True
        else:
            before = ev.status
            wanted = {
                k: e[k]
                for k in ("references", "threshold", "input_scope", "options", "fingerprint")
            }
            if self._edit(s, ev, wanted):
                report["updated"].append(name)
                acted = True
        # no status in the file: keep the one the eval had (an edit may have made it a draft)
        status = e["status"] or before
        if status == "active" and ev.status != "active":
            if ev.status == "archived":
                self._set_status(s, ev, "draft")
            test = self._latest_test(s, ev)
            if (test is None or not test.passed) and e["test"] is not None:
                self._test(s, ev, e["test"]["input"], e["test"]["output"])
                test = self._latest_test(s, ev)
            blocker = self._blocker(ev, test)
            if blocker:
                report["not_activated"][name] = blocker
            else:
                self._set_status(s, ev, "active")
                report["activated"].append(name)
            acted = True
        elif status != "active" and ev.status != status:
            self._set_status(s, ev, status)
            report["deactivated" if status == "draft" else "archived"].append(name)
            acted = True
        if not acted:
            report["unchanged"].append(name)

    # -- data-set runs --------------------------------------------------------------------------
    def create_run(
        self,
        name: str,
        source: str,
        options: dict[str, Any] | None = None,
        summary: dict[str, Any] | None = None,
    ) -> int:
        """Record a data-set run; its rows follow with ``add_run_results``. Returns its id."""
        if not isinstance(name, str) or not name.strip():
            raise InvalidInput("run name is empty")
        for what, value in (("options", options), ("summary", summary)):
            if value is not None and not isinstance(value, dict):
                raise InvalidType(f"run {what} must be a mapping")
            try:
                json.dumps(value)
            except (TypeError, ValueError) as exc:
                raise InvalidType(f"run {what} is not JSON: {exc}") from None

        def work(s: Session) -> int:
            run = Run(
                name=name.strip()[:200],
                source=str(source),
                options=options or {},
                summary=summary or {},
                created_at=_now(),
            )
            s.add(run)
            s.flush()
            return run.id

        run_id: int = self._write(work)
        return run_id

    def update_run_summary(self, run_id: int, summary: dict[str, Any]) -> RunOut:
        """Replace a run's summary (written when the run has finished)."""
        rid = _check_id(run_id, "run")

        def work(s: Session) -> None:
            _get(s, Run, run_id, "run").summary = dict(summary)

        self._write(work)
        return self.get_run(rid)

    def add_run_results(self, run_id: int, rows: Iterable[dict[str, Any]]) -> int:
        """Store a run's scored rows in bulk (10,000 rows per transaction); returns the count.

        Each row: ``eval_name`` (or None), ``input``, ``output``, ``reference`` or
        ``references``, ``score``, ``passed``, ``threshold``, ``fingerprint``,
        ``matched_reference`` (the text, or its index in ``references``), ``explanation``
        (a dict or None); optionally ``eval_version`` and ``matched_index``. A row whose
        ``eval_name`` names a stored eval is linked to it.
        """
        rid = _check_id(run_id, "run")
        with self.store.read() as s:
            _get(s, Run, run_id, "run")
            eval_ids = dict(s.execute(select(Eval.name, Eval.id)).all())
        columns = (
            "eval_id",
            "eval_name",
            "eval_version",
            "score",
            "passed",
            "threshold",
            "fingerprint",
            "matched_index",
            "input",
            "output",
            "reference",
            "explanation",
        )
        total = 0
        chunk: list[tuple[Any, ...]] = []

        def flush() -> None:
            now = _now()

            def work(s: Session) -> None:
                store_mod.bulk_insert(
                    s.connection(),
                    store_mod.results_table,
                    columns,
                    chunk,
                    {"run_id": rid, "created_at": now},
                )

            self._write(work)
            chunk.clear()

        for n, row in enumerate(rows):
            chunk.append(_run_row(row, n, eval_ids, columns))
            if len(chunk) >= _RUN_CHUNK:
                total += len(chunk)
                flush()
        if chunk:
            total += len(chunk)
            flush()
        return total

    def _run_out(self, s: Session, run: Run) -> RunOut:
        count = s.scalar(select(func.count(Result.id)).where(Result.run_id == run.id)) or 0
        return RunOut(
            id=run.id,
            name=run.name,
            source=run.source,
            options=run.options,
            summary=run.summary,
            created_at=_utc(run.created_at),
            results=count,
        )

    def get_run(self, run_id: int) -> RunOut:
        """A stored run."""
        with self.store.read() as s:
            return self._run_out(s, _get(s, Run, run_id, "run"))

    def list_runs(self, limit: int = 100, offset: int = 0) -> list[RunOut]:
        """Stored runs, newest first."""
        limit, offset = _check_page(limit, offset)
        with self.store.read() as s:
            q = select(Run).order_by(Run.created_at.desc(), Run.id.desc()).limit(limit)
            return [self._run_out(s, r) for r in s.scalars(q.offset(offset))]


# -- module helpers -------------------------------------------------------------------------------
def _check_id(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise InvalidInput(f"{what} id must be a positive integer, not {value!r}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise InvalidInput(f"{what} id must be a positive integer, not {value!r}") from None
    if number < 1 or str(number) != str(value).strip():
        raise InvalidInput(f"{what} id must be a positive integer, not {value!r}")
    return number


def _get(s: Session, model: type[_M], value: Any, what: str) -> _M:
    """The row of ``model`` whose id is ``value`` (checked), else ``NotFound``."""
    row = s.get(model, _check_id(value, what))
    if row is None:
        raise NotFound(f"no {what} with id {value}")
    return row


def _check_page(limit: Any, offset: Any) -> tuple[int, int]:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 100_000:
        raise InvalidInput(f"limit must be an integer in [1, 100000], not {limit!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidInput(f"offset must be a non-negative integer, not {offset!r}")
    return limit, offset


def _deleted(s: Session, stmt: Any) -> int:
    result = cast(CursorResult[Any], s.execute(stmt))
    return int(result.rowcount)


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def _run_row(row: Any, n: int, eval_ids: dict[str, int], columns: Sequence[str]) -> tuple[Any, ...]:
    if not isinstance(row, dict):
        raise InvalidType(f"run row {n + 1} must be a mapping")
    try:
        refs = row.get("references")
        if refs is None and row.get("reference") is not None:
            refs = [row["reference"]]
        matched = row.get("matched_reference")
        index = row.get("matched_index")
        if isinstance(matched, int) and not isinstance(matched, bool):
            index = matched
            matched = refs[matched] if refs and 0 <= matched < len(refs) else None
        if index is None:
            index = refs.index(matched) if refs and matched in refs else 0
        if matched is None and refs:
            matched = refs[index] if 0 <= index < len(refs) else None
        score = _check_unit(row["score"], f"run row {n + 1} score")
        threshold = _check_unit(
            row.get("threshold", DEFAULT_THRESHOLD), f"run row {n + 1} threshold"
        )
        passed = row.get("passed")
        passed = score >= threshold if passed is None else bool(passed)
        name = row.get("eval_name")
        values = {
            "eval_id": eval_ids.get(name) if name is not None else None,
            "eval_name": name,
            "eval_version": row.get("eval_version"),
            "score": score,
            "passed": passed,
            "threshold": threshold,
            "fingerprint": str(row.get("fingerprint") or ""),
            "matched_index": int(index),
            "input": None if row.get("input") is None else str(row["input"]),
            "output": str(row.get("output") or ""),
            "reference": matched,
            "explanation": row.get("explanation"),
        }
    except KeyError as exc:
        raise InvalidInput(f"run row {n + 1} has no {exc.args[0]!r}") from None
    return tuple(values[c] for c in columns)


def parse_evals_document(text: str | bytes, source: str = "document") -> Any:
    """Parse an eval definitions file's text: JSON when ``source`` ends in ``.json``, else YAML
    (a superset of JSON). Errors name the line.

    >>> parse_evals_document("evals:\\n  - name: a\\n    references: [x]\\n")
    {'evals': [{'name': 'a', 'references': ['x']}]}
    """
    import yaml

    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"{source} is not UTF-8 text (byte {exc.start})") from None
    if source.lower().endswith(".json"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidInput(
                f"invalid JSON in {source} at line {exc.lineno}, column {exc.colno}: {exc.msg}"
            ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise InvalidInput(f"invalid YAML in {source}{where}: {problem}") from None


def _validate_evals_document(doc: Any, source: str) -> list[dict[str, Any]]:
    if isinstance(doc, dict):
        fmt = doc.get("simeval", EVALS_FORMAT)
        if fmt != EVALS_FORMAT:
            raise InvalidInput(f"{source}: unknown eval file format {fmt!r} (this simeval reads 1)")
        extra = set(doc) - {"simeval", "evals"}
        if extra:
            raise InvalidInput(f"{source}: unknown top-level key {sorted(extra)[0]!r}")
        items = doc.get("evals")
    else:
        items = doc
    if not isinstance(items, list):
        raise InvalidInput(f"{source}: expected a list of evals (under 'evals:')")
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        where = f"{source}: eval {i + 1}"
        if not isinstance(item, dict):
            raise InvalidInput(f"{where} is not a mapping")
        if "name" in item and isinstance(item["name"], str):
            where += f" ({item['name']!r})"
        unknown = set(item) - _EVAL_KEYS
        if unknown:
            raise InvalidInput(f"{where}: unknown key {sorted(unknown)[0]!r}")
        try:
            name = _check_name(item.get("name"))
            if name in seen:
                raise InvalidInput(f"name {name!r} appears twice")
            seen.add(name)
            if item.get("type", "similarity") != "similarity":
                raise InvalidInput(f"type must be similarity, not {item.get('type')!r}")
            if "references" in item and "reference" in item:
                raise InvalidInput("give references or reference, not both")
            refs = check_references(item.get("references", item.get("reference")))
            threshold = check_threshold(item.get("threshold", DEFAULT_THRESHOLD))
            scope = _check_scope(item.get("input_scope"))
            opts, fp = _check_options(item.get("options"))
            status = item.get("status")
            if status not in (None, "draft", "active", "archived"):
                raise InvalidInput(f"status must be draft, active or archived, not {status!r}")
            test = item.get("test")
            if test is not None:
                if (
                    not isinstance(test, dict)
                    or set(test) - {"input", "output"}
                    or not isinstance(test.get("output"), str)
                ):
                    raise InvalidInput("test must be a mapping with input and output text")
                test = {"input": str(test.get("input") or ""), "output": test["output"]}
        except (InvalidInput, InvalidOption, InvalidType) as exc:
            raise type(exc)(f"{where}: {exc}") from None
        out.append(
            {
                "name": name,
                "references": refs,
                "threshold": threshold,
                "input_scope": scope,
                "options": opts,
                "fingerprint": fp,
                "status": status,
                "test": test,
            }
        )
    return out


_SERVICES: dict[str, Service] = {}
_SERVICES_LOCK = threading.Lock()


def open_service(db: str | os.PathLike[str] | None = None) -> Service:
    """The process's ``Service`` for ``db`` (path, URL, or None for the default), opened once."""
    url = resolve_db_url(db)
    with _SERVICES_LOCK:
        svc = _SERVICES.get(url)
        if svc is None:
            svc = Service(url)
            _SERVICES[url] = svc
        return svc


__all__ = [
    "EXPORT_COLUMNS",
    "MAX_TEXT_CHARS",
    "UNSET",
    "Service",
    "check_capture",
    "open_service",
    "parse_evals_document",
    "parse_time",
    "scope_key",
]
