"""Deciding the alert rules: each eval's recent captured results read in one pass over the
newest captures, and each rule judged on them (no database writes here).

- ``pass_rate < X`` / ``mean_score < X``: over the last N results (only once N exist) or over
  the last T (once any exist). Reviews count: a reviewed result's score is the review's.
- ``drop``: the window against the one before it, with the compare engine's test
  (``simeval.scoring.compare.compare_eval``, unpaired bootstrap, 95% interval): it fires when
  the pass-rate change's interval lies wholly below 0. While open it is judged against the
  window it dropped from (kept on the alert), so it closes when the pass rate has recovered,
  not merely when the windows both hold the low results.
- ``silence``: no result for T (and the rule older than T, so a new rule does not fire at once).

Data-set runs are not watched: alerts are about what production answers (captures).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from simeval.jsontypes import JSONObject
from simeval.scoring.compare import Case, compare_eval
from simeval.service.alert_rules import window_text
from simeval.store import AlertRule, Tx, unpack_results
from simeval.store.alerts_sql import scored_captures_before
from simeval.store.results_sql import capture_reviews

# how many captures one evaluation reads at most (newest first): a count window on an eval that
# rarely fires does not read the whole store every time
MAX_SCAN = 200_000
_CHUNK = 2000
RESAMPLES = 1000


@dataclass
class Seen:
    """One result as a rule reads it: the effective score and verdict, and when."""

    score: float
    passed: bool
    at: datetime


@dataclass
class Need:
    """How far back one eval's results must be read: a count, a time, or both."""

    count: int = 0
    since: datetime | None = None


@dataclass
class Decision:
    """A rule judged on one eval: ``firing`` True/False, or None (not enough results)."""

    rule_id: int
    eval_name: str
    firing: bool | None
    value: float | None = None
    message: str = ""
    detail: JSONObject = field(default_factory=dict)


def need_of(rule: AlertRule, now: datetime) -> Need:
    """What ``rule`` reads of an eval's results (a drop reads two windows)."""
    factor = 2 if rule.condition == "drop" else 1
    if rule.window_results is not None:
        return Need(count=factor * rule.window_results)
    return Need(since=now - timedelta(seconds=factor * int(rule.window_seconds or 0)))


def merge(needs: dict[int, Need], eval_id: int, need: Need) -> None:
    """Widen ``needs[eval_id]`` to cover ``need`` too."""
    have = needs.setdefault(eval_id, Need())
    have.count = max(have.count, need.count)
    if need.since is not None and (have.since is None or need.since < have.since):
        have.since = need.since


def read_recent(s: Tx, needs: dict[int, Need]) -> dict[int, list[Seen]]:
    """Each eval's newest captured results, newest first, as far back as its need asks."""
    out: dict[int, list[Seen]] = {e: [] for e in needs}
    if not needs:
        return out
    last: tuple[datetime, int] | None = None
    scanned = 0
    open_ = set(needs)
    while open_ and scanned < MAX_SCAN:
        caps = scored_captures_before(s, last, _CHUNK)
        if not caps:
            break
        reviews = capture_reviews(s, [c.id for c in caps])
        for cap_id, at, blob in caps:
            for eval_id, _v, score, ok, threshold, _m, _fp in unpack_results(blob).rows():
                if eval_id not in open_:
                    continue
                review = reviews.get((cap_id, eval_id))
                if review is not None:
                    score, ok = review.score, review.score >= threshold
                out[eval_id].append(Seen(score, ok, at))
            open_ = {e for e in open_ if not _satisfied(needs[e], out[e], at)}
        scanned += len(caps)
        last = (caps[-1][1], caps[-1][0])
    return out


def _satisfied(need: Need, seen: list[Seen], reached: datetime) -> bool:
    return len(seen) >= need.count and (need.since is None or reached < need.since)


def _window(rule: AlertRule, seen: list[Seen], now: datetime, previous: bool = False) -> list[Seen]:
    """The rule's window of ``seen`` (newest first), or the one before it."""
    if rule.window_results is not None:
        n = rule.window_results
        return seen[n : 2 * n] if previous else seen[:n]
    span = timedelta(seconds=int(rule.window_seconds or 0))
    if previous:
        return [x for x in seen if now - 2 * span <= x.at < now - span]
    return [x for x in seen if x.at >= now - span]


