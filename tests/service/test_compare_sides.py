"""Compare read column by column (issue 22): every case of a captures side, the sample a side
larger than the limit is compared on (stated in the report, the same cases on both sides),
reviews in place of automated scores, and the API and page showing it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from simeval.cli import cli
from simeval.errors import InvalidInput
from simeval.service import Service
from simeval.web import create_app

REFERENCE = "The capital of France is Paris, which stands on the Seine."
GOOD = "Paris, on the Seine, is the capital of France."
POOR = "France is a large country in western Europe."
MIDDLE = "The capital of France is Paris."
CASES = 150


@pytest.fixture
def svc(db: str) -> Iterator[Service]:
    with Service(db) as svc:
        for name in ("capital", "seine"):
            svc.create_eval(name, REFERENCE, threshold=0.5)
            svc.test_eval(name, "q", GOOD)
            svc.activate_eval(name)
        rows = []
        for i in range(CASES):
            for engine, out in (
                ("v1", GOOD if i % 3 else MIDDLE),
                ("v2", POOR if i % 4 == 0 else GOOD),
            ):
                rows.append(
                    {"input": f"question {i}", "output": out,
                     "metadata": {"engine": engine, "case_id": f"case-{i}"}}
                )  # fmt: skip
        # a capture without a case id pairs by its input
        rows.append({"input": "lonely", "output": GOOD, "metadata": {"engine": "v1"}})
        rows.append({"input": "lonely", "output": POOR, "metadata": {"engine": "v2"}})
        svc.capture_many(rows)
        yield svc


def test_every_case_is_compared_under_the_limit(svc: Service) -> None:
    report = svc.compare("captures:engine=v1", "captures:engine=v2", resamples=200, keep=1000)
    assert report.sampled is None and report.limit >= 10_000_000
    for e in report.evals:
        assert e.a.n == e.a.total == CASES + 1 and e.b.n == e.b.total == CASES + 1
        assert e.pairs == CASES + 1  # by case id, and "lonely" by its input
        assert e.flips_to_fail > 0 and (e.regressed_count or 0) >= e.flips_to_fail
    (cap,) = [e for e in report.evals if e.eval == "capital"]
    names = {c.case for c in cap.regressed}
    assert {"case-4", "case-8", "lonely"} <= names  # GOOD on v1, POOR on v2
    worst = next(c for c in cap.regressed if c.case == "case-4")
    assert worst.passed_a and not worst.passed_b and worst.missing_terms
    assert worst.result_a and worst.result_b and worst.result_a != worst.result_b
    assert cap.regressed[0].passed_a and not cap.regressed[0].passed_b  # flips first


def test_a_side_over_the_limit_is_a_stated_seeded_sample(svc: Service) -> None:
    full = svc.compare("captures:engine=v1", "captures:engine=v2", resamples=200)
    # 2 evals: 302 results a side; a limit of 100 samples both sides alike
    one = svc.compare("captures:engine=v1", "captures:engine=v2", resamples=200, limit=100)
    assert one.limit == 100 and one.sampled is not None
    assert "sample of case keys" in one.sampled and "seed 0" in one.sampled
    for e in one.evals:
        assert e.a.total == e.b.total == CASES + 1
        assert 0 < e.a.n <= 50 and e.a.n == e.b.n == e.pairs  # kept cases stay paired
    again = svc.compare("captures:engine=v1", "captures:engine=v2", resamples=200, limit=100)
    assert again == one
    other = svc.compare(
        "captures:engine=v1", "captures:engine=v2", resamples=200, limit=100, seed=1
    )
    assert [e.a.n for e in other.evals] != [e.a.n for e in one.evals] or other != one
    assert full.evals[0].a.n > one.evals[0].a.n
    with pytest.raises(InvalidInput, match="limit"):
        svc.compare("captures:engine=v1", "captures:engine=v2", limit=0)


def test_a_review_counts_in_place_of_the_automated_score(svc: Service) -> None:
    before = svc.compare(
        "captures:engine=v1", "captures:engine=v2", eval_name="capital", resamples=200
    )
    (e,) = before.evals
    failing = [r for r in svc.list_results(eval_name="capital", passed=False, meta=["engine=v2"])]
    for r in failing:
        svc.review_result(r.id, 1.0, note="a fine answer")
    after = svc.compare(
        "captures:engine=v1", "captures:engine=v2", eval_name="capital", resamples=200
    )
    (f,) = after.evals
    assert f.b.pass_rate == 1.0 and e.b.pass_rate is not None and e.b.pass_rate < 1.0
    assert f.flips_to_fail == 0


def test_the_api_and_the_page_say_how_a_side_was_sampled(db: str, svc: Service) -> None:
    client = TestClient(create_app(db), base_url="http://127.0.0.1:8000")
    answer = client.get(
        "/api/compare", params={"a": "captures:engine=v1", "b": "captures:engine=v2"}
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["sampled"] is None and body["evals"][0]["a"]["total"] == CASES + 1
    page = client.get("/compare", params={"a": "captures:engine=v1", "b": "captures:engine=v2"})
    assert page.status_code == 200 and 'id="compare-sampled"' not in page.text
    assert "every case compared" in page.text


def test_the_page_states_a_sample(db: str, svc: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    import simeval.service.compare_sides as compare_module

    monkeypatch.setattr(compare_module, "MAX_RESULTS", 100)
    client = TestClient(create_app(db), base_url="http://127.0.0.1:8000")
    page = client.get("/compare", params={"a": "captures:engine=v1", "b": "captures:engine=v2"})
    assert page.status_code == 200
    assert 'id="compare-sampled"' in page.text and "sample of case keys" in page.text
    assert f"of {CASES + 1}" in page.text and "every case compared" not in page.text
    body = client.get(
        "/api/compare", params={"a": "captures:engine=v1", "b": "captures:engine=v2"}
    ).json()
    assert body["limit"] == 100 and "sample of case keys" in body["sampled"]
    res = CliRunner().invoke(
        cli, ["compare", "captures:engine=v1", "captures:engine=v2", "--db", db]
    )
    assert res.exit_code in (0, 1), res.output
    assert "sampled: a side held more than 100 results" in res.output
    assert f"of {CASES + 1}" in res.output


def test_stored_runs_pair_by_case_id_on_every_backend(db: str) -> None:
    with Service(db) as svc:
        ids = []
        for name, scores in (("a", [0.9] * 12), ("b", [0.9] * 9 + [0.2] * 3)):
            run_id = svc.create_run(name, "data.jsonl")
            rows = [
                {"eval_name": "capital", "input": f"q{i}", "output": "o", "reference": "r",
                 "score": s, "threshold": 0.5, "explanation": {"case": {"id": i}}}
                for i, s in enumerate(scores)
            ]  # fmt: skip
            svc.add_run_results(run_id, rows)
            ids.append(run_id)
        report = svc.compare(f"run:{ids[0]}", "run:latest", resamples=200)
        sampled = svc.compare(f"run:{ids[0]}", "run:latest", resamples=200, limit=6)
    (e,) = report.evals
    assert e.pairs == 12 and e.a.total == 12 and e.flips_to_fail == 3
    assert [c.case for c in e.regressed] == ["9", "10", "11"]  # an int case id, as text
    assert all(c.result_a and c.result_a.startswith("r") for c in e.regressed)
    (s,) = sampled.evals
    assert sampled.sampled and s.a.n == s.b.n == s.pairs <= 6 and s.a.total == 12
