"""The SQL of the alerts: their rules (``alert_rules``), the alerts opened and closed
(``alerts``), their delivery log (``alert_deliveries``), and the newest captured results the
rules are judged on. Each function works in the caller's session (and its transaction); the
service (``simeval.service.alerts``, ``alert_rules``, ``alert_eval``) decides."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Row, select, tuple_

from simeval.store.database import Tx
from simeval.store.tables import Alert, AlertDelivery, AlertRule, Capture, Eval


def rules_by_name(s: Tx) -> list[AlertRule]:
    """Every stored rule, by name."""
    return list(s.scalars(select(AlertRule).order_by(AlertRule.name)))


def rules_by_id(s: Tx) -> list[AlertRule]:
    """Every stored rule, oldest first."""
    return list(s.scalars(select(AlertRule).order_by(AlertRule.id)))


def rule_named(s: Tx, name: str) -> AlertRule | None:
    """The rule named ``name`` (exactly), or None."""
    return s.scalar(select(AlertRule).where(AlertRule.name == name))


def rule_by_id(s: Tx, rule_id: int) -> AlertRule | None:
    """The rule whose id is ``rule_id``, or None (deleted meanwhile)."""
    return s.get(AlertRule, rule_id)


def rule_of(s: Tx, alert: Alert) -> AlertRule:
    """The rule ``alert`` was opened by (it exists: deleting a rule deletes its alerts)."""
    return s.get_one(AlertRule, alert.rule_id)


def add_rule(s: Tx, rule: AlertRule) -> AlertRule:
    """``rule`` added to the transaction (written with the next flush or the commit)."""
    s.add(rule)
    return rule


def delete_rule(s: Tx, rule: AlertRule) -> None:
    """Delete ``rule`` (its alerts and delivery log go with it: ON DELETE CASCADE)."""
    s.delete(rule)


def active_evals(s: Tx) -> list[Eval]:
    """The active evals (the ones a rule for ``"*"`` watches)."""
    return list(s.scalars(select(Eval).where(Eval.status == "active")))


def open_alerts(s: Tx) -> list[Alert]:
    """Every open alert."""
    return list(s.scalars(select(Alert).where(Alert.status == "open")))


def open_alert(s: Tx, rule_id: int, eval_name: str) -> Alert | None:
    """The open alert of rule ``rule_id`` on eval ``eval_name``, or None."""
    return s.scalar(
        select(Alert).where(
            Alert.rule_id == rule_id, Alert.eval_name == eval_name, Alert.status == "open"
        )
    )


def alert_by_id(s: Tx, alert_id: int) -> Alert | None:
    """The alert whose id is ``alert_id``, or None."""
    return s.get(Alert, alert_id)


def list_alerts(
    s: Tx, status: str | None, eval_name: str | None, limit: int | None
) -> list[tuple[Alert, AlertRule]]:
    """Alerts with their rules, newest first: of ``status`` and of eval ``eval_name`` when
    given, at most ``limit`` (None: all)."""
    q = (
        select(Alert, AlertRule)
        .join(AlertRule, AlertRule.id == Alert.rule_id)
        .order_by(Alert.opened_at.desc(), Alert.id.desc())
    )
    if status is not None:
        q = q.where(Alert.status == status)
    if eval_name is not None:
        q = q.where(Alert.eval_name == eval_name)
    if limit is not None:
        q = q.limit(limit)
    return [(a, r) for a, r in s.execute(q)]


def list_deliveries(
    s: Tx, alert_id: int | None, rule_id: int | None, limit: int
) -> list[tuple[AlertDelivery, str]]:
    """Delivery attempts with their rule's name, newest first, at most ``limit``: one
    alert's, one rule's, or all."""
    q = (
        select(AlertDelivery, AlertRule.name)
        .join(AlertRule, AlertRule.id == AlertDelivery.rule_id)
        .order_by(AlertDelivery.id.desc())
        .limit(limit)
    )
    if alert_id is not None:
        q = q.where(AlertDelivery.alert_id == alert_id)
    if rule_id is not None:
        q = q.where(AlertDelivery.rule_id == rule_id)
    return [(d, name) for d, name in s.execute(q)]


def add_flushed(s: Tx, row: Alert | AlertDelivery) -> None:
    """Nothing: ``row`` (an alert opened or closed, a delivery attempt) stored: flushed, so a
    new one has its id."""
    s.add(row)
    s.flush()


def scored_captures_before(
    s: Tx, last: tuple[datetime, int] | None, limit: int
) -> list[Row[int, datetime, bytes | None]]:
    """Up to ``limit`` scored captures' (id, captured_at, scores), newest first, older than
    the keyset cursor ``last`` (the (captured_at, id) of the previous chunk's last) if
    given."""
    q = (
        select(Capture.id, Capture.captured_at, Capture.scores)
        .where(Capture.scores.is_not(None))
        .order_by(Capture.captured_at.desc(), Capture.id.desc())
    )
    key = tuple_(Capture.captured_at, Capture.id)
    step = q if last is None else q.where(key < tuple_(*last))
    return list(s.execute(step.limit(limit)))
