"""What the CLI's batch commands do, as library calls the API and the studio can make too:
batch capture and eval calibration."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from simeval import InvalidInput, InvalidType
from simeval.service import Service, read_capture_lines

REFERENCE = "The capital of France is Paris, which stands on the Seine."
QUESTION = "What is the capital of France?"
GOOD = "Paris, on the Seine, is the capital of France."
POOR = "France is a large country in western Europe."


@pytest.fixture
def svc(db: str) -> Iterator[Service]:
    with Service(db) as svc:
        svc.create_eval("capital", REFERENCE)
        svc.test_eval("capital", QUESTION, GOOD)
        svc.activate_eval("capital")
        yield svc


def test_capture_many_scores_every_row_and_reports(svc: Service) -> None:
    seen: list[tuple[int, int]] = []
    report = svc.capture_many(
        [
            {"input": QUESTION, "output": GOOD, "conversation_id": 7},
            {"output": POOR, "at": "2024-05-01T12:00:00Z", "metadata": {"user": "a"}},
        ],
        progress=lambda done, total: seen.append((done, total)),
    )
    assert report.model_dump() == {
        "captures": 2,
        "results": 2,
        "passed": 1,
        "failed": 1,
        "replayed": 0,
    }
    assert seen == [(2, 2)]  # after each transaction
    old, new = sorted(svc.list_captures(), key=lambda c: c.captured_at)
    assert (old.output, old.captured_at.year, old.metadata) == (POOR, 2024, {"user": "a"})
    assert new.conversation_id == "7"


@pytest.mark.parametrize(
    ("row", "error", "message"),
    [
        ({"input": QUESTION}, InvalidInput, "row 2: no 'output'"),
        ({"output": "x", "extra": 1}, InvalidInput, "row 2: unknown key 'extra'"),
        ({"output": 42}, InvalidType, "row 2: output must be a string"),
        ({"output": "x", "at": "someday"}, InvalidInput, "row 2: captured_at 'someday'"),
        ("just text", InvalidInput, "row 2: expected a JSON object"),
    ],
)
def test_capture_many_checks_every_row_before_storing_any(
    svc: Service, row: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        svc.capture_many([{"output": GOOD}, row])  # type: ignore[list-item]
    assert svc.list_captures() == []


def test_capture_many_stores_bounded_transactions_and_skips_stored_keys(svc: Service) -> None:
    rows = [{"output": GOOD if i % 2 else POOR, "capture_key": f"k{i}"} for i in range(450)]
    first = svc.capture_many(rows[:250])
    assert (first.captures, first.replayed, first.passed, first.failed) == (250, 0, 125, 125)
    seen: list[tuple[int, int]] = []
    report = svc.capture_many(rows, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(200, 450), (400, 450), (450, 450)]
    assert (report.captures, report.replayed, report.results) == (200, 250, 200)
    assert svc.count_captures() == 450
    with pytest.raises(ValueError, match="chunk"):
        svc.capture_many(rows, chunk=0)


def test_read_capture_lines_names_the_line() -> None:
    rows = read_capture_lines('{"output": "a", "at": "2024-05-01"}\n\n{"output": "b"}\n', "c.jsonl")
    assert [r["output"] for r in rows] == ["a", "b"]
    assert rows[0]["captured_at"].year == 2024 and rows[1]["input"] == ""
    with pytest.raises(InvalidInput, match=r"c.jsonl line 3: not JSON"):
        read_capture_lines('{"output": "a"}\n\n{oops\n', "c.jsonl")


def test_calibrate_eval_from_reviews_and_apply(svc: Service) -> None:
    with pytest.raises(InvalidInput, match="has no reviewed results yet"):
        svc.calibrate_eval("capital")
    outputs = {
        GOOD: 1.0,
        "Paris is the capital of France.": 1.0,
        POOR: 0.0,
        "The Seine flows through northern France.": 0.0,
    }
    for output, verdict in outputs.items():
        (result,) = svc.capture(QUESTION, output).results
        svc.review_result(result.id, verdict, "by hand")
    report = svc.calibrate_eval("capital")
    assert (report["examples"], report["reviews"], report["positives"]) == (4, 4, 2)
    assert report["eval"]["name"] == "capital" and "applied" not in report
    assert svc.get_eval("capital").threshold == 0.8  # nothing written without apply
    more = svc.calibrate_eval("capital", [(0.95, True), (0.1, False)], by="accuracy")
    assert (more["examples"], more["reviews"], more["by"]) == (6, 4, "accuracy")
    applied = svc.calibrate_eval("capital", apply=True)["applied"]
    t = applied["threshold"]
    assert t == report["suggested"]["threshold"] and applied["changed"] is (t != 0.8)
    ev = svc.get_eval("capital")
    assert ev.threshold == t
    if applied["changed"]:
        assert (ev.version, ev.status, applied["status_before"]) == (2, "active", "active")
        assert (applied["active_version"], applied["pending_version"]) == (1, 2)


def test_capture_many_counts_equal_the_stored_results(svc: Service) -> None:
    # a second eval whose required term fails an output whatever its score: the counts come
    # from the packed verdicts, and must be the verdicts read back
    svc.create_eval("seine", REFERENCE, threshold=0.3, options={"required": ["Seine"]})
    svc.test_eval("seine", QUESTION, GOOD)
    svc.activate_eval("seine")
    rows = [{"output": out} for out in (GOOD, POOR, "The capital of France is Paris.") * 5]
    report = svc.capture_many(rows)
    stored = [r for c in svc.list_captures(limit=100) for r in c.results]
    assert report.results == len(stored) == 30
    assert report.passed == sum(r.passed for r in stored)
    assert report.failed == sum(not r.passed for r in stored)
    # the required term decided at least one verdict the score alone would not have
    assert any(not r.passed and r.score >= r.threshold for r in stored)
