"""Alerts in the service, on both backends: rules from the evals YAML (checked, stored, written
back), a rule that opens once on a drop and closes when the pass rate recovers, ``drop`` with
the compare engine's test, ``silence``, ``"*"`` rules, delivery to a real webhook receiver on
127.0.0.1 (signature checked, Slack text), retries with every attempt logged, and a receiver
that is down or slow never delaying captures (the background watcher)."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dbhelp import sql
from simeval.checks import utc_now
from simeval.errors import InvalidInput, NotFound
from simeval.service import Service
from simeval.service.alert_watch import AlertWatcher
from webhook_receiver import closed_port_url, webhook_receiver

REF = "Paris is the capital of France."
GOOD = "Paris is the capital of France."
BAD = "Bananas grow on trees in warm tropical places."
SECRET = "s3cret-for-tests"


@pytest.fixture
def svc(db: str) -> Any:
    service = Service(db)
    for name in ("capital", "other"):
        service.create_eval(name, REF)
        service.test_eval(name, "q", REF)
        service.activate_eval(name)
    yield service
    service.close()


def capture(svc: Service, output: str, n: int) -> None:
    for _ in range(n):
        svc.capture("q", output)


def rule(**extra: Any) -> dict[str, Any]:
    base = {"name": "capital-low", "eval": "capital", "when": "pass_rate < 0.8", "window": 10}
    return {**base, **extra}


def test_a_rule_opens_once_per_drop_and_closes_when_the_pass_rate_recovers(svc: Service) -> None:
    svc.alerts.set_alert_rules([rule()])
    capture(svc, GOOD, 10)
    assert svc.alerts.evaluate_alerts().opened == []
    capture(svc, BAD, 6)  # the last 10: 4 pass
    check = svc.alerts.evaluate_alerts()
    assert [(a.rule, a.eval_name, a.value) for a in check.opened] == [
        ("capital-low", "capital", 0.4)
    ]
    assert "pass rate 40% < 0.8 over the last 10 results" in check.opened[0].message
    # no double fire: again, and with more bad results, the one alert stays the only one
    assert svc.alerts.evaluate_alerts().opened == []
    capture(svc, BAD, 5)
    assert svc.alerts.evaluate_alerts().opened == []
    assert len(svc.alerts.open_alerts()) == 1 and len(svc.alerts.open_alerts("capital")) == 1
    assert svc.alerts.open_alerts("other") == []
    capture(svc, GOOD, 10)
    closed = svc.alerts.evaluate_alerts().closed
    assert [a.id for a in closed] == [check.opened[0].id]
    assert closed[0].closed_at is not None and closed[0].detail["closed_value"] == 1.0
    assert svc.alerts.open_alerts() == []
    # the next drop is a new alert
    capture(svc, BAD, 10)
    again = svc.alerts.evaluate_alerts().opened
    assert len(again) == 1 and again[0].id != check.opened[0].id
    assert sql(svc.url, "SELECT count(*) FROM alerts") == [(2,)]


def test_a_count_window_needs_its_results_and_reviews_count(svc: Service) -> None:
    svc.alerts.set_alert_rules([rule(when="mean_score < 0.5")])
    capture(svc, BAD, 9)
    assert svc.alerts.evaluate_alerts().opened == []  # 9 of 10 results: not judged yet
    capture(svc, BAD, 1)
    (alert,) = svc.alerts.evaluate_alerts().opened
    assert alert.value is not None and alert.value < 0.5
    # a person's reviews decide: all ten marked good, the rule holds again
    for r in svc.list_results(eval_name="capital", limit=10):
        svc.review_result(r.id, 1.0)
    assert [a.id for a in svc.alerts.evaluate_alerts().closed] == [alert.id]


def test_drop_uses_the_compare_engines_test_and_closes_only_on_recovery(svc: Service) -> None:
    svc.alerts.set_alert_rules(
        [{"name": "capital-drop", "eval": "capital", "when": "drop", "window": 20}]
    )
    capture(svc, GOOD, 20)
    capture(svc, GOOD, 18)
    capture(svc, BAD, 2)  # 90% after 100%: within chance, no alert
    assert svc.alerts.evaluate_alerts().opened == []
    capture(svc, BAD, 18)  # the last 20 all fail
    (alert,) = svc.alerts.evaluate_alerts().opened
    assert alert.value is not None and alert.value < -0.5
    assert alert.detail["pass_rate_ci"][1] < 0 and alert.detail["baseline"]["n"] == 20
    # both windows now low: still judged against the window it dropped from, still open
    capture(svc, BAD, 20)
    check = svc.alerts.evaluate_alerts()
    assert check.opened == [] and check.closed == []
    capture(svc, GOOD, 20)
    assert [a.id for a in svc.alerts.evaluate_alerts().closed] == [alert.id]


def test_silence_fires_after_the_window_without_results(svc: Service) -> None:
    svc.alerts.set_alert_rules(
        [{"name": "quiet", "eval": "capital", "when": "silence", "window": "1h"}]
    )
    capture(svc, GOOD, 1)
    assert svc.alerts.evaluate_alerts().opened == []
    later = utc_now() + timedelta(hours=2)
    (alert,) = svc.alerts.evaluate_alerts(now=later).opened
    assert alert.message == "capital: no results for 1h" and alert.value is not None
    assert alert.value >= 3600
    capture(svc, GOOD, 1)
    assert [a.id for a in svc.alerts.evaluate_alerts().closed] == [alert.id]


def test_a_star_rule_watches_every_active_eval(svc: Service) -> None:
    svc.alerts.set_alert_rules([rule(name="all-low", eval="*", window=5)])
    capture(svc, BAD, 5)
    opened = svc.alerts.evaluate_alerts().opened
    assert sorted(a.eval_name for a in opened) == ["capital", "other"]
    svc.deactivate_eval("other")
    capture(svc, GOOD, 5)
    closed = svc.alerts.evaluate_alerts().closed
    # "other" is no longer watched: its alert stays as it was, capital's closes
    assert [a.eval_name for a in closed] == ["capital"]


def test_rules_come_from_the_evals_yaml_and_go_back_to_it(svc: Service, tmp_path: Path) -> None:
    doc = {
        "evals": [{"name": "capital", "references": [REF], "status": "active"}],
        "alerts": [
            rule(webhook="https://hooks.example/simeval", secret_env="SIMEVAL_ALERT_SECRET"),
            {"name": "quiet", "eval": "*", "when": "silence", "window": "90m", "format": "slack"},
        ],
    }
    path = tmp_path / "evals.yaml"
    import yaml

    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    svc.import_evals(str(path))
    rules = {r.name: r for r in svc.alerts.alert_rules()}
    assert rules["capital-low"].when == "pass_rate < 0.8" and rules["capital-low"].window == 10
    assert rules["quiet"].window == "90m" and rules["quiet"].format == "slack"
    exported = svc.export_evals()["alerts"]
    assert exported == [
        {
            "name": "capital-low",
            "eval": "capital",
            "when": "pass_rate < 0.8",
            "window": 10,
            "webhook": "https://hooks.example/simeval",
            "secret_env": "SIMEVAL_ALERT_SECRET",
        },
        {"name": "quiet", "eval": "*", "when": "silence", "window": "90m", "format": "slack"},
    ]
    # importing the export changes nothing; a changed rule is replaced by name
    svc.import_evals(svc.export_evals())
    assert len(svc.alerts.alert_rules()) == 2
    svc.import_evals({"evals": [], "alerts": [rule(when="pass_rate < 0.5")]})
    assert {r.name: r.threshold for r in svc.alerts.alert_rules()}["capital-low"] == 0.5


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        ({"when": "pass_rate > 0.8"}, "when must be pass_rate < X"),
        ({"when": "pass_rate < 1.5"}, "between 0 and 1"),
        ({"window": 0}, "window must be 2 to"),
        ({"window": "soon"}, "window must be a count of results or a duration"),
        ({"when": "silence", "window": 20}, "silence rule's window must be a duration"),
        ({"webhook": "ftp://x"}, "webhook must be an http(s) URL"),
        ({"webhook": "http://[::1"}, "webhook must be an http(s) URL"),
        ({"webhook": "http://host/a b"}, "webhook holds a space or a control character"),
        ({"webhook": "http://host/\tx"}, "webhook holds a space or a control character"),
        ({"webhook": "http://host/x\r\nX-Evil: 1"}, "webhook holds a space or a control"),
        ({"webhook": "http:///path"}, "webhook must be an http(s) URL"),
        ({"webhook": "http://host:99999/"}, "webhook must be an http(s) URL"),
        ({"secret_env": "not a name"}, "secret_env must name an environment variable"),
        ({"format": "xml"}, "format must be json or slack"),
        ({"colour": "red"}, "unknown key 'colour'"),
        ({"eval": ""}, "eval must name an eval"),
    ],
)
def test_a_bad_rule_is_named_and_nothing_is_stored(
    svc: Service, bad: dict[str, Any], said: str
) -> None:
    doc = {"evals": [{"name": "new-one", "references": [REF]}], "alerts": [rule(**bad)]}
    with pytest.raises(InvalidInput) as err:
        svc.import_evals(doc)
    assert said in str(err.value) and "alert 1 ('capital-low')" in str(err.value)
    assert svc.alerts.alert_rules() == []
    assert "new-one" not in [e.name for e in svc.list_evals()]


@pytest.mark.process
def test_an_alert_is_delivered_signed_to_a_webhook(
    svc: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIMEVAL_ALERT_SECRET", SECRET)
    with webhook_receiver() as hook:
        svc.alerts.set_alert_rules([rule(webhook=hook.url, secret_env="SIMEVAL_ALERT_SECRET")])
        capture(svc, BAD, 10)
        (alert,) = svc.alerts.evaluate_alerts().opened
        tries = svc.alerts.deliver_alert(alert.id, "open", backoff=0.01)
        (got,) = hook.wait_for(1)
    assert [(t.attempt, t.ok, t.status) for t in tries] == [(1, True, 200)]
    assert got.signed_with(SECRET) and not got.signed_with("another secret")
    assert got.headers["content-type"] == "application/json"
    body = got.json()
    assert body["event"] == "open" and body["eval"] == "capital" and body["alert_id"] == alert.id
    assert body["value"] == 0.0 and body["message"].startswith("[simeval alert OPEN] capital-low")
    assert [d.ok for d in svc.alerts.alert_deliveries(alert_id=alert.id)] == [True]


@pytest.mark.process
def test_slack_hooks_get_text(svc: Service) -> None:
    with webhook_receiver() as hook:
        svc.alerts.set_alert_rules([rule(webhook=hook.url, format="slack")])
        report = svc.alerts.test_alert("capital-low", backoff=0.01)
        (got,) = hook.wait_for(1)
    assert report.delivered and "x-simeval-signature" not in got.headers
    assert list(got.json()) == ["text"] and "[simeval alert TEST] capital-low" in got.json()["text"]


@pytest.mark.process
def test_a_failing_receiver_is_tried_five_times_each_attempt_logged(svc: Service) -> None:
    with webhook_receiver(status=500) as hook:
        svc.alerts.set_alert_rules([rule(webhook=hook.url)])
        capture(svc, BAD, 10)
        (alert,) = svc.alerts.evaluate_alerts().opened
        tries = svc.alerts.deliver_alert(alert.id, "open", attempts=5, backoff=0.01)
        assert len(hook.wait_for(5)) == 5
    assert [t.attempt for t in tries] == [1, 2, 3, 4, 5]
    logged = svc.alerts.alert_deliveries(alert_id=alert.id)
    assert sorted(d.attempt for d in logged) == [1, 2, 3, 4, 5]
    assert all(not d.ok and d.status == 500 and "HTTP 500" in (d.error or "") for d in logged)
    # a refusal (4xx) answers the same again: one attempt
    with webhook_receiver(status=404) as hook:
        svc.alerts.set_alert_rules([rule(webhook=hook.url)])
        assert [t.status for t in svc.alerts.test_alert("capital-low", backoff=0.01).attempts] == [
            404
        ]


@pytest.mark.process
def test_a_missing_secret_sends_nothing_and_says_so(
    svc: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SIMEVAL_NO_SUCH_SECRET", raising=False)
    with webhook_receiver() as hook:
        svc.alerts.set_alert_rules([rule(webhook=hook.url, secret_env="SIMEVAL_NO_SUCH_SECRET")])
        report = svc.alerts.test_alert("capital-low", attempts=5, backoff=10)
        assert hook.got == []
    assert not report.delivered
    # one attempt, no backoff: the variable would be missing on every retry too
    (attempt,) = report.attempts
    assert attempt.error == "environment variable SIMEVAL_NO_SUCH_SECRET is not set"


def test_test_alert_needs_a_known_rule_with_a_webhook(svc: Service) -> None:
    with pytest.raises(NotFound):
        svc.alerts.test_alert("nope")
    svc.alerts.set_alert_rules([rule()])
    with pytest.raises(InvalidInput, match="has no webhook"):
        svc.alerts.test_alert("capital-low")
    svc.alerts.delete_alert_rule("capital-low")
    assert svc.alerts.alert_rules() == []


def _wait(predicate: Any, seconds: float = 20.0) -> bool:
    for _ in range(int(seconds / 0.05)):
        if predicate():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.process
def test_a_slow_receiver_never_delays_captures(svc: Service) -> None:
    """The watcher is woken by captures (its timer is off); while the receiver holds the
    alert's delivery, every capture still completes: none waits for the receiver."""
    with webhook_receiver(delay=60.0) as hook:
        svc.alerts.set_alert_rules([rule(webhook=hook.url, window=2)])
        watcher = AlertWatcher(svc, interval=600.0, min_gap=0.05, backoff=0.01, timeout=120.0)
        watcher.start()
        try:
            capture(svc, BAD, 2)
            assert _wait(lambda: len(hook.got) == 1)  # the delivery is under way, held
            for i in range(20):
                started = time.monotonic()
                svc.capture("q", f"{BAD} {i}")
                # a bound, far below the receiver's 60 s hold
                assert time.monotonic() - started < 5.0
            assert len(hook.got) == 1 and not hook.release.is_set()  # still held
            assert sql(svc.url, "SELECT count(*) FROM alert_deliveries") == [(0,)]
        finally:
            hook.release.set()
            watcher.stop()
    assert svc.count_results(eval_name="capital") == 22


