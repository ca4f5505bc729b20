"""Alert rules as the evals YAML writes them (its ``alerts:`` section): checked, stored, and
written back.

The grammar, one mapping per rule::

    alerts:
      - name: capital-drop          # unique; importing again replaces the rule of that name
        eval: capital               # or "*": every active eval
        when: pass_rate < 0.8       # or mean_score < X, drop, silence
        window: 20                  # results, or a duration: 90s, 30m, 1h, 2d (default 20)
        webhook: https://hooks.example/simeval     # optional: the alert still shows
        secret_env: SIMEVAL_ALERT_SECRET           # optional: HMAC-SHA256 key's variable
        format: slack               # optional: json (default) or slack ({"text": ...})

``silence`` needs a duration window (no result for that long); ``drop`` compares the window
with the one before it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import NotRequired, TypedDict

from simeval.checks import as_utc, check_name, check_storable, check_url, utc_now
from simeval.errors import InvalidInput
from simeval.service.actor import record
from simeval.service.alert_models import AlertRuleOut
from simeval.store import AlertRule, Tx
from simeval.store.alerts_sql import add_rule, rule_named, rules_by_name
from simeval.store.lookups import flush_changes

RULE_KEYS = {"name", "eval", "when", "window", "webhook", "secret_env", "format"}
DEFAULT_WINDOW = 20
MAX_WINDOW_RESULTS = 100_000
_WHEN = re.compile(r"^\s*(pass_rate|mean_score)\s*<\s*([0-9]*\.?[0-9]+)\s*$")
_DURATION = re.compile(r"^\s*(\d+)\s*([smhd])\s*$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_WINDOW_SECONDS = 3650 * 86400  # ten years: longer than any store keeps results
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class CheckedRule(TypedDict):
    """A rule as ``check_rule`` checked it: the ``AlertRule`` columns it stores."""

    name: str
    eval_name: str
    condition: str
    threshold: float | None
    window_results: int | None
    window_seconds: int | None
    webhook: str | None
    secret_env: str | None
    format: str


class RuleItem(TypedDict):
    """A stored rule as the evals YAML's ``alerts:`` section writes it."""

    name: str
    eval: str
    when: str
    window: int | str
    webhook: NotRequired[str]
    secret_env: NotRequired[str]
    format: NotRequired[str]


def parse_window(value: object) -> tuple[int | None, int | None]:
    """``(results, seconds)`` of a rule's window: a positive count, or a duration text.

    >>> parse_window(20), parse_window("1h"), parse_window("90s")
    ((20, None), (None, 3600), (None, 90))
    """
    if isinstance(value, bool):
        raise InvalidInput("window must be a count of results or a duration such as 1h")
    if isinstance(value, int):
        if not 2 <= value <= MAX_WINDOW_RESULTS:
            raise InvalidInput(f"window must be 2 to {MAX_WINDOW_RESULTS} results, not {value}")
        return value, None
    if isinstance(value, str):
        if value.strip().isdigit():
            return parse_window(int(value))
        m = _DURATION.match(value)
        if m and len(m.group(1)) <= 12 and int(m.group(1)) > 0:
            seconds = int(m.group(1)) * _UNIT[m.group(2).lower()]
            if seconds > MAX_WINDOW_SECONDS:
                raise InvalidInput(f"window must be at most {MAX_WINDOW_SECONDS // 86400} days")
            return None, seconds
    raise InvalidInput(
        f"window must be a count of results or a duration such as 30m, 1h or 2d, not {value!r}"
    )


def window_text(results: int | None, seconds: int | None) -> int | str:
    """A stored window as the YAML writes it: the count, or the largest whole unit."""
    if results is not None:
        return results
    secs = int(seconds or 0)
    for unit in ("d", "h", "m"):
        if secs % _UNIT[unit] == 0:
            return f"{secs // _UNIT[unit]}{unit}"
    return f"{secs}s"


def when_text(condition: str, threshold: float | None) -> str:
    """A stored condition as the YAML writes it (``pass_rate < 0.8``, ``drop``)."""
    return f"{condition} < {threshold:g}" if threshold is not None else condition


def _check_webhook(value: object) -> str | None:
    if value is None:
        return None
    return check_url(check_storable(str(value), "webhook"), "webhook")


