"""The tables: SQLAlchemy 2 declarative models of every table simeval stores.

The schema itself is made by the migrations (``simeval/store/migrations``); these models
describe its newest revision (add a migration with every change here). Captured results are
not rows of ``results``: they are packed on their capture (``Capture.scores``, see
``simeval.store.packing``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from simeval.jsontypes import JSONObject


class Base(DeclarativeBase):
    """Declarative base with a naming convention, so migrations name constraints the same
    way on every backend."""

    metadata = MetaData(
        naming_convention={
            "ix": "ix_%(table_name)s_%(column_0_N_name)s",
            "uq": "uq_%(table_name)s_%(column_0_N_name)s",
            "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
            "pk": "pk_%(table_name)s",
        }
    )


class Eval(Base):
    """An eval definition: the current version's fields, plus status and counters."""

    __tablename__ = "evals"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    type: Mapped[str] = mapped_column(String(32), default="similarity")
    status: Mapped[str] = mapped_column(String(16), default="draft")
    version: Mapped[int] = mapped_column(Integer, default=1)
    # "references" is an SQL keyword; the column gets a name no dialect has to quote
    references: Mapped[list[str]] = mapped_column("reference_answers", JSON)
    threshold: Mapped[float] = mapped_column(Float)
    input_scope: Mapped[str | None] = mapped_column(Text, nullable=True)
    options: Mapped[dict[str, Any]] = mapped_column(JSON)
    fingerprint: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime)
    updated_at: Mapped[datetime] = mapped_column(DateTime)
    # the version that scores captures while a newer one is pending (migration 0004); None:
    # the current version
    active_version: Mapped[int | None] = mapped_column(Integer, nullable=True)


