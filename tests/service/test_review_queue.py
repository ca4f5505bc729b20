"""The review queue (``Service.review_queue_next``): borderline results first, closest to the
threshold they were scored with, then failing ones newest first; clearly passing ones left
out; the position a keyset cursor; reviews given as a verdict keep the reviewer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from simeval.errors import InvalidInput, NotFound
from simeval.service import Service

PARIS = "Paris is the capital of France."
# (score, threshold): the run rows of the ordering test
ROWS = [
    (0.95, 0.5),  # clearly passing: not queued
    (0.55, 0.5),  # borderline +0.05
    (0.48, 0.5),  # borderline -0.02
    (0.62, 0.5),  # passing by 0.12: not queued
    (0.10, 0.5),  # failing (older)
    (0.43, 0.5),  # borderline -0.07
    (0.30, 0.5),  # failing (newer)
    (0.58, 0.5),  # borderline +0.08
]
EXPECTED = [0.48, 0.55, 0.43, 0.58, 0.30, 0.10]


def _row(score: float, threshold: float, eval_name: str | None = "capital") -> dict[str, Any]:
    return {
        "eval_name": eval_name,
        "input": f"question scored {score}",
        "output": f"answer scored {score}",
        "reference": PARIS,
        "score": score,
        "passed": score >= threshold,
        "threshold": threshold,
        "fingerprint": "f" * 16,
        "matched_reference": PARIS,
        "explanation": None,
    }


def _svc(db: str) -> Service:
    svc = Service(db)
    svc.create_eval("capital", PARIS, threshold=0.5)
    run = svc.create_run("cases", "cases.jsonl")
    for score, threshold in ROWS:  # one call each: each row its own time, oldest first
        svc.add_run_results(run, [_row(score, threshold)])
    return svc


def _walk(svc: Service, **filters: Any) -> list[float]:
    scores, after = [], None
    for _ in range(50):  # bounded: the queue holds at most the rows stored
        step = svc.review_queue_next(after=after, **filters)
        if step.item is None:
            return scores
        scores.append(step.item.score)
        after = step.cursor
    raise AssertionError("the queue never ended")


def test_borderline_first_closest_to_the_threshold_then_failing_newest_first(db: str) -> None:
    svc = _svc(db)
    assert _walk(svc) == EXPECTED
    assert _walk(svc, eval_name="capital") == EXPECTED
    first = svc.review_queue_next()
    assert (first.reason, first.remaining, first.skipped, first.reviewed) == (
        "borderline",
        6,
        0,
        0,
    )
    assert first.distance == pytest.approx(-0.02)
    assert first.item is not None and first.item.explanation is not None  # shown explained
    last = svc.review_queue_next(after=svc.review_queue_next(after=first.cursor).cursor)
    assert (last.remaining, last.skipped) == (4, 2)


def test_reviewing_takes_a_result_out_and_skipping_keeps_the_place(db: str) -> None:
    svc = _svc(db)
    first = svc.review_queue_next()
    assert first.item is not None
    skipped_to = svc.review_queue_next(after=first.cursor)
    assert skipped_to.item is not None and skipped_to.item.score == 0.55
    # reviewed at the skipped-to place: the same position then gives the next one
    svc.review_verdict(skipped_to.item.id, "pass", reviewer="Ada")
    after = svc.review_queue_next(after=first.cursor)
    assert after.item is not None and after.item.score == 0.43
    assert (after.reviewed, after.remaining, after.skipped) == (1, 4, 1)
    # from the start again: the skipped one is back, the reviewed one is not
    assert _walk(svc) == [0.48, 0.43, 0.58, 0.30, 0.10]


def test_the_candidate_set_is_bounded_by_the_window(db: str) -> None:
    svc = _svc(db)
    # the 3 most recent unreviewed rows are 0.58, 0.30 and 0.43: only they are queued
    step = svc.review_queue_next(window=3)
    assert step.window_full and step.remaining == 3
    assert _walk(svc, window=3) == [0.43, 0.58, 0.30]
    assert not svc.review_queue_next().window_full
    with pytest.raises(InvalidInput, match="window"):
        svc.review_queue_next(window=0)


def test_filters_by_eval_and_metadata(db: str) -> None:
    svc = _svc(db)
    svc.create_eval("other", PARIS, threshold=0.5)
    run = svc.create_run("more", "more.jsonl")
    svc.add_run_results(run, [_row(0.5, 0.5, "other")])
    assert 0.5 not in _walk(svc, eval_name="capital")
    assert _walk(svc, eval_name="other") == [0.5]
    # metadata: captured results only (run rows have none)
    svc.test_eval("capital", "q", PARIS)
    svc.activate_eval("capital")
    at = datetime.now(UTC) - timedelta(minutes=5)
    svc.capture("q", "I like trains.", metadata={"engine": "v2"}, captured_at=at)
    svc.capture("q", "Bananas.", metadata={"engine": "v1"}, captured_at=at)
    step = svc.review_queue_next(meta=["engine=v2"])
    assert step.item is not None and step.item.output == "I like trains."
    assert (step.reason, step.remaining) == ("failing", 1)
    with pytest.raises(NotFound):
        svc.review_queue_next(eval_name="nope")


def test_a_position_the_queue_did_not_give_is_refused(db: str) -> None:
    svc = _svc(db)
    for bad in ("x", "2:0.1:0:r1", "0:nan:0:r1", "0:0.1"):
        with pytest.raises(InvalidInput, match="position"):
            svc.review_queue_next(after=bad)


def test_verdicts_set_a_score_that_says_so_and_keep_the_reviewer(db: str) -> None:
    svc = _svc(db)
    by_score = {r.score: r.id for r in svc.list_results(explain=False)}
    passed = svc.review_verdict(by_score[0.48], "pass", reviewer="  Ada  ", note="fine")
    assert passed.review is not None and passed.passed
    assert (passed.review.score, passed.review.reviewer, passed.review.note) == (0.5, "Ada", "fine")
    failed = svc.review_verdict(by_score[0.55], "fail", reviewer="Grace")
    assert failed.review is not None and not failed.passed
    assert (failed.review.score, failed.review.reviewer) == (0.49, "Grace")
    kept = svc.review_verdict(by_score[0.10], "fail")
    assert kept.review is not None and (kept.review.score, kept.review.reviewer) == (0.1, None)
    chosen = svc.review_verdict(by_score[0.30], "pass", score="0.9", reviewer="Ada")
    assert chosen.review is not None and chosen.review.score == 0.9
    with pytest.raises(InvalidInput, match="at or above the threshold"):
        svc.review_verdict(by_score[0.43], "pass", score=0.2)
    with pytest.raises(InvalidInput, match="below the threshold"):
        svc.review_verdict(by_score[0.43], "fail", score=0.7)
    with pytest.raises(InvalidInput, match="pass or fail"):
        svc.review_verdict(by_score[0.43], "maybe")
    with pytest.raises(InvalidInput, match="longer than 200"):
        svc.review_verdict(by_score[0.43], "pass", reviewer="x" * 201)
    # a second review replaces the first, reviewer included
    again = svc.review_result(by_score[0.48], 0.2, reviewer="Grace")
    assert again.review is not None and again.review.reviewer == "Grace"
    assert svc.count_results(reviewed=True) == 4
