"""Settings (automatic evaluation, retention) and the retention cleanup."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from simeval.checks import UNSET, Unset, as_utc, check_url, parse_time, utc_now
from simeval.errors import InvalidInput, InvalidType
from simeval.scoring.options import RETENTION_CHOICES, RETENTION_TEXT
from simeval.service.actor import record
from simeval.service.base import Part
from simeval.service.models import CleanupOut, SettingsOut
from simeval.store import Tx
from simeval.store.meta_index import DEFAULT_INDEXED_KEYS, MAX_INDEXED_KEY, indexed_keys
from simeval.store.settings_sql import (
    backfill_meta_keys,
    delete_older,
    drop_meta_rows,
    put_setting,
    set_flag,
    setting_value,
    settings_of,
)

# the keys of the settings table: the evals revision (bumped by every change to an eval, so
# each process knows when to prepare the active evals again), and the two user settings
REVISION_KEY, AUTO_EVALUATE_KEY, RETENTION_KEY = "evals_revision", "auto_evaluate", "retention_days"
# where `simeval serve` sends each result as an OTLP event (simeval.web.otlp_export)
OTLP_EXPORT_KEY = "otlp_export"
# the metadata keys a user declares indexed beside the defaults (``simeval.store.meta_index``):
# what ``capture_meta`` answers exactly; while a change is being filled in over the stored
# captures, the keys captures write meanwhile (the old and the new ones) are kept apart
INDEXED_META_KEY, META_WRITING_KEY = "indexed_meta", "indexed_meta_writing"


def check_otlp_url(url: object) -> str:
    """An OTLP/HTTP URL (http or https, with a host), stripped; else ``InvalidInput``."""
    return check_url(url, "the OTLP export URL", "http://127.0.0.1:4318")


MAX_DECLARED_KEYS = 32  # metadata keys a user may declare indexed
DEFAULT_META_KEYS = DEFAULT_INDEXED_KEYS  # always indexed (for the faces: not the store's own)
_BACKFILL_CHUNK = 2000  # captures read per write transaction when a key is declared
_DROP_CHUNK = 5000  # capture_meta rows deleted per write transaction when a key is dropped


def check_indexed_meta(keys: object) -> list[str]:
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


def answered_meta_keys(s: Tx) -> tuple[str, ...]:
    """The metadata keys ``capture_meta`` holds for every stored capture: the defaults and the
    declared ones (a key being filled in is not among them until it is complete)."""
    declared = setting_value(s, INDEXED_META_KEY)
    return indexed_keys(declared if isinstance(declared, list) else None)


class SettingsService(Part):
    """Settings and retention."""

    def get_settings(self) -> SettingsOut:
        """Automatic evaluation and retention."""
        with self.store.read() as s:
            values: dict[str, Any] = settings_of(s)
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
        otlp_export: object = UNSET,
        indexed_meta: object = UNSET,
    ) -> SettingsOut:
        """Change settings; ``retention_days`` is one of ``scoring.options.RETENTION_CHOICES``
        or None (keep forever); ``otlp_export`` an OTLP/HTTP URL for `simeval serve` to send
        results to (from its next start; at once when changed through the server), or None
        or "" (send nothing); ``indexed_meta`` the metadata keys to index beside the defaults
        (``check_indexed_meta``): the stored captures' values of a key declared are indexed
        before this returns, those of a key no longer declared dropped."""
        keys = UNSET if isinstance(indexed_meta, Unset) else check_indexed_meta(indexed_meta)
        updates: dict[str, object] = {}
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

        def work(s: Tx) -> None:
            for key, value in updates.items():
                put_setting(s, key, value)
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
            values = settings_of(s, (INDEXED_META_KEY, META_WRITING_KEY))
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
        self._write(lambda s: set_flag(s, META_WRITING_KEY, list(both)))
        last: int | None = 0
        while added and last is not None:

            def fill(s: Tx, after: int = last) -> int | None:
                return backfill_meta_keys(s, added, after, _BACKFILL_CHUNK)

            last = self._write(fill)

        def finish(s: Tx) -> None:
            set_flag(s, INDEXED_META_KEY, declared)
            set_flag(s, META_WRITING_KEY, None)

        self._write(finish)
        for key in (k for k in both if k not in indexed_keys(declared)):
            self._drop_meta_key(key)

    def _drop_meta_key(self, key: str) -> None:
        """Delete every ``capture_meta`` and rollup row of ``key``, a chunk per transaction."""

        def drop(s: Tx) -> int:
            return drop_meta_rows(s, key, _DROP_CHUNK)

        while self._write(drop) >= _DROP_CHUNK:
            pass

    def cleanup(self, now: object = None) -> CleanupOut:
        """Delete what is older than the retention period: captures with their results and
        reviews, runs with their results, and tests of eval versions that are no longer
        current. With retention "forever" nothing is deleted."""
        days = self.get_settings().retention_days
        if days is None:
            return CleanupOut(captures=0, results=0, tests=0, runs=0, cutoff=None)
        cutoff = (parse_time(now, "now") or utc_now()) - timedelta(days=days)

        def work(s: Tx) -> CleanupOut:
            captures, results, tests, runs = delete_older(s, cutoff)
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
