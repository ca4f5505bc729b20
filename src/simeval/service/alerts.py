"""Alerts: rules over each eval's recent results, the alerts they open and close, and their
delivery to webhooks (every attempt logged).

``evaluate_alerts`` reads the newest captures (a read transaction: captures are never kept
waiting), judges every rule (``alert_eval``), then opens and closes alerts in one short write.
An alert opens once per rule and eval until the rule holds again (a partial unique index
holds that even for two servers on one database); a rule for ``"*"`` watches every active
eval. The server runs it as results arrive and on a timer (``alert_watch.AlertWatcher``), and
delivers what opened or closed; ``test_alert`` posts a sample to a rule's webhook.
"""

from __future__ import annotations

import functools
from datetime import datetime

from simeval.checks import as_utc, check_lookup, utc_now
from simeval.errors import InvalidInput, NotFound
from simeval.service import alert_delivery
from simeval.service.actor import record
from simeval.service.alert_eval import Decision, Need, decide, merge, need_of, read_recent
from simeval.service.alert_models import (
    AlertCheck,
    AlertOut,
    AlertRuleOut,
    AlertTestReport,
    DeliveryOut,
)
from simeval.service.alert_rules import (
    rule_out,
    store_alert_rules,
    validate_alert_rules,
    when_text,
)
from simeval.service.base import Part
from simeval.store import Alert, AlertDelivery, AlertRule, Tx
from simeval.store.alerts_sql import (
    active_evals,
    add_flushed,
    alert_by_id,
    delete_rule,
    list_alerts,
    list_deliveries,
    open_alert,
    open_alerts,
    rule_by_id,
    rule_named,
    rule_of,
    rules_by_id,
    rules_by_name,
)
from simeval.store.lookups import write_or_none


def _alert_out(alert: Alert, rule: AlertRule) -> AlertOut:
    detail = dict(alert.detail or {})
    return AlertOut(
        id=alert.id,
        rule=rule.name,
        eval_name=alert.eval_name,
        when=when_text(rule.condition, rule.threshold),
        status=alert.status,  # type: ignore[arg-type]
        value=alert.value,
        message=str(detail.pop("message", "")),
        opened_at=as_utc(alert.opened_at),
        closed_at=None if alert.closed_at is None else as_utc(alert.closed_at),
        detail=detail,
    )


def _delivery_out(row: AlertDelivery, rule_name: str) -> DeliveryOut:
    return DeliveryOut(
        id=row.id,
        rule=rule_name,
        alert_id=row.alert_id,
        event=row.event,
        attempt=row.attempt,
        at=as_utc(row.at),
        status=row.status,
        ok=row.ok,
        error=row.error,
    )


def payload_of(alert: AlertOut, event: str, sent_at: datetime) -> dict[str, object]:
    """The JSON a webhook receives for ``alert`` (``event``: open, closed or test)."""
    state = {"open": "OPEN", "closed": "resolved", "test": "TEST"}.get(event, event)
    return {
        "event": event,
        "alert_id": alert.id,
        "rule": alert.rule,
        "eval": alert.eval_name,
        "when": alert.when,
        "status": alert.status,
        "value": alert.value,
        "opened_at": alert.opened_at.isoformat(),
        "closed_at": None if alert.closed_at is None else alert.closed_at.isoformat(),
        "sent_at": as_utc(sent_at).isoformat(),
        "message": f"[simeval alert {state}] {alert.rule}: {alert.message}",
        "detail": alert.detail,
    }


