"""Settings (automatic evaluation, retention) and the retention cleanup."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast
from urllib.parse import urlsplit

from sqlalchemy import delete, select
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm import Session

from simeval.checks import UNSET, Unset, as_utc, parse_time, utc_now
from simeval.errors import InvalidInput, InvalidType
from simeval.scoring.options import RETENTION_CHOICES, RETENTION_TEXT
from simeval.service.base import ServiceBase
from simeval.service.models import CleanupOut, SettingsOut
from simeval.service.rollup import HOUR, Tally, add_sums, hour_of, roll_up
from simeval.store import Capture, Eval, EvalTest, Result, Run, Setting, TrendRollup, unpack_results

# the keys of the settings table: the evals revision (bumped by every change to an eval, so
# each process knows when to prepare the active evals again), and the two user settings
REVISION_KEY, AUTO_EVALUATE_KEY, RETENTION_KEY = "evals_revision", "auto_evaluate", "retention_days"
# where `simeval serve` sends each result as an OTLP event (simeval.web.otlp_export)
OTLP_EXPORT_KEY = "otlp_export"


def check_otlp_url(url: Any) -> str:
    """An OTLP/HTTP URL (http or https, with a host), stripped; else ``InvalidInput``."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidInput("the OTLP export URL must be an http(s) URL, e.g. http://127.0.0.1:4318")
    text = url.strip()
    parts = urlsplit(text)
    try:
        port_ok = parts.port is None or parts.port > 0
    except ValueError:  # a port that is not a number in [0, 65535]
        port_ok = False
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise InvalidInput(
            f"the OTLP export URL must be http(s)://host[:port][/path], not {text!r}"
        )
    if len(text) > 2000 or any(c.isspace() or not c.isprintable() for c in text):
        raise InvalidInput("the OTLP export URL is too long or holds spaces or control characters")
    return text


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
        return SettingsOut(
            auto_evaluate=auto is not False,
            retention_days=int(retention) if retention is not None else None,
            otlp_export=export if isinstance(export, str) and export else None,
        )

    def update_settings(
        self,
        auto_evaluate: bool | None = None,
        retention_days: Any = UNSET,
        otlp_export: Any = UNSET,
    ) -> SettingsOut:
        """Change settings; ``retention_days`` is one of ``scoring.options.RETENTION_CHOICES``
        or None (keep forever); ``otlp_export`` an OTLP/HTTP URL for `simeval serve` to send
        results to (from its next start; at once when changed through the server), or None
        or "" (send nothing)."""
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
        cutoff = (parse_time(now, "now") or utc_now()) - timedelta(days=days)

        def work(s: Session) -> CleanupOut:
            conn = s.connection()
            # the rollup first takes in every capture, then loses the deleted ones: whole hours
            # go, the hour the cutoff falls in is summed again from the captures it keeps
            roll_up(conn)
            results = 0
            for (blob,) in s.execute(select(Capture.scores).where(Capture.captured_at < cutoff)):
                results += len(unpack_results(blob))
            old_runs = select(Run.id).where(Run.created_at < cutoff)
            results += _deleted(s, delete(Result).where(Result.run_id.in_(old_runs)))
            captures = _deleted(s, delete(Capture).where(Capture.captured_at < cutoff))
            runs = _deleted(s, delete(Run).where(Run.created_at < cutoff))
            edge = hour_of(cutoff)
            s.execute(delete(TrendRollup).where(TrendRollup.bucket <= edge))
            if edge < cutoff:
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
            return CleanupOut(
                captures=captures, results=results, tests=tests, runs=runs, cutoff=as_utc(cutoff)
            )

        out: CleanupOut = self._write(work)
        return out
