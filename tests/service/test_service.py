"""The eval lifecycle, captures, results, reviews, trends, settings, export and import through
the library (``simeval.Service``) on a real SQLite file and a real PostgreSQL database
(``conftest.db``)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import simeval
from dbhelp import table_counts
from simeval import Conflict, InvalidInput, NotFound
from simeval.service import MAX_TEXT_CHARS, Service, scope_key

REFERENCE = "The capital of France is Paris, which stands on the Seine."
QUESTION = "What is the capital of France?"
POOR = "France is a large country in western Europe."
GOOD = "Paris, on the Seine, is the capital of France."
REQUIRED = (
    "conversation_id",
    "captured_at",
    "eval_name",
    "eval_type",
    "input",
    "output",
    "score",
    "pass",
    "human_override_score",
    "human_override_note",
    "eval_version",
    "threshold",
    "fingerprint",
    "matched_reference",
)


@pytest.fixture
def svc(db: str) -> Iterator[Service]:
    with Service(db) as s:
        yield s


def counts(db: str) -> dict[str, int]:
    """Rows per table, read with a plain connection (not through the code under test)."""
    return table_counts(
        db, ("evals", "eval_versions", "eval_tests", "captures", "results", "reviews")
    )


def activated(svc: Service, name: str, reference: str | list[str] = REFERENCE, **kw: Any) -> None:
    svc.create_eval(name, reference, **kw)
    sample = reference if isinstance(reference, str) else reference[0]
    assert svc.test_eval(name, QUESTION, sample).passed
    svc.activate_eval(name)


def test_seed_flow_through_the_library(svc: Service, db: str) -> None:
    ev = svc.create_eval("capital", REFERENCE, threshold=0.8)
    assert (ev.status, ev.version, ev.threshold, ev.strictness) == ("draft", 1, 0.8, "strict")

    poor = svc.test_eval("capital", QUESTION, POOR)
    assert not poor.passed and poor.score < 0.8
    missing = [t["term"] for t in poor.explanation["missing"]]
    assert "paris" in missing and "capit" not in missing  # stemmed terms keep their word

    with pytest.raises(Conflict) as refused:
        svc.activate_eval("capital")
    assert "latest test" in str(refused.value) and "failed" in str(refused.value)
    assert svc.get_eval("capital").status == "draft"

    good = svc.test_eval("capital", QUESTION, GOOD)
    assert good.passed and good.score >= 0.8
    assert svc.activate_eval("capital").status == "active"

    outputs = [GOOD, "Paris is the French capital.", "I do not know."]
    caps = [svc.capture(QUESTION, o, conversation_id=f"conv-{i}") for i, o in enumerate(outputs)]
    assert all(len(c.results) == 1 for c in caps)
    assert [c.results[0].passed for c in caps] == [True, False, False]

    listed = svc.list_results(eval_name="capital")
    assert len(listed) == 3 and {r.output for r in listed} == set(outputs)
    assert all(r.fingerprint == ev.fingerprint and r.eval_version == 1 for r in listed)
    failing = next(r for r in listed if r.output == "Paris is the French capital.")
    assert failing.explanation and failing.explanation["missing"]  # why it failed, on display

    reviewed = svc.review_result(failing.id, 0.9, "right answer, fewer words")
    assert reviewed.passed and not reviewed.automated_passed
    assert reviewed.score == failing.score  # the automated score stays
    assert reviewed.review is not None and reviewed.review.note == "right answer, fewer words"
    assert svc.count_results(eval_name="capital", passed=True) == 2  # the review counts
    assert svc.count_results(eval_name="capital", reviewed=True) == 1

    tr = svc.trend("capital", bucket="day")
    assert len(tr.buckets) == 1
    b = tr.buckets[0]
    assert (b.count, b.reviewed, b.versions) == (3, 1, [1])
    assert b.pass_rate == pytest.approx(2 / 3)
    expected_mean = (caps[0].results[0].score + 0.9 + caps[2].results[0].score) / 3
    assert b.mean_score == pytest.approx(expected_mean)

    rows = list(csv.DictReader(io.StringIO(svc.export_results("csv"))))
    assert len(rows) == 3 and set(REQUIRED) <= set(rows[0])
    by_output = {r["output"]: r for r in rows}
    over = by_output["Paris is the French capital."]
    assert over["pass"] == "true" and over["automated_pass"] == "false"
    assert float(over["human_override_score"]) == 0.9
    assert over["human_override_note"] == "right answer, fewer words"
    assert float(over["score"]) == pytest.approx(failing.score)
    assert {r["conversation_id"] for r in rows} == {"conv-0", "conv-1", "conv-2"}
    assert all(r["matched_reference"] == REFERENCE and r["eval_type"] == "similarity" for r in rows)
    data = json.loads(svc.export_results("json"))
    assert len(data) == 3 and set(REQUIRED) <= set(data[0])
    assert sum(r["pass"] for r in data) == 2
    assert next(r for r in data if r["human_override_score"] == 0.9)["pass"] is True

    # retention: a capture from 40 days ago goes, today's stay
    old = svc.capture(QUESTION, GOOD, captured_at=datetime.now(UTC) - timedelta(days=40))
    assert len(old.results) == 1
    assert svc.cleanup().captures == 0  # retention is "forever" by default
    assert svc.update_settings(retention_days=30).retention_days == 30
    done = svc.cleanup()
    assert (done.captures, done.results) == (1, 1)
    assert {r.id for r in svc.list_results()} == {r.id for r in listed}
    assert counts(db)["reviews"] == 1


def test_capture_result_fields(svc: Service) -> None:
    activated(svc, "capital", [REFERENCE, "Paris."])
    cap = svc.capture(QUESTION, "Paris", metadata={"model": "m1"})
    (r,) = cap.results
    assert r.matched_index == 1 and r.matched_reference == "Paris."
    assert r.score == simeval.score("Paris", [REFERENCE, "Paris."])
    assert r.threshold == 0.8 and r.eval_version == 1 and len(r.fingerprint) == 12
    stored = svc.get_capture(cap.id)
    assert stored.metadata == {"model": "m1"} and stored.results[0].id == r.id


def test_edits_create_versions(svc: Service) -> None:
    activated(svc, "capital")
    svc.capture(QUESTION, GOOD)
    ev = svc.edit_eval("capital", threshold=0.6)
    # a live edit: version 1 keeps scoring, version 2 waits for a test and an activation
    assert ev.version == 2 and ev.status == "active"
    assert (ev.active_version, ev.pending_version) == (1, 2)
    assert "no test of its current version 2" in (ev.activation_blocker or "")
    ev = svc.edit_eval("capital", new_name="capital-fr")
    assert ev.version == 3 and ev.name == "capital-fr"
    assert svc.edit_eval("capital-fr", threshold=0.6).version == 3  # no change, no version
    versions = svc.eval_versions("capital-fr")
    assert [v.version for v in versions] == [1, 2, 3]
    assert versions[1].changes["threshold"] == {"from": 0.8, "to": 0.6}
    assert versions[1].changes["pending"] == {"active_version": 1}
    assert versions[2].changes == {"name": {"from": "capital", "to": "capital-fr"}}
    assert [v.threshold for v in versions] == [0.8, 0.6, 0.6]
    # the old result keeps the version and threshold it was scored with
    (old,) = svc.list_results()
    assert (old.eval_version, old.threshold, old.eval_name) == (1, 0.8, "capital-fr")
    with pytest.raises(NotFound, match="did you mean 'capital-fr'"):
        svc.get_eval("capital")


def test_live_edit_keeps_the_active_version_scoring(svc: Service) -> None:
    activated(svc, "capital")
    before = svc.capture(QUESTION, GOOD).results[0]
    assert (before.eval_version, before.threshold) == (1, 0.8)
    # a stricter pending version, then a scope change of it: version 1 still scores
    svc.edit_eval("capital", threshold=0.99)
    ev = svc.edit_eval("capital", input_scope="something else entirely")
    assert (ev.status, ev.active_version, ev.pending_version) == ("active", 1, 3)
    with pytest.raises(Conflict, match="no test of its current version 3"):
        svc.activate_eval("capital")
    (r,) = svc.capture(QUESTION, GOOD).results
    assert (r.eval_version, r.threshold, r.passed) == (1, 0.8, True)
    # the pending version tested (it fails its 0.99 bar) and cannot switch over
    svc.test_eval("capital", QUESTION, GOOD)
    with pytest.raises(Conflict, match="failed"):
        svc.activate_eval("capital")
    svc.edit_eval("capital", threshold=0.5, input_scope=None)
    svc.test_eval("capital", QUESTION, GOOD)
    ev = svc.activate_eval("capital")
    assert (ev.active_version, ev.pending_version, ev.version) == (4, None, 4)
    (r,) = svc.capture(QUESTION, GOOD).results
    assert (r.eval_version, r.threshold) == (4, 0.5)
    # deactivating drops the pin: a later activation scores with the current version
    assert svc.deactivate_eval("capital").active_version is None


def test_validation(svc: Service, db: str) -> None:
    svc.create_eval("capital", REFERENCE)
    before = counts(db)
    with pytest.raises(Conflict, match="already exists"):
        svc.create_eval("capital", REFERENCE)
    with pytest.raises(Conflict, match="already exists"):
        svc.create_eval(" capital ", REFERENCE)
    for bad in ("", "   "):
        with pytest.raises(InvalidInput, match="name is empty"):
            svc.create_eval(bad, REFERENCE)
    for refs in ("", "  ", [], ["ok", " "]):
        with pytest.raises(InvalidInput):
            svc.create_eval("x", refs)
    for threshold in (1.5, -0.1, float("nan"), float("inf"), "nan", "high"):
        with pytest.raises(InvalidInput, match="threshold must be a number in"):
            svc.create_eval("x", REFERENCE, threshold=threshold)  # type: ignore[arg-type]
    with pytest.raises(simeval.InvalidOption):
        svc.create_eval("x", REFERENCE, options={"ngram": 9})
    with pytest.raises(NotFound):
        svc.test_eval("nope", "", "x")
    big = "word " * (MAX_TEXT_CHARS // 5 + 1)
    with pytest.raises(InvalidInput, match="at most 1,000,000"):
        svc.capture(QUESTION, big)
    assert counts(db) == before


def test_ten_megabyte_output_is_refused_and_nothing_is_stored(svc: Service, db: str) -> None:
    activated(svc, "capital")
    before = counts(db)
    ten_mb = "The capital of France is Paris. " * 330_000
    assert len(ten_mb.encode()) > 10_000_000
    with pytest.raises(InvalidInput, match=r"output has 10,560,000 characters.*nothing was stored"):
        svc.capture(QUESTION, ten_mb)
    with pytest.raises(InvalidInput, match="at most"):
        svc.test_eval("capital", QUESTION, ten_mb)
    assert counts(db) == before
    # at the limit it is stored and scored
    at_limit = ("Paris is the capital of France. " * 40_000)[:MAX_TEXT_CHARS]
    assert svc.capture(QUESTION, at_limit).results[0].score > 0.5


def test_scope_matching(svc: Service) -> None:
    activated(svc, "scoped", input_scope="What is the capital of France?")
    activated(svc, "everything")
    assert scope_key("  what is\tthe CAPITAL of\nfrance? ") == scope_key(QUESTION)
    hit = svc.capture("  what is\tthe CAPITAL of\nfrance? ", GOOD)
    assert sorted(r.eval_name for r in hit.results) == ["everything", "scoped"]
    miss = svc.capture("What is the capital of Spain?", GOOD)
    assert [r.eval_name for r in miss.results] == ["everything"]
    # full-width characters fold too (NFKC)
    wide = svc.capture("Ｗhat is the capital of France?", GOOD)
    assert len(wide.results) == 2
    # a scope edit changes where it fires (after a new test and activation)
    svc.edit_eval("scoped", input_scope=None)
    svc.test_eval("scoped", "", REFERENCE)
    svc.activate_eval("scoped")
    assert len(svc.capture("anything", GOOD).results) == 2


def test_auto_evaluation_off(svc: Service) -> None:
    activated(svc, "capital")
    assert svc.get_settings().auto_evaluate is True
    svc.update_settings(auto_evaluate=False)
    cap = svc.capture(QUESTION, GOOD)
    assert cap.evaluated is False and cap.results == []
    assert svc.get_capture(cap.id).evaluated is False
    assert svc.count_results() == 0
    svc.update_settings(auto_evaluate=True)
    assert len(svc.capture(QUESTION, GOOD).results) == 1


def test_retention_values(svc: Service) -> None:
    for days in (7, 30, 90, 180, None):
        assert svc.update_settings(retention_days=days).retention_days == days
    for bad in (0, 1, 60, 365, -7, "30", True):
        with pytest.raises(InvalidInput, match="retention must be 7, 30, 90, 180"):
            svc.update_settings(retention_days=bad)
    assert svc.get_settings().retention_days is None


def test_cleanup_keeps_recent_and_reports_counts(svc: Service, db: str) -> None:
    activated(svc, "a")
    activated(svc, "b", "Paris is the capital.")
    now = datetime(2026, 6, 1, 12, 0)
    for days in (200, 100, 40, 8, 1):
        svc.capture(QUESTION, GOOD, captured_at=now - timedelta(days=days))
    oldest = svc.list_results(until=now - timedelta(days=150))
    assert len(oldest) == 2
    svc.review_result(oldest[0].id, 1.0, "reviewed, then expired")
    svc.update_settings(retention_days=90)
    out = svc.cleanup(now=now)
    assert (out.captures, out.results) == (2, 4)
    assert counts(db)["reviews"] == 0  # the review went with its result
    assert out.cutoff == datetime(2026, 3, 3, 12, 0, tzinfo=UTC)
    svc.update_settings(retention_days=7)
    assert svc.cleanup(now=now).captures == 2
    assert len(svc.list_captures()) == 1


def test_trend_buckets_versions_and_fingerprint_breaks(svc: Service) -> None:
    activated(svc, "capital")
    day = datetime(2026, 5, 4, 9, 0)  # a Monday
    svc.capture(QUESTION, GOOD, captured_at=day)
    svc.capture(QUESTION, POOR, captured_at=day + timedelta(hours=1))
    svc.edit_eval("capital", threshold=0.7)  # new version, same scorer
    svc.test_eval("capital", QUESTION, GOOD)
    svc.activate_eval("capital")
    svc.capture(QUESTION, GOOD, captured_at=day + timedelta(days=1))
    svc.edit_eval("capital", options={"stemming": False})  # a different scorer
    svc.test_eval("capital", QUESTION, REFERENCE)
    svc.activate_eval("capital")
    svc.capture(QUESTION, GOOD, captured_at=day + timedelta(days=2))

    tr = svc.trend("capital", bucket="day")
    assert [b.count for b in tr.buckets] == [2, 1, 1]
    assert [b.versions for b in tr.buckets] == [[1], [2], [3]]
    assert [b.version_change for b in tr.buckets] == [False, True, True]
    assert [b.fingerprint_break for b in tr.buckets] == [False, False, True]
    assert tr.buckets[0].pass_rate == 0.5
    assert [len(b.fingerprints) for b in tr.buckets] == [1, 1, 1]
    hours = svc.trend("capital", bucket="hour", until=day + timedelta(hours=2))
    assert [b.start.hour for b in hours.buckets] == [9, 10]
    week = svc.trend("capital", bucket="week")
    assert len(week.buckets) == 1 and week.buckets[0].start == datetime(2026, 5, 4, tzinfo=UTC)
    assert week.buckets[0].fingerprint_break  # two scorers inside one bucket
    with pytest.raises(InvalidInput, match="bucket must be"):
        svc.trend("capital", bucket="month")


def test_reference_vectors_prepared_once(svc: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("a", "b", "c"):
        activated(svc, name, f"{REFERENCE} ({name})")
    calls: list[int] = []
    original = simeval.Scorer.prepare

    def counting(self: simeval.Scorer, reference: Any) -> list[bytes]:
        calls.append(1)
        return original(self, reference)

    monkeypatch.setattr(simeval.Scorer, "prepare", counting)
    for _ in range(5):
        assert len(svc.capture(QUESTION, GOOD).results) == 3
    assert len(calls) == 3  # once per active eval, not per capture
    svc.archive_eval("c")  # a change to the active set: prepared again, once
    for _ in range(5):
        assert len(svc.capture(QUESTION, GOOD).results) == 2
    assert len(calls) == 5
    # a change made by another Service (another process) is seen on the next capture
    with Service(svc.url) as other:
        other.deactivate_eval("b")
    assert [r.eval_name for r in svc.capture(QUESTION, GOOD).results] == ["a"]


def test_import_is_idempotent_by_name(svc: Service, tmp_path: Path) -> None:
    doc = {
        "simeval": 1,
        "evals": [
            {
                "name": "capital",
                "references": [REFERENCE],
                "threshold": 0.75,
                "status": "active",
                "test": {"input": QUESTION, "output": GOOD},
            },
            {"name": "greeting", "reference": "Hello! How can I help you today?"},
        ],
    }
    path = tmp_path / "evals.yaml"
    import yaml

    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    first = svc.import_evals(path)
    assert first["created"] == ["capital", "greeting"] and first["activated"] == ["capital"]
    second = svc.import_evals(path)
    assert second["unchanged"] == ["capital", "greeting"]
    assert not (second["created"] or second["updated"] or second["activated"])
    assert [v.version for v in svc.eval_versions("capital")] == [1]
    doc["evals"][0]["threshold"] = 0.7  # type: ignore[index]
    third = svc.import_evals(doc)
    assert third["updated"] == ["capital"] and third["activated"] == ["capital"]
    assert svc.get_eval("capital").version == 2
    # round trip: what export writes, import reads back unchanged
    assert svc.import_evals(svc.export_evals())["unchanged"] == ["capital", "greeting"]


def test_import_validates_everything_first(svc: Service, db: str, tmp_path: Path) -> None:
    svc.create_eval("kept", REFERENCE)
    before = counts(db)
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "evals:\n  - name: fine\n    references: [ok]\n  - name: broken\n    threshold: 2\n"
        "    references: [x]\n",
        encoding="utf-8",
    )
    with pytest.raises(InvalidInput, match=r"eval 2 \('broken'\): threshold"):
        svc.import_evals(bad)
    broken_yaml = tmp_path / "broken.yaml"
    broken_yaml.write_text("evals:\n  - name: a\n    references: [x\n", encoding="utf-8")
    with pytest.raises(InvalidInput, match=r"invalid YAML .* at line 4"):
        svc.import_evals(broken_yaml)
    binary = tmp_path / "latin1.yaml"
    binary.write_bytes("evals:\n  - name: café\n".encode("latin-1"))
    with pytest.raises(InvalidInput, match="not UTF-8"):
        svc.import_evals(binary)
    assert counts(db) == before


def test_activation_gate_messages(svc: Service) -> None:
    svc.create_eval("capital", REFERENCE)
    with pytest.raises(Conflict, match="no test of its current version 1"):
        svc.activate_eval("capital")
    svc.archive_eval("capital")
    with pytest.raises(Conflict, match="archived"):
        svc.activate_eval("capital")
    assert svc.deactivate_eval("capital").status == "draft"


def test_every_listing_takes_one_result_filter(svc: Service) -> None:
    from simeval.service import ResultFilter

    activated(svc, "capital")
    for output in (GOOD, POOR, "Paris is the French capital."):
        svc.capture(QUESTION, output, metadata={"engine": "v2"})
    where = ResultFilter.parse(eval_name="capital", passed=False, since="1d", meta=["engine=v2"])
    assert where.since is not None and where.meta == (("engine", "v2"),)
    listed = svc.list_results(where)
    assert [r.id for r in listed] == [
        r.id for r in svc.list_results(eval_name="capital", passed=False, meta="engine:v2")
    ]
    assert len(listed) == svc.count_results(where) == 2
    exported = json.loads(svc.export_results("json", where))
    assert sorted(r["result_id"] for r in exported) == sorted(r.id for r in listed)
    with pytest.raises(TypeError, match="not both"):
        svc.list_results(where, passed=True)
    with pytest.raises(InvalidInput, match="since 'soon'"):
        ResultFilter.parse(since="soon")


def test_reports_are_typed_and_read_as_their_dicts(svc: Service) -> None:
    from simeval.service.models import BacktestReport, ImportReport, RescoreReport

    report = svc.import_evals({"evals": [{"name": "capital", "reference": REFERENCE}]})
    assert isinstance(report, ImportReport) and report.created == report["created"] == ["capital"]
    assert "created" in report and "nothing" not in report
    svc.capture(QUESTION, GOOD)
    back = svc.backtest_eval("capital")
    assert isinstance(back, BacktestReport) and back.n == back["n"] == 1
    assert json.loads(back.model_dump_json())["worst"][0]["capture_id"] == back.worst[0].capture_id
    again = svc.rescore("capital", since="1d")
    assert isinstance(again, RescoreReport) and again.model_dump() == {
        "eval": "capital",
        "version": 1,
        "scanned": 1,
        "added": 1,
        "passed": 1,
        "replaced": 0,
    }
