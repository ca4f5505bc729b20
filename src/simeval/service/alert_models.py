"""What the alerts part of the service returns: pydantic models (times timezone-aware UTC),
also the HTTP API's response models."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Condition = Literal["pass_rate", "mean_score", "drop", "silence"]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=False, extra="forbid")


class AlertRuleOut(_Model):
    """A stored rule as the evals YAML writes it: ``when`` is ``pass_rate < 0.8``,
    ``mean_score < 0.6``, ``drop`` or ``silence``; ``window`` a count of results or a
    duration such as ``1h``."""

    name: str
    eval: str
    when: str
    condition: Condition
    threshold: float | None
    window: int | str
    webhook: str | None
    secret_env: str | None
    format: Literal["json", "slack"]
    created_at: datetime
    updated_at: datetime


class AlertOut(_Model):
    """One firing of a rule for one eval: ``open`` until the rule holds again. ``value`` is
    what fired (the pass rate, mean score, pass-rate change or seconds without results)."""

    id: int
    rule: str
    eval_name: str
    when: str
    status: Literal["open", "closed"]
    value: float | None
    message: str
    opened_at: datetime
    closed_at: datetime | None
    detail: dict[str, Any] = Field(default_factory=dict)


class DeliveryOut(_Model):
    """One attempt to post an alert (``event`` open, closed or test) to a rule's webhook."""

    id: int
    rule: str
    alert_id: int | None
    event: str
    attempt: int
    at: datetime
    status: int | None
    ok: bool
    error: str | None


class AlertTestReport(_Model):
    """What ``test_alert`` did: the sample sent and every attempt, ``delivered`` when one
    got a 2xx answer."""

    rule: str
    webhook: str
    delivered: bool
    payload: dict[str, Any]
    attempts: list[DeliveryOut]


class AlertCheck(_Model):
    """What one evaluation of the rules did: the alerts it opened and closed."""

    opened: list[AlertOut] = Field(default_factory=list)
    closed: list[AlertOut] = Field(default_factory=list)