class AlertService(Part):
    """Alert rules, alerts and their deliveries."""

    # -- rules ----------------------------------------------------------------------------------
    def alert_rules(self) -> list[AlertRuleOut]:
        """Every stored rule, by name."""
        with self.store.read() as s:
            return [rule_out(r) for r in rules_by_name(s)]

    def set_alert_rules(self, rules: object, source: str = "rules") -> list[AlertRuleOut]:
        """Create or replace (by name) the rules of ``rules`` (the evals YAML's ``alerts:``
        list), all checked before any is written; returns the stored rules."""
        checked = validate_alert_rules(rules, source)
        self._write(lambda s: store_alert_rules(s, checked))
        return self.alert_rules()

    def delete_alert_rule(self, name: str) -> None:
        """Delete a rule with its alerts and delivery log (``NotFound`` without one)."""

        def work(s: Tx) -> None:
            rule = self._rule(s, name)
            delete_rule(s, rule)
            record(s, "alert_rule.delete", f"alert_rule:{rule.name}")

        self._write(work)

    def _rule(self, s: Tx, name: object) -> AlertRule:
        if not isinstance(name, str) or check_lookup(name, "rule name") is None:
            raise NotFound(f"no alert rule named {name!r}")
        rule = rule_named(s, name.strip())
        if rule is None:
            raise NotFound(f"no alert rule named {name!r}")
        return rule

    # -- alerts ---------------------------------------------------------------------------------
    def open_alerts(self, eval_name: str | None = None) -> list[AlertOut]:
        """The open alerts, newest first; only ``eval_name``'s when given."""
        return self.list_alerts(status="open", eval_name=eval_name, limit=None)

    def list_alerts(
        self,
        status: str | None = None,
        eval_name: str | None = None,
        limit: int | None = 100,
    ) -> list[AlertOut]:
        """Alerts newest first: ``status`` open or closed (None: both), one eval's or all."""
        if status not in (None, "open", "closed"):
            raise InvalidInput(f"status must be open or closed, not {status!r}")
        if eval_name is not None and check_lookup(eval_name, "eval name") is None:
            return []  # a NUL or a lone surrogate: no stored eval has that name
        with self.store.read() as s:
            return [_alert_out(a, r) for a, r in list_alerts(s, status, eval_name, limit)]

    def get_alert(self, alert_id: int) -> AlertOut:
        """One alert by id (``NotFound`` without one)."""
        with self.store.read() as s:
            alert = alert_by_id(s, alert_id) if isinstance(alert_id, int) else None
            if alert is None:
                raise NotFound(f"no alert {alert_id!r}")
            return _alert_out(alert, rule_of(s, alert))

    def alert_deliveries(
        self, alert_id: int | None = None, rule: str | None = None, limit: int = 100
    ) -> list[DeliveryOut]:
        """Delivery attempts newest first: one alert's, one rule's (with its tests), or all."""
        with self.store.read() as s:
            rule_id = self._rule(s, rule).id if rule is not None else None
            return [
                _delivery_out(d, name) for d, name in list_deliveries(s, alert_id, rule_id, limit)
            ]

    # -- evaluation -----------------------------------------------------------------------------
    def evaluate_alerts(self, now: datetime | None = None) -> AlertCheck:
        """Judge every rule on its evals' recent results; open the alerts that fire and close
        the open ones whose rule holds again. Returns what opened and closed."""
        now = now or utc_now()
        with self.store.read() as s:
            rules = rules_by_id(s)
            if not rules:
                return AlertCheck()
            active = {e.name: e.id for e in active_evals(s)}
            pairs: list[tuple[AlertRule, str, int]] = []
            needs: dict[int, Need] = {}
            for rule in rules:
                names = list(active) if rule.eval_name == "*" else [rule.eval_name]
                for name in names:
                    if name in active:
                        pairs.append((rule, name, active[name]))
                        merge(needs, active[name], need_of(rule, now))
            opened = {(a.rule_id, a.eval_name): dict(a.detail or {}) for a in open_alerts(s)}
            seen = read_recent(s, needs)
        decisions = [
            decide(rule, name, seen[eval_id], now, opened.get((rule.id, name)))
            for rule, name, eval_id in pairs
        ]
        changes = [
            d
            for d in decisions
            if (d.firing is True and (d.rule_id, d.eval_name) not in opened)
            or (d.firing is False and (d.rule_id, d.eval_name) in opened)
        ]
        if not changes:
            return AlertCheck()
        return self._apply(changes, now)

    def _apply(self, changes: list[Decision], now: datetime) -> AlertCheck:
        done = AlertCheck()
        for d in changes:
            # the store's write, not ``_write``: its refusal is not an eval name's. None also
            # when it is refused: another server opened it first (one alert per drop)
            out = write_or_none(self.store, functools.partial(self._apply_one, d=d, now=now))
            if out is not None:
                (done.opened if out.status == "open" else done.closed).append(out)
        return done

    def _apply_one(self, s: Tx, d: Decision, now: datetime) -> AlertOut | None:
        rule = rule_by_id(s, d.rule_id)
        if rule is None:  # deleted meanwhile
            return None
        alert = open_alert(s, d.rule_id, d.eval_name)
        if d.firing and alert is None:
            alert = Alert(
                rule_id=d.rule_id,
                eval_name=d.eval_name,
                status="open",
                opened_at=now,
                value=d.value,
                detail={**d.detail, "message": d.message},
            )
        elif not d.firing and alert is not None:
            alert.status, alert.closed_at = "closed", now
            alert.detail = {**(alert.detail or {}), "closed_value": d.value}
        else:  # another process got there first
            return None
        add_flushed(s, alert)
        return _alert_out(alert, rule)

    # -- delivery -------------------------------------------------------------------------------
    def deliver_alert(
        self,
        alert_id: int,
        event: str,
        attempts: int = alert_delivery.ATTEMPTS,
        backoff: float = alert_delivery.BACKOFF_S,
        timeout: float = alert_delivery.TIMEOUT_S,
    ) -> list[DeliveryOut]:
        """Post alert ``alert_id``'s ``event`` (open or closed) to its rule's webhook, retrying
        with backoff, every attempt logged; [] when the rule has no webhook."""
        alert = self.get_alert(alert_id)
        with self.store.read() as s:
            rule = self._rule(s, alert.rule)
        if not rule.webhook:
            return []
        payload = payload_of(alert, event, utc_now())
        return self._send(rule, alert_id, event, payload, attempts, backoff, timeout)

    def test_alert(
        self,
        name: str,
        attempts: int = alert_delivery.ATTEMPTS,
        backoff: float = alert_delivery.BACKOFF_S,
        timeout: float = alert_delivery.TIMEOUT_S,
    ) -> AlertTestReport:
        """Post a sample alert of rule ``name`` to its webhook (``InvalidInput`` when it has
        none); the attempts are logged like a real delivery's."""
        with self.store.read() as s:
            rule = self._rule(s, name)
        if not rule.webhook:
            raise InvalidInput(f"alert rule {rule.name!r} has no webhook to test")
        now = utc_now()
        sample = AlertOut(
            id=0,
            rule=rule.name,
            eval_name=rule.eval_name,
            when=when_text(rule.condition, rule.threshold),
            status="open",
            value=None,
            message=f"a test of rule {rule.name!r} ({when_text(rule.condition, rule.threshold)})",
            opened_at=as_utc(now),
            closed_at=None,
        )
        payload = payload_of(sample, "test", now)
        tries = self._send(rule, None, "test", payload, attempts, backoff, timeout)
        return AlertTestReport(
            rule=rule.name,
            webhook=rule.webhook,
            delivered=bool(tries) and tries[-1].ok,
            payload=payload,
            attempts=tries,
        )

    def _send(
        self,
        rule: AlertRule,
        alert_id: int | None,
        event: str,
        payload: dict[str, object],
        attempts: int,
        backoff: float,
        timeout: float,
    ) -> list[DeliveryOut]:
        logged: list[DeliveryOut] = []

        def log(a: alert_delivery.Attempt) -> None:
            logged.append(self._log_attempt(rule, alert_id, event, a))

        assert rule.webhook is not None
        alert_delivery.deliver(
            rule.webhook,
            payload,
            rule.format,
            rule.secret_env,
            log,
            attempts=attempts,
            backoff=backoff,
            timeout=timeout,
        )
        return logged

    def _log_attempt(
        self, rule: AlertRule, alert_id: int | None, event: str, a: alert_delivery.Attempt
    ) -> DeliveryOut:
        def work(s: Tx) -> DeliveryOut:
            row = AlertDelivery(
                rule_id=rule.id,
                alert_id=alert_id,
                event=event,
                attempt=a.attempt,
                at=utc_now(),
                status=a.status,
                ok=a.ok,
                error=a.error,
            )
            add_flushed(s, row)
            return _delivery_out(row, rule.name)

        out: DeliveryOut = self._write(work)
        return out