@pytest.mark.process
def test_a_slow_receiver_never_holds_up_another_rules_receiver(svc: Service) -> None:
    """Two rules, two receivers: while the first holds its delivery (for a minute), the
    second rule's alert reaches its receiver (one delivery thread queued it behind)."""
    with webhook_receiver(delay=60.0) as slow, webhook_receiver() as fast:
        svc.alerts.set_alert_rules(
            [
                rule(webhook=slow.url, window=2),
                rule(name="other-low", eval="other", webhook=fast.url, window=2),
            ]
        )
        watcher = AlertWatcher(svc, interval=600.0, min_gap=0.05, backoff=0.01, timeout=120.0)
        watcher.start()
        try:
            capture(svc, BAD, 2)
            assert _wait(lambda: len(slow.got) == 1)  # held
            assert _wait(lambda: len(fast.got) == 1)
            assert fast.got[0].json()["rule"] == "other-low"
            assert _wait(lambda: any(d.ok for d in svc.alerts.alert_deliveries()))
            assert not slow.release.is_set() and len(slow.got) == 1  # still held
        finally:
            slow.release.set()
            watcher.stop()


@pytest.mark.process
def test_a_down_receiver_never_delays_captures_and_logs_each_attempt(svc: Service) -> None:
    url = closed_port_url()
    svc.alerts.set_alert_rules([rule(webhook=url, window=2)])
    watcher = AlertWatcher(svc, interval=600.0, min_gap=0.05, backoff=0.05, timeout=2.0)
    watcher.start()
    try:
        capture(svc, BAD, 2)
        for i in range(20):
            started = time.monotonic()
            svc.capture("q", f"{BAD} {i}")
            assert time.monotonic() - started < 5.0
        assert _wait(lambda: len(svc.alerts.alert_deliveries()) == 5)
    finally:
        watcher.stop()
    logged = svc.alerts.alert_deliveries()
    assert sorted(d.attempt for d in logged) == [1, 2, 3, 4, 5]
    assert all(d.status is None and not d.ok and d.error for d in logged)
    assert len(svc.alerts.open_alerts()) == 1  # one alert for the one drop, however many captures
    assert svc.count_results(eval_name="capital") == 22


def test_payloads_are_json_with_the_alert(svc: Service) -> None:
    svc.alerts.set_alert_rules([rule()])
    capture(svc, BAD, 10)
    (alert,) = svc.alerts.evaluate_alerts().opened
    assert (
        json.loads(json.dumps(svc.alerts.get_alert(alert.id).model_dump(mode="json")))["id"]
        == alert.id
    )
    with pytest.raises(NotFound):
        svc.alerts.get_alert(10_000)


def test_alerts_of_an_eval_name_no_database_can_hold_are_none(svc: Service) -> None:
    # PostgreSQL refuses a NUL in a query's text (the fuzzer's 500 on /api/alerts?eval=)
    svc.alerts.set_alert_rules([rule(when="pass_rate < 0.99", window=3)])
    capture(svc, "Bananas grow on trees.", 3)
    svc.alerts.evaluate_alerts()
    assert [a.eval_name for a in svc.alerts.list_alerts(eval_name="capital")] == ["capital"]
    assert svc.alerts.list_alerts(eval_name="capi\x00tal") == []
    assert svc.alerts.list_alerts(eval_name="capi\udc80tal") == []