class EvalVersion(Base):
    """One version of an eval, kept forever, with what changed from the previous one."""

    __tablename__ = "eval_versions"
    __table_args__ = (UniqueConstraint("eval_id", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    eval_id: Mapped[int] = mapped_column(ForeignKey("evals.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    references: Mapped[list[str]] = mapped_column("reference_answers", JSON)
    threshold: Mapped[float] = mapped_column(Float)
    input_scope: Mapped[str | None] = mapped_column(Text, nullable=True)
    options: Mapped[JSONObject] = mapped_column(JSON)
    fingerprint: Mapped[str] = mapped_column(String(64))
    changes: Mapped[JSONObject] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    # the user who made it (migration 0016); null before users, or with none defined
    created_by: Mapped[str | None] = mapped_column(String(64), nullable=True)


class EvalTest(Base):
    """A dry run of an eval version on a sample input and output."""

    __tablename__ = "eval_tests"
    __table_args__ = (Index("ix_eval_tests_eval_id_version", "eval_id", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    eval_id: Mapped[int] = mapped_column(ForeignKey("evals.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    input: Mapped[str] = mapped_column(Text)
    output: Mapped[str] = mapped_column(Text)
    score: Mapped[float] = mapped_column(Float)
    passed: Mapped[bool] = mapped_column(Boolean)
    threshold: Mapped[float] = mapped_column(Float)
    matched_index: Mapped[int] = mapped_column(Integer)
    explanation: Mapped[dict[str, Any]] = mapped_column(JSON)
    fingerprint: Mapped[str] = mapped_column(String(64))
    in_scope: Mapped[bool] = mapped_column(Boolean)
    created_at: Mapped[datetime] = mapped_column(DateTime)


class Capture(Base):
    """One engine response."""

    __tablename__ = "captures"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    input: Mapped[str] = mapped_column(Text)
    output: Mapped[str] = mapped_column(Text)
    conversation_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    meta: Mapped[JSONObject | None] = mapped_column("metadata", JSON, nullable=True)
    captured_at: Mapped[datetime] = mapped_column(DateTime)
    evaluated: Mapped[bool] = mapped_column(Boolean)
    # the capture's results, packed (``pack_results``; migration 0003): one row written per
    # capture however many evals scored it, so a capture's cost does not grow with the evals
    # or scatter writes across an index per eval
    scores: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    # a client-given key (migration 0004): a retried or replayed capture is stored once
    capture_key: Mapped[str | None] = mapped_column(String(200), nullable=True)


class Run(Base):
    """A batch of results scored together from a data-set file."""

    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    source: Mapped[str] = mapped_column(Text)
    options: Mapped[JSONObject] = mapped_column(JSON)
    summary: Mapped[JSONObject] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    # running, complete or interrupted (migration 0004), with the last sign of life
    status: Mapped[str] = mapped_column(String(16), default="complete", server_default="complete")
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    # its rows' count, passed count and sum of scores, kept by every write of its rows in the
    # same transaction (migration 0005): listing runs reads these, not every row; null for a
    # run whose rows were written otherwise (then they are counted)
    results_count: Mapped[int | None] = mapped_column(Integer, nullable=True)
    passed_count: Mapped[int | None] = mapped_column(Integer, nullable=True)
    score_sum: Mapped[float | None] = mapped_column(Float, nullable=True)
    # the engine that answered, the group of runs made together, and the stored data set's
    # name and version (migration 0006); null for a plain file run without engines
    engine: Mapped[str | None] = mapped_column(String(200), nullable=True)
    group_name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    dataset_name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    dataset_version: Mapped[int | None] = mapped_column(Integer, nullable=True)


class Result(Base):
    """One scored data-set row of a run (``id`` "r<id>" in the service).

    A run's row carries its own ``input``, ``output``, ``reference`` and ``explanation``.
    Captured results are not rows here: they are packed on their capture (``Capture.scores``,
    since migration 0003; ``capture_id`` is no longer written). The automated ``score`` and
    ``passed`` never change; a review overrides them in every view.
    """

    __tablename__ = "results"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    capture_id: Mapped[int | None] = mapped_column(
        ForeignKey("captures.id", ondelete="CASCADE"), nullable=True
    )
    run_id: Mapped[int | None] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), nullable=True
    )
    eval_id: Mapped[int | None] = mapped_column(ForeignKey("evals.id"), nullable=True)
    eval_name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    eval_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    score: Mapped[float] = mapped_column(Float)
    passed: Mapped[bool] = mapped_column(Boolean)
    threshold: Mapped[float] = mapped_column(Float)
    fingerprint: Mapped[str] = mapped_column(String(64))
    matched_index: Mapped[int] = mapped_column(Integer)
    input: Mapped[str | None] = mapped_column(Text, nullable=True)
    output: Mapped[str | None] = mapped_column(Text, nullable=True)
    reference: Mapped[str | None] = mapped_column(Text, nullable=True)
    explanation: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime)


results_table = cast(Table, Result.__table__)
captures_table = cast(Table, Capture.__table__)
_results = results_table.c
Index("ix_captures_capture_key", captures_table.c.capture_key, unique=True)
# (time, id): a range and its keyset order from one index (migration 0011)
Index("ix_captures_captured_at_id", captures_table.c.captured_at, captures_table.c.id)
Index("ix_runs_created_at", Run.__table__.c.created_at)
Index("ix_runs_group_name", Run.__table__.c.group_name)
# Only run rows carry a run id: a partial index costs captures nothing. With the time and id
# since 0014: a run's page reads its rows in order from a cursor, without sorting the run.
Index(
    "ix_results_run_created_id",
    _results.run_id,
    _results.created_at,
    _results.id,
    sqlite_where=_results.run_id.isnot(None),
    postgresql_where=_results.run_id.isnot(None),
)
# Added by migration 0002 (on the time; with the id since 0011): listing newest first. (Its
# per-eval index went in 0003: every capture wrote one entry per eval into pages scattered
# across it.)
Index("ix_results_created_at_id", _results.created_at, _results.id)
Index("ix_captures_conversation_id", captures_table.c.conversation_id)


class Review(Base):
    """A person's override of a result's score (one per result; a new review replaces it).

    ``result_key`` is the result's id as the service shows it: "<capture>-<eval>" for a
    captured result (``capture_id``, ``eval_id`` set), "r<row>" for a run row (``result_id``).
    """

    __tablename__ = "reviews"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    result_id: Mapped[int | None] = mapped_column(
        ForeignKey("results.id", ondelete="CASCADE"), unique=True, nullable=True
    )
    result_key: Mapped[str] = mapped_column(String(64), unique=True)
    capture_id: Mapped[int | None] = mapped_column(
        ForeignKey("captures.id", ondelete="CASCADE"), nullable=True
    )
    eval_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    score: Mapped[float] = mapped_column(Float)
    note: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime)
    # who reviewed (migration 0008); null for reviews stored before it
    reviewer: Mapped[str | None] = mapped_column(String(200), nullable=True)


Index("ix_reviews_capture_id", Review.__table__.c.capture_id)


class TrendRollup(Base):
    """Captured results summed per UTC hour, eval, eval version and scorer fingerprint.

    Kept by ``roll_up`` from the captures after a watermark (the setting ``rollup_upto``, the
    last capture id summed), so a capture writes nothing here; a trend reads a few hundred of
    these rows instead of every result. Automated scores only: reviews are applied on read.
    """

    __tablename__ = "trend_rollup"

    bucket: Mapped[datetime] = mapped_column(DateTime, primary_key=True)
    eval_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    eval_version: Mapped[int] = mapped_column(Integer, primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), primary_key=True)
    count: Mapped[int] = mapped_column(Integer)
    total: Mapped[float] = mapped_column(Float)
    passes: Mapped[int] = mapped_column(Integer)


# one eval's hours without every other eval's (the primary key starts with the hour): 0011
_rollup = cast(Table, TrendRollup.__table__).c
Index("ix_trend_rollup_eval_bucket", _rollup.eval_id, _rollup.bucket)


class Setting(Base):
    """A key/value setting (added by migration 0002); values are JSON."""

    __tablename__ = "settings"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[Any] = mapped_column(JSON, nullable=True)


class Dataset(Base):
    """A named set of cases; ``version`` is its newest version (migration 0007).

    Every change is a new version. A case's states are ``DatasetCase`` rows valid over a
    range of versions, so an edit writes one case, and every past version stays readable.
    """

    __tablename__ = "datasets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    updated_at: Mapped[datetime] = mapped_column(DateTime)


class DatasetVersion(Base):
    """One version of a dataset: when, what changed (``note``), its case and draft counts."""

    __tablename__ = "dataset_versions"
    __table_args__ = (UniqueConstraint("dataset_id", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    note: Mapped[str] = mapped_column(Text)
    cases: Mapped[int] = mapped_column(Integer)
    drafts: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime)


class DatasetCase(Base):
    """One state of one case, valid in versions ``version_from`` up to (not including)
    ``version_to`` (null: the current state). ``draft``: the reference was taken from a
    captured output (``capture_id``) and no person has edited or accepted it yet."""

    __tablename__ = "dataset_cases"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id", ondelete="CASCADE"))
    case_id: Mapped[str] = mapped_column(String(200))
    # the case's place in the dataset (kept by an edit, so a version reads in a stable order)
    position: Mapped[int] = mapped_column(Integer)
    version_from: Mapped[int] = mapped_column(Integer)
    version_to: Mapped[int | None] = mapped_column(Integer, nullable=True)
    input: Mapped[str] = mapped_column(Text)
    references: Mapped[list[str]] = mapped_column("reference_answers", JSON)
    meta: Mapped[JSONObject | None] = mapped_column("metadata", JSON, nullable=True)
    draft: Mapped[bool] = mapped_column(Boolean)
    capture_id: Mapped[int | None] = mapped_column(Integer, nullable=True)


_cases = cast(Table, DatasetCase.__table__).c
Index("ix_dataset_cases_dataset_id_version_from", _cases.dataset_id, _cases.version_from)
# a case id is unique among a dataset's current cases (older states share it)
Index(
    "ix_dataset_cases_current",
    _cases.dataset_id,
    _cases.case_id,
    unique=True,
    sqlite_where=_cases.version_to.is_(None),
    postgresql_where=_cases.version_to.is_(None),
)


class AlertRule(Base):
    """A rule watched by the server (migration 0009): an eval's (or every active eval's, with
    ``eval_name`` "*") pass rate or mean score below ``threshold``, a significant pass-rate
    ``drop`` against the previous window, or ``silence`` (no result for the window). The window
    is ``window_results`` results or ``window_seconds`` seconds. Kept in the evals YAML too."""

    __tablename__ = "alert_rules"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    eval_name: Mapped[str] = mapped_column(String(200))
    condition: Mapped[str] = mapped_column(String(16))
    threshold: Mapped[float | None] = mapped_column(Float, nullable=True)
    window_results: Mapped[int | None] = mapped_column(Integer, nullable=True)
    window_seconds: Mapped[int | None] = mapped_column(Integer, nullable=True)
    webhook: Mapped[str | None] = mapped_column(Text, nullable=True)
    secret_env: Mapped[str | None] = mapped_column(String(200), nullable=True)
    format: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime)
    updated_at: Mapped[datetime] = mapped_column(DateTime)


class Alert(Base):
    """One firing of a rule for one eval: open until the rule holds again. At most one open
    alert per rule and eval (a partial unique index), so one drop never fires twice."""

    __tablename__ = "alerts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    rule_id: Mapped[int] = mapped_column(ForeignKey("alert_rules.id", ondelete="CASCADE"))
    eval_name: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16))
    opened_at: Mapped[datetime] = mapped_column(DateTime)
    closed_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    # the value that fired (pass rate, mean score, pass-rate change, seconds of silence)
    value: Mapped[float | None] = mapped_column(Float, nullable=True)
    # what the value was measured on (counts, the baseline a drop is measured against)
    detail: Mapped[JSONObject] = mapped_column(JSON)


class AlertDelivery(Base):
    """One attempt to deliver an alert (or a rule's test sample: ``alert_id`` null) to a
    webhook: when, which attempt, the HTTP status and the error, if any."""

    __tablename__ = "alert_deliveries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    rule_id: Mapped[int] = mapped_column(ForeignKey("alert_rules.id", ondelete="CASCADE"))
    alert_id: Mapped[int | None] = mapped_column(
        ForeignKey("alerts.id", ondelete="CASCADE"), nullable=True
    )
    event: Mapped[str] = mapped_column(String(16))
    attempt: Mapped[int] = mapped_column(Integer)
    at: Mapped[datetime] = mapped_column(DateTime)
    status: Mapped[int | None] = mapped_column(Integer, nullable=True)
    ok: Mapped[bool] = mapped_column(Boolean)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)


