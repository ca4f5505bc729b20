"""Settings (automatic evaluation, retention) and the retention cleanup."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

from sqlalchemy import delete, func, select, text
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm import Session

from simeval.checks import UNSET, Unset, as_utc, check_url, parse_time, utc_now
from simeval.errors import InvalidInput, InvalidType
from simeval.scoring.options import RETENTION_CHOICES, RETENTION_TEXT
from simeval.service.actor import record
from simeval.service.base import ServiceBase
from simeval.service.models import CleanupOut, SettingsOut
from simeval.store import (
    CAPTURE_LOCK,
    PACK_HEAD,
    Capture,
    Eval,
    EvalTest,
    Result,
    Run,
    Setting,
    TrendRollup,
)
from simeval.store.meta_index import DEFAULT_INDEXED_KEYS, MAX_INDEXED_KEY, indexed_keys
from simeval.store.meta_rollup import cut_hours, hour_start
from simeval.store.rollups import HOUR, Tally, add_sums, roll_up
from simeval.store.summaries import backfill_meta, drop_meta_key, recompute_conversations

# the keys of the settings table: the evals revision (bumped by every change to an eval, so
# each process knows when to prepare the active evals again), and the two user settings
REVISION_KEY, AUTO_EVALUATE_KEY, RETENTION_KEY = "evals_revision", "auto_evaluate", "retention_days"
# where `simeval serve` sends each result as an OTLP event (simeval.web.otlp_export)
OTLP_EXPORT_KEY = "otlp_export"
# the metadata keys a user declares indexed beside the defaults (``simeval.store.meta_index``):
# what ``capture_meta`` answers exactly; while a change is being filled in over the stored
# captures, the keys captures write meanwhile (the old and the new ones) are kept apart
INDEXED_META_KEY, META_WRITING_KEY = "indexed_meta", "indexed_meta_writing"


def _set_flag(s: Session, key: str, value: Any) -> None:
    """Store a setting (None deletes it) in a write transaction. On PostgreSQL the capture
    lock is taken exclusively first: the captures under way, which read the indexed keys when
    they began, commit before this does, and the next ones read what this stores."""
    if s.get_bind().dialect.name == "postgresql":
        s.execute(text(f"SELECT pg_advisory_xact_lock({CAPTURE_LOCK})"))
    row = s.get(Setting, key)
    if value is None:
        if row is not None:
            s.delete(row)
    elif row is None:
        s.add(Setting(key=key, value=value))
    else:
        row.value = value


def check_otlp_url(url: Any) -> str:
    """An OTLP/HTTP URL (http or https, with a host), stripped; else ``InvalidInput``."""
    return check_url(url, "the OTLP export URL", "http://127.0.0.1:4318")


MAX_DECLARED_KEYS = 32  # metadata keys a user may declare indexed
DEFAULT_META_KEYS = DEFAULT_INDEXED_KEYS  # always indexed (for the faces: not the store's own)
_BACKFILL_CHUNK = 2000  # captures read per write transaction when a key is declared
_DROP_CHUNK = 5000  # capture_meta rows deleted per write transaction when a key is dropped


def check_indexed_meta(keys: Any) -> list[str]:
    """The metadata keys of the setting ``indexed_meta``: a list of at most
    ``MAX_DECLARED_KEYS`` non-blank strings of at most 64 printable characters (repeats
    dropped, order kept); else ``InvalidInput`` naming the problem."""
    if isinstance(keys, str) or not isinstance(keys, list | tuple):
        raise InvalidInput(
            f"indexed_meta must be a list of metadata keys, not {type(keys).__name__}"
        )
    if len(keys) > MAX_DECLARED_KEYS:  # repeats counted: as the schema's maxItems counts
        raise InvalidInput(
            f"indexed_meta: at most {MAX_DECLARED_KEYS} keys can be declared, not {len(keys)}"
        )
    out: list[str] = []
    for key in keys:
        if not isinstance(key, str):
            raise InvalidInput(
                f"indexed_meta: every key must be a string, not {type(key).__name__}"
            )
        if not key.strip():
            raise InvalidInput("indexed_meta: a key is empty")
        if len(key) > MAX_INDEXED_KEY:
            raise InvalidInput(
                f"indexed_meta: key {key[:20]!r}... is longer than {MAX_INDEXED_KEY} characters"
            )
        if any(not c.isprintable() for c in key):
            raise InvalidInput(f"indexed_meta: key {key!r} holds control characters")
        if key not in out:
            out.append(key)
    if len(out) > MAX_DECLARED_KEYS:
        raise InvalidInput(
            f"indexed_meta: at most {MAX_DECLARED_KEYS} keys can be declared, not {len(out)}"
        )
    return out


def answered_meta_keys(s: Session) -> tuple[str, ...]:
    """The metadata keys ``capture_meta`` holds for every stored capture: the defaults and the
    declared ones (a key being filled in is not among them until it is complete)."""
    declared = s.scalar(select(Setting.value).where(Setting.key == INDEXED_META_KEY))
    return indexed_keys(declared if isinstance(declared, list) else None)


def _deleted(s: Session, stmt: Any) -> int:
    result = cast(CursorResult[Any], s.execute(stmt))
    return int(result.rowcount)


class SettingsMixin(ServiceBase):
    """Settings and retention."""

    def get_settings(self) -> SettingsOut:
        """Automatic evaluation and retention."""
        with self.store.read() as s:
            values: dict[str, Any] = dict(s.execute(select(Setting.key, Setting.value)).all())
        auto = values.get(AUTO_EVALUATE_KEY, True)
        retention = values.get(RETENTION_KEY)
        export = values.get(OTLP_EXPORT_KEY)
        declared = values.get(INDEXED_META_KEY)
        return SettingsOut(
            auto_evaluate=auto is not False,
            retention_days=int(retention) if retention is not None else None,
            otlp_export=export if isinstance(export, str) and export else None,
            indexed_meta=[str(k) for k in declared] if isinstance(declared, list) else [],
        )

    def update_settings(
        self,
        auto_evaluate: bool | None = None,
        retention_days: Any = UNSET,
        otlp_export: Any = UNSET,
        indexed_meta: Any = UNSET,
    ) -> SettingsOut:
        """Change settings; ``retention_days`` is one of ``scoring.options.RETENTION_CHOICES``
        or None (keep forever); ``otlp_export`` an OTLP/HTTP URL for `simeval serve` to send
        results to (from its next start; at once when changed through the server), or None
        or "" (send nothing); ``indexed_meta`` the metadata keys to index beside the defaults
        (``check_indexed_meta``): the stored captures' values of a key declared are indexed
        before this returns, those of a key no longer declared dropped."""
        keys = UNSET if isinstance(indexed_meta, Unset) else check_indexed_meta(indexed_meta)
        updates: dict[str, Any] = {}
        if auto_evaluate is not None:
            if not isinstance(auto_evaluate, bool):
                raise InvalidType("auto_evaluate must be true or false")
            updates[AUTO_EVALUATE_KEY] = auto_evaluate
        if not isinstance(retention_days, Unset):
            if retention_days is not None and (
                isinstance(retention_days, bool) or retention_days not in RETENTION_CHOICES
            ):
                raise InvalidInput(
                    f"retention must be {RETENTION_TEXT} (None), not {retention_days!r}"
                )
            updates[RETENTION_KEY] = int(retention_days) if retention_days is not None else None
        if not isinstance(otlp_export, Unset):
            blank = otlp_export is None or (
                isinstance(otlp_export, str) and not otlp_export.strip()
            )
            updates[OTLP_EXPORT_KEY] = None if blank else check_otlp_url(otlp_export)

        def work(s: Session) -> None:
            for key, value in updates.items():
                row = s.get(Setting, key)
                if row is None:
                    s.add(Setting(key=key, value=value))
                else:
                    row.value = value
            for key, value in updates.items():
                action = "retention.set" if key == RETENTION_KEY else "settings.change"
                record(s, action, f"setting:{key}", value=value)

        if updates:
            self._write(work)
        if not isinstance(keys, Unset):
            self._index_meta(keys)
            self._write(
                lambda s: record(s, "settings.change", f"setting:{INDEXED_META_KEY}", value=keys)
            )
        return self.get_settings()

    def _index_meta(self, declared: list[str]) -> None:
        """Declare ``declared`` the indexed metadata keys, in steps that keep ``capture_meta``
        exact for the keys the setting ``indexed_meta`` names at every moment: captures first
        write the old and the new keys (``META_WRITING_KEY``), the new keys are filled in over
        the stored captures a chunk per transaction, then the setting names the new keys and
        the rows of the keys dropped are deleted, a chunk per transaction. Interrupted, the
        next change completes it (it starts again from the stored setting)."""
        with self.store.read() as s:
            values: dict[str, Any] = dict(
                s.execute(
                    select(Setting.key, Setting.value).where(
                        Setting.key.in_((INDEXED_META_KEY, META_WRITING_KEY))
                    )
                ).all()
            )
        old = values.get(INDEXED_META_KEY)
        old = [str(k) for k in old] if isinstance(old, list) else []
        writing = values.get(META_WRITING_KEY)
        if old == declared and writing is None:
            return  # nothing to change, nothing left half-done
        pending = writing if isinstance(writing, list) else old
        both = indexed_keys([*pending, *declared])
        added = [k for k in indexed_keys(declared) if k not in indexed_keys(old)]
        # a key added that no capture writes yet may keep rows of an earlier drop that was
        # interrupted: the backfill would keep them (stored rows stay) without counting them
        # in the rollups, so they go first. A key in ``pending`` (an interrupted backfill)
        # is exact already: captures write it.
        for key in (k for k in added if k not in indexed_keys(pending)):
            self._drop_meta_key(key)
        self._write(lambda s: _set_flag(s, META_WRITING_KEY, list(both)))
        last: int | None = 0
        while added and last is not None:

            def fill(s: Session, after: int = last) -> int | None:
                return backfill_meta(s.connection(), added, after, _BACKFILL_CHUNK)

            last = self._write(fill)

        def finish(s: Session) -> None:
            _set_flag(s, INDEXED_META_KEY, declared)
            _set_flag(s, META_WRITING_KEY, None)

        self._write(finish)
        for key in (k for k in both if k not in indexed_keys(declared)):
            self._drop_meta_key(key)

    def _drop_meta_key(self, key: str) -> None:
        """Delete every ``capture_meta`` and rollup row of ``key``, a chunk per transaction."""

        def drop(s: Session) -> int:
            return drop_meta_key(s.connection(), key, _DROP_CHUNK)

        while self._write(drop) >= _DROP_CHUNK:
            pass

    def cleanup(self, now: Any = None) -> CleanupOut:
        """Delete what is older than the retention period: captures with their results and
        reviews, runs with their results, and tests of eval versions that are no longer
        current. With retention "forever" nothing is deleted."""
        days = self.get_settings().retention_days
        if days is None:
            return CleanupOut(captures=0, results=0, tests=0, runs=0, cutoff=None)
        cutoff = (parse_time(now, "now") or utc_now()) - timedelta(days=days)

        def work(s: Session) -> CleanupOut:
            conn = s.connection()
            # the rollup first takes in every capture, then loses the deleted ones: whole hours
            # go, the hour the cutoff falls in is summed again from the captures it keeps
            roll_up(conn)
            # the deleted captures' results, from their packed header's count (the header's
            # last uint32), grouped in the database: no capture's results are read
            count_bytes = func.substr(Capture.scores, PACK_HEAD.size - 3, 4)
            counts = select(count_bytes, func.count()).where(
                Capture.captured_at < cutoff, Capture.scores.is_not(None)
            )
            results = sum(
                int.from_bytes(bytes(n), "little") * k
                for n, k in s.execute(counts.group_by(count_bytes))
                if n
            )
            old_runs = select(Run.id).where(Run.created_at < cutoff)
            results += _deleted(s, delete(Result).where(Result.run_id.in_(old_runs)))
            old = select(Capture.conversation_id).where(
                Capture.captured_at < cutoff, Capture.conversation_id.is_not(None)
            )
            touched = [str(c) for (c,) in s.execute(old.distinct())]
            # their capture_meta rows go with them (ON DELETE CASCADE, foreign keys on in
            # SQLite too: store.engine); the conversations they were turns of are summed again
            captures = _deleted(s, delete(Capture).where(Capture.captured_at < cutoff))
            recompute_conversations(conn, touched)
            runs = _deleted(s, delete(Run).where(Run.created_at < cutoff))
            edge = hour_start(cutoff)
            s.execute(delete(TrendRollup).where(TrendRollup.bucket <= edge))
            cut_hours(conn, edge)  # meta_rollup the same way
            # always, also when the cutoff is on the hour: the hour ``edge`` was deleted
            # above and every capture of it is kept then
            tally = Tally()
            kept = select(Capture.captured_at, Capture.scores).where(
                Capture.captured_at >= edge, Capture.captured_at < edge + HOUR
            )
            for when, blob in s.execute(kept):
                tally.add(when, blob)
            add_sums(conn, tally.sums())
            current = select(Eval.version).where(Eval.id == EvalTest.eval_id).scalar_subquery()
            tests = _deleted(
                s, delete(EvalTest).where(EvalTest.created_at < cutoff, EvalTest.version < current)
            )
            record(
                s,
                "cleanup.run",
                "database",
                cutoff=as_utc(cutoff).isoformat(),
                captures=captures,
                results=results,
                tests=tests,
                runs=runs,
            )
            return CleanupOut(
                captures=captures, results=results, tests=tests, runs=runs, cutoff=as_utc(cutoff)
            )

        out: CleanupOut = self._write(work)
        return out
