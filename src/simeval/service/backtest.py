"""Past captures and an eval: backtest (score without storing) and rescore (store results).

- ``backtest_eval`` scores an eval's *current* version (a draft, or the pending version of an
  active eval) against the most recent captures in its scope (default 500, at most 30 days
  back) with the eval-set scorer the capture path uses, and stores nothing: the pass rate, the
  distribution, the worst and the borderline cases with their missing terms.
- ``rescore`` stores results for past captures an eval has not scored, once per capture and
  eval, with the version in force (``active_version`` of an active eval, else the current
  one). A capture's results are packed on the capture, so its blob is rewritten with the new
  entries appended, in a write transaction; captures the trend rollup already counted (ids at
  or below its watermark) have the new entries added to their hour's rollup rows in the same
  transaction, so counts and trends stay exact. A second rescore finds nothing to add.
  The scores are computed from a snapshot first; the write transaction then re-reads the
  blobs and, on PostgreSQL, holds the capture lock exclusively as the rollup does
  (``roll_up``): no rollup moves the watermark while a rescore writes under it, and two
  rescores of one eval do not both add an entry to the same capture.
  With ``refresh`` it also replaces the eval's stored results whose scorer fingerprint is not
  the one of the version in force (e.g. scored before the ``bands`` scale existed), when the
  user asks: the entry is rewritten in place and the rollup moves it from its old key to the
  new one (a review of the result stays and still wins). Without it, stored results keep the
  score and fingerprint they were stored with, and trends mark the switch.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import cast

from simeval.checks import parse_time, utc_now
from simeval.errors import Conflict, InvalidInput
from simeval.scoring.analyzer import scope_key
from simeval.scoring.compare import Case, histogram
from simeval.scoring.evalset import EvalSet, Scored
from simeval.scoring.scorer import get_scorer
from simeval.service.base import Part
from simeval.service.capture import in_force
from simeval.service.capture_score import eval_spec
from simeval.service.models import BacktestCase, BacktestReport, RescoreReport, Status
from simeval.store import PackedResults, Tx, pack_results, unpack_results
from simeval.store.backtest_sql import (
    CaptureChanges,
    capture_blobs,
    captures_to_rescore,
    inputs_and_scores,
    lock_captures,
    recent_captures,
    write_rescored,
)
from simeval.store.meta_rollup import hour_start, watermark
from simeval.store.rollups import Key, Sums

BACKTEST_DEFAULT = 500
BACKTEST_MAX = 10_000
BACKTEST_DAYS = 30
_RESCORE_CHUNK = 500
UNSCORED_MAX = 100_000  # captures counted for the Rescore button at most

# a packed entry: (eval id, version, score, passed, threshold, matched, fingerprint)
_Entry = tuple[int, int, float, bool, float, int, str]
# a backtest's scored capture: (score, passed, capture id, input, output, captured at)
_Scored = tuple[float, bool, int, str, str, datetime]


def _count(
    sums: dict[Key, Sums],
    by_capture: CaptureChanges,
    cid: int,
    when: datetime,
    entry: _Entry,
    sign: int,
) -> None:
    """A counted capture's packed ``entry`` (eval id, version, score, passed, threshold,
    matched, fingerprint) added to (``sign`` 1) or taken from (-1) the rollups' changes:
    ``trend_rollup``'s by key, ``meta_rollup``'s by capture (its pairs read later)."""
    acc = sums.setdefault((hour_start(when), entry[0], entry[1], entry[6]), Sums())
    acc.count += sign
    acc.total += sign * entry[2]
    acc.passes += sign * int(entry[3])
    by_capture.setdefault(cid, (when, []))[1].append((entry[0], sign, sign * int(entry[3])))


def _cut(text: str, n: int = 300) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _borderline(scored: list[_Scored], threshold: float, n: int) -> list[_Scored]:
    """The ``n`` distinct cases (input and output) closest to the threshold, taken from both
    sides in turn (failing and passing) while both have some, closest first: the same text
    captured many times is one case, and a side of only 1.000 scores cannot fill the list."""
    seen: set[tuple[str, str]] = set()
    sides: dict[bool, list[_Scored]] = {True: [], False: []}
    for x in sorted(scored, key=lambda x: (abs(x[0] - threshold), x[2])):
        if (x[3], x[4]) not in seen:
            seen.add((x[3], x[4]))
            sides[bool(x[1])].append(x)
    picked: list[_Scored] = []
    below, above = iter(sides[False]), iter(sides[True])
    while len(picked) < n:
        got = [x for x in (next(below, None), next(above, None)) if x is not None]
        if not got:
            break
        picked.extend(got)
    return sorted(picked[:n], key=lambda x: (abs(x[0] - threshold), x[2]))


class BacktestService(Part):
    """Backtest and rescore an eval on stored captures."""

    def backtest_eval(
        self, name: str | int, limit: int = BACKTEST_DEFAULT, days: int = BACKTEST_DAYS
    ) -> BacktestReport:
        """Score the eval's current version on the last ``limit`` captures in its scope from
        the last ``days`` days, storing nothing. Returns ``n``, ``passed``, ``pass_rate``,
        ``mean_score``, ``histogram`` (20 bins over [0, 1]), ``threshold``, ``worst`` and
        ``borderline`` (5 each, with missing terms), ``scanned`` and ``seconds``."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= BACKTEST_MAX:
            raise InvalidInput(f"backtest limit must be between 1 and {BACKTEST_MAX}")
        if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= 365:
            raise InvalidInput("backtest days must be between 1 and 365")
        started = time.perf_counter()
        with self.store.read() as s:
            ev = self._find_eval(s, name)
            spec = eval_spec(ev)
            scorer_options = dict(ev.options)
            version, status = ev.version, ev.status
            since = utc_now() - timedelta(days=days)
            key = scope_key(ev.input_scope) if ev.input_scope is not None else None
            picked: list[tuple[int, str, str, datetime]] = []
            scanned = 0
            for row in recent_captures(s, since):
                scanned += 1
                if key is not None and scope_key(row[1]) != key:
                    continue
                picked.append(tuple(row))
                if len(picked) >= limit:
                    break
        es = EvalSet([spec])
        scored: list[_Scored] = []
        for cid, text_in, output, at in picked:
            for r in es.iter_score(output, input=text_in):
                scored.append((r.score, r.passed, cid, text_in, output, at))
        n = len(scored)
        passed = sum(1 for x in scored if x[1])
        scorer = get_scorer(**scorer_options)

        def case(x: _Scored) -> BacktestCase:
            exp = scorer.explain(x[4], list(spec.references), top=8, input=x[3])
            return BacktestCase(
                capture_id=x[2],
                input=_cut(x[3]),
                output=_cut(x[4]),
                score=x[0],
                passed=x[1],
                captured_at=x[5].isoformat(),
                missing_terms=[t.term for t in exp.missing],
                missing_required=exp.missing_required,
            )

        worst = sorted(scored, key=lambda x: (x[0], x[2]))[:5]
        border = _borderline(scored, spec.threshold, 5)
        cases = [Case(None, "", x[0], x[1]) for x in scored]
        return BacktestReport(
            eval=spec.name,
            version=version,
            status=cast(Status, status),
            threshold=spec.threshold,
            limit=limit,
            days=days,
            scanned=scanned,
            n=n,
            passed=passed,
            pass_rate=passed / n if n else None,
            mean_score=sum(x[0] for x in scored) / n if n else None,
            histogram=histogram(cases, 20),
            worst=[case(x) for x in worst],
            borderline=[case(x) for x in border],
            seconds=time.perf_counter() - started,
        )

    def count_unscored(
        self, name: str | int, since: object = "7d", limit: int = UNSCORED_MAX
    ) -> int:
        """How many captures since ``since`` ``rescore`` would store a result of this eval
        for: in the scope of its version in force, with no entry of it yet (at most
        ``limit``: the count stops there). A page shows it on the Rescore button."""
        start = parse_time(since, "since")
        if start is None:
            raise InvalidInput("count_unscored needs since (an ISO time or an age like 7d)")
        with self.store.read() as s:
            ev = self._find_eval(s, name)
            (used,) = in_force(s, [ev])
            eval_id, scope = ev.id, used.input_scope
            key = scope_key(scope) if scope is not None else None
            count = 0
            for text_in, blob in inputs_and_scores(s, start):
                if key is not None and scope_key(text_in) != key:
                    continue  # outside the scope: rescore would store nothing for it
                if unpack_results(blob).position(eval_id) < 0:
                    count += 1
                    if count >= limit:
                        break
            return count

    def rescore(
        self, name: str | int, since: object = "7d", until: object = None, refresh: bool = False
    ) -> RescoreReport:
        """Store the eval's results for the captures in [since, until) it has not scored yet
        (those in its scope), with the version in force. ``refresh``: also replace its stored
        results of another scorer fingerprint (see the module doc). Returns ``eval``,
        ``version``, ``scanned`` (captures in the window), ``added`` (new and replaced),
        ``replaced`` and ``passed`` (of those stored)."""
        start = parse_time(since, "since")
        end = parse_time(until, "until")
        if start is None:
            raise InvalidInput("rescore needs --since (an ISO time or an age like 7d)")
        with self.store.read() as s:
            ev = self._find_eval(s, name)
            if ev.status == "archived":
                # a state the eval is in, not a bad request: 409, as for an activation
                raise Conflict(f"eval {ev.name!r} is archived: restore it before rescoring")
            (used,) = in_force(s, [ev])
            spec = eval_spec(used)
            eval_id = ev.id
        es = EvalSet([spec])
        current = get_scorer(**dict(spec.options)).fingerprint
        report = RescoreReport(eval=spec.name, version=spec.version, scanned=0, added=0, passed=0)

        def stale(packed: PackedResults) -> bool:
            """Whether ``packed`` needs this eval's entry: none yet, or (``refresh``) one of
            another scorer."""
            at = packed.position(eval_id)
            if at < 0:
                return True
            return refresh and packed.fingerprints[packed.fp_index[at]] != current

        last = 0
        while True:
            # scored from a snapshot, outside the write transaction: the capture lock (below)
            # is held only while the new entries are written
            with self.store.read() as s:
                caps = captures_to_rescore(s, start, end, last, _RESCORE_CHUNK)
            if not caps:
                break
            last = caps[-1][0]
            report.scanned += len(caps)
            scored: dict[int, Scored] = {}
            for cid, text_in, output, blob in caps:
                if not stale(unpack_results(blob)):
                    continue  # scored already: once per capture and eval
                got = es.score(output, input=text_in)
                if got:  # else outside the eval's scope
                    scored[cid] = got[0]
            if not scored:
                continue

            def work(s: Tx, scored: dict[int, Scored] = scored) -> tuple[int, int, int]:
                # as the rollup does (``roll_up``): the capture lock held exclusively
                lock_captures(s)
                mark = watermark(s)
                sums: dict[Key, Sums] = {}
                by_capture: CaptureChanges = {}  # meta_rollup's changes: (hour, [entries])
                added = passed = replaced = 0  # counted here: a retried transaction starts again
                blobs = []
                for cid, when, blob in capture_blobs(s, scored):
                    packed = unpack_results(blob)
                    if not stale(packed):
                        continue  # another rescore stored it since the snapshot
                    r = scored[cid]
                    entries = list(packed.rows())
                    new = (eval_id, r.version, r.score, r.passed, r.threshold, r.matched_index,
                           r.fingerprint)  # fmt: skip
                    at = packed.position(eval_id)
                    if at >= 0:  # refresh: the old entry leaves its rollup key
                        old = entries[at]
                        entries[at] = new
                        replaced += 1
                        if cid <= mark:
                            _count(sums, by_capture, cid, when, old, -1)
                    else:
                        entries.append(new)
                    blobs.append({"b_id": cid, "scores": pack_results(entries)})
                    added += 1
                    passed += r.passed
                    if cid <= mark:  # the rollup counted this capture: add the new entry
                        _count(sums, by_capture, cid, when, new, 1)
                write_rescored(s, blobs, sums, by_capture)
                return added, passed, replaced

            added, passed, replaced = self._write(work)
            report.added += added
            report.passed += passed
            report.replaced += replaced
        return report