_alerts = cast(Table, Alert.__table__).c
Index("ix_alerts_status", _alerts.status)
Index(
    "ix_alerts_open",
    _alerts.rule_id,
    _alerts.eval_name,
    unique=True,
    sqlite_where=_alerts.status == "open",
    postgresql_where=_alerts.status == "open",
)
Index("ix_alert_deliveries_alert_id", cast(Table, AlertDelivery.__table__).c.alert_id)


class CaptureMeta(Base):
    """A capture's indexed metadata (migration 0010; ``simeval.store.meta_index``): one row per
    capture and indexed key, with the value as a filter compares it and the capture's time,
    so a metadata filter reads the captures it returns, newest first, from one index."""

    __tablename__ = "capture_meta"

    capture_id: Mapped[int] = mapped_column(
        ForeignKey("captures.id", ondelete="CASCADE"), primary_key=True
    )
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(200))
    captured_at: Mapped[datetime] = mapped_column(DateTime)


capture_meta_table = cast(Table, CaptureMeta.__table__)
_meta = capture_meta_table.c
Index("ix_capture_meta_lookup", _meta.key, _meta.value, _meta.captured_at, _meta.capture_id)


class Conversation(Base):
    """A conversation's summary (migration 0010), kept with every capture of it in the
    capture's transaction: turns, first and last activity, the last turn, and the automated
    result and pass counts (reviews are applied on read). Listing conversations reads these
    rows, newest activity first, instead of grouping every capture."""

    __tablename__ = "conversations"

    conversation_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    turns: Mapped[int] = mapped_column(Integer)
    first_at: Mapped[datetime] = mapped_column(DateTime)
    last_at: Mapped[datetime] = mapped_column(DateTime)
    last_capture_id: Mapped[int] = mapped_column(Integer)
    results: Mapped[int] = mapped_column(Integer)
    passes: Mapped[int] = mapped_column(Integer)