def _over(rule: AlertRule) -> str:
    w = window_text(rule.window_results, rule.window_seconds)
    return f"over the last {w} results" if rule.window_results is not None else f"over the last {w}"


def _full(rule: AlertRule, window: list[Seen]) -> bool:
    if rule.window_results is not None:
        return len(window) >= rule.window_results
    return len(window) >= 1


def decide(
    rule: AlertRule,
    eval_name: str,
    seen: list[Seen],
    now: datetime,
    open_detail: dict[str, Any] | None,
) -> Decision:
    """Judge ``rule`` on one eval's results (``open_detail``: the open alert's detail)."""
    d = Decision(rule.id, eval_name, None)
    if rule.condition == "silence":
        return _silence(rule, d, seen, now)
    current = _window(rule, seen, now)
    if rule.condition == "drop":
        return _drop(rule, d, current, _window(rule, seen, now, previous=True), open_detail)
    if not _full(rule, current):
        return d
    n = len(current)
    if rule.condition == "pass_rate":
        d.value = sum(x.passed for x in current) / n
        what = f"pass rate {d.value:.0%}"
    else:
        d.value = sum(x.score for x in current) / n
        what = f"mean score {d.value:.3f}"
    assert rule.threshold is not None
    d.firing = d.value < rule.threshold
    counted = "" if rule.window_results is not None else f" ({n} results)"
    d.message = f"{eval_name}: {what} < {rule.threshold:g} {_over(rule)}{counted}"
    d.detail = {"n": n}
    return d


def _silence(rule: AlertRule, d: Decision, seen: list[Seen], now: datetime) -> Decision:
    span = int(rule.window_seconds or 0)
    recent = [x for x in seen if x.at >= now - timedelta(seconds=span)]
    if recent:
        d.firing, d.value = False, (now - recent[0].at).total_seconds()
        return d
    since = rule.created_at if not seen else max(seen[0].at, rule.created_at)
    d.value = (now - since).total_seconds()
    d.firing = d.value >= span
    d.message = f"{d.eval_name}: no results for {window_text(None, span)}"
    d.detail = {"last_result_at": seen[0].at.isoformat() if seen else None}
    return d


def _cases(window: list[Seen]) -> list[Case]:
    return [Case(None, "", x.score, x.passed) for x in window]


def _baseline_cases(base: dict[str, Any]) -> list[Case]:
    # the window an open drop fell from, kept as counts: the pass-rate test reads only the
    # verdicts, so ``passes`` passing cases and the rest failing are the same sample
    n, passes, mean = int(base["n"]), int(base["passes"]), float(base["mean"])
    return [Case(None, "", mean, i < passes) for i in range(n)]


def _drop(
    rule: AlertRule,
    d: Decision,
    current: list[Seen],
    previous: list[Seen],
    open_detail: dict[str, Any] | None,
) -> Decision:
    base = (open_detail or {}).get("baseline")
    if base is not None:
        before = _baseline_cases(base)
    else:
        if not (_full(rule, previous) and len(previous) >= 2):
            return d
        before = _cases(previous)
        base = {
            "n": len(before),
            "passes": sum(c.passed for c in before),
            "mean": sum(c.score for c in before) / len(before),
        }
    if not (_full(rule, current) and len(current) >= 2):
        return d
    report = compare_eval(before, _cases(current), resamples=RESAMPLES, keep=0)
    ci = report["pass_rate_ci"]
    if ci is None:
        return d
    d.value = float(report["pass_rate_diff"])
    d.firing = ci[1] < 0
    was, now_rate = report["a"]["pass_rate"], report["b"]["pass_rate"]
    d.message = (
        f"{d.eval_name}: pass rate dropped from {was:.0%} to {now_rate:.0%} {_over(rule)} "
        f"(change {d.value:+.2f}, 95% interval [{ci[0]:+.2f}, {ci[1]:+.2f}])"
    )
    d.detail = {"baseline": base, "n": len(current), "pass_rate_ci": list(ci)}
    return d