def check_rule(item: object) -> CheckedRule:
    """One rule mapping checked: its stored fields, or ``InvalidInput`` naming the problem."""
    if not isinstance(item, dict):
        raise InvalidInput("is not a mapping")
    unknown = set(item) - RULE_KEYS
    if unknown:
        raise InvalidInput(f"unknown key {sorted(unknown)[0]!r} (rules take {sorted(RULE_KEYS)})")
    name = check_name(item.get("name"))
    target = item.get("eval")
    if not isinstance(target, str) or not target.strip():
        raise InvalidInput("eval must name an eval, or be '*' for every active eval")
    target = target.strip() if target.strip() == "*" else check_name(target)
    when = item.get("when")
    if not isinstance(when, str):
        raise InvalidInput("when must be pass_rate < X, mean_score < X, drop or silence")
    m = _WHEN.match(when)
    threshold: float | None = None
    if m:
        condition, threshold = m.group(1), float(m.group(2))
        if not 0 <= threshold <= 1:
            raise InvalidInput(f"the threshold in {when!r} must be between 0 and 1")
    elif when.strip() in ("drop", "silence"):
        condition = when.strip()
    else:
        raise InvalidInput(
            f"when must be pass_rate < X, mean_score < X, drop or silence, not {when!r}"
        )
    results, seconds = parse_window(item.get("window", DEFAULT_WINDOW))
    if condition == "silence" and seconds is None:
        raise InvalidInput("a silence rule's window must be a duration such as 1h")
    secret_env = item.get("secret_env")
    if secret_env is not None and (
        not isinstance(secret_env, str) or not _ENV_NAME.match(secret_env)
    ):
        raise InvalidInput(f"secret_env must name an environment variable, not {secret_env!r}")
    fmt = item.get("format", "json")
    if fmt not in ("json", "slack"):
        raise InvalidInput(f"format must be json or slack, not {fmt!r}")
    return {
        "name": name,
        "eval_name": target,
        "condition": condition,
        "threshold": threshold,
        "window_results": results,
        "window_seconds": seconds,
        "webhook": _check_webhook(item.get("webhook")),
        "secret_env": secret_env,
        "format": fmt,
    }


def validate_alert_rules(items: object, source: str) -> list[CheckedRule]:
    """The ``alerts:`` section of an evals document checked before anything is written (none:
    an empty list). Errors name ``source``, the rule and the problem."""
    if items is None:
        return []
    if not isinstance(items, list):
        raise InvalidInput(f"{source}: 'alerts' must be a list of rules")
    out: list[CheckedRule] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        where = f"{source}: alert {i + 1}"
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            where += f" ({item['name']!r})"
        try:
            rule = check_rule(item)
            if rule["name"] in seen:
                raise InvalidInput(f"name {rule['name']!r} appears twice")
        except InvalidInput as exc:
            raise InvalidInput(f"{where}: {exc}") from None
        seen.add(rule["name"])
        out.append(rule)
    return out


def store_alert_rules(s: Tx, rules: Sequence[CheckedRule], now: datetime | None = None) -> int:
    """Create or replace (by name) each rule in ``s``'s transaction; how many changed."""
    now = now or utc_now()
    changed = 0
    for rule in rules:
        row = rule_named(s, rule["name"])
        target = f"alert_rule:{rule['name']}"
        if row is None:
            add_rule(s, AlertRule(**rule, created_at=now, updated_at=now))
            changed += 1
            record(s, "alert_rule.create", target, eval=rule.get("eval_name"))
            continue
        fields = sorted(k for k, v in rule.items() if getattr(row, k) != v)
        if fields:
            for k, v in rule.items():
                setattr(row, k, v)
            row.updated_at = now
            changed += 1
            record(s, "alert_rule.change", target, fields=fields)
    flush_changes(s)
    return changed


def rule_out(rule: AlertRule) -> AlertRuleOut:
    """A stored rule as the service answers it."""
    return AlertRuleOut(
        name=rule.name,
        eval=rule.eval_name,
        when=when_text(rule.condition, rule.threshold),
        condition=rule.condition,  # type: ignore[arg-type]
        threshold=rule.threshold,
        window=window_text(rule.window_results, rule.window_seconds),
        webhook=rule.webhook,
        secret_env=rule.secret_env,
        format=rule.format,  # type: ignore[arg-type]
        created_at=as_utc(rule.created_at),
        updated_at=as_utc(rule.updated_at),
    )


def export_alert_rules(s: Tx) -> list[RuleItem]:
    """The stored rules as the evals YAML's ``alerts:`` section (``validate_alert_rules``
    reads it back)."""
    out = []
    for rule in rules_by_name(s):
        item: RuleItem = {
            "name": rule.name,
            "eval": rule.eval_name,
            "when": when_text(rule.condition, rule.threshold),
            "window": window_text(rule.window_results, rule.window_seconds),
        }
        if rule.webhook:
            item["webhook"] = rule.webhook
        if rule.secret_env:
            item["secret_env"] = rule.secret_env
        if rule.format != "json":
            item["format"] = rule.format
        out.append(item)
    return out