conversations_table = cast(Table, Conversation.__table__)
Index(
    "ix_conversations_last_at",
    conversations_table.c.last_at,
    conversations_table.c.conversation_id,
)


class MetaRollup(Base):
    """Captured results counted per indexed metadata value, UTC hour and eval (migration 0012;
    ``simeval.store.meta_rollup``): kept with ``trend_rollup``, up to the same watermark, from
    each capture's ``capture_meta`` rows, so a count under one metadata filter sums the hours of
    its value (the primary key's range) instead of every matching capture. Automated results:
    reviews are applied on read."""

    __tablename__ = "meta_rollup"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(200), primary_key=True)
    bucket: Mapped[datetime] = mapped_column(DateTime, primary_key=True)
    eval_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    count: Mapped[int] = mapped_column(Integer)
    passes: Mapped[int] = mapped_column(Integer)


meta_rollup_table = cast(Table, MetaRollup.__table__)
# the retention cleanup deletes whole hours of every value
Index("ix_meta_rollup_bucket", meta_rollup_table.c.bucket)


class MetaCaptureRollup(Base):
    """Captures counted per indexed metadata value and UTC hour (migration 0013;
    ``simeval.store.meta_rollup``): kept with ``meta_rollup``, up to the same watermark, so
    the number of captures under one metadata filter sums the hours of its value (the primary
    key's range) instead of counting every matching ``capture_meta`` row. Every capture
    counts, with results or without."""

    __tablename__ = "meta_capture_rollup"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(200), primary_key=True)
    bucket: Mapped[datetime] = mapped_column(DateTime, primary_key=True)
    count: Mapped[int] = mapped_column(Integer)


meta_capture_rollup_table = cast(Table, MetaCaptureRollup.__table__)
# the retention cleanup deletes whole hours of every value
Index("ix_meta_capture_rollup_bucket", meta_capture_rollup_table.c.bucket)


class User(Base):
    """A person or service with a role and its own API key (migration 0016;
    ``simeval.store.users_sql``). The key and the password are kept only as hashes."""

    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    role: Mapped[str] = mapped_column(String(16))
    # SHA-256 of the key (hex): a key is 256 random bits, so no salt or slow hash is needed
    key_hash: Mapped[str | None] = mapped_column(String(64), unique=True, nullable=True)
    key_prefix: Mapped[str | None] = mapped_column(String(16), nullable=True)
    password_hash: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    disabled: Mapped[bool] = mapped_column(Boolean, default=False)


class AuditEntry(Base):
    """One change, as the audit log keeps it (migration 0016; ``simeval.store.audit_sql``):
    append-only, triggers refuse to update or delete a row."""

    __tablename__ = "audit_log"
    __table_args__ = (
        Index("ix_audit_log_at_id", "at", "id"),
        Index("ix_audit_log_actor", "actor"),
        Index("ix_audit_log_target", "target"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(DateTime)
    actor: Mapped[str | None] = mapped_column(String(64), nullable=True)
    action: Mapped[str] = mapped_column(String(64))
    target: Mapped[str] = mapped_column(String(300))
    detail: Mapped[JSONObject] = mapped_column(JSON)
