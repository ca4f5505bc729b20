"""Stored results across the switch to the bands scale (issue 17): they keep their score and
fingerprint, trends mark the switch, and a rescore with ``refresh`` stores the new scale for
past captures when asked (rollup counts kept exact)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from click.testing import CliRunner

import simeval
from simeval.cli import cli
from simeval.scoring import options as options_mod
from simeval.scoring import scorer as scorer_mod
from simeval.service import Service
from simeval.store.rollups import roll_up

REFERENCE = "The capital of France is Paris, which stands on the Seine."
QUESTION = "What is the capital of France?"
OUTPUT = "The capital of France is Paris."
DAY = datetime(2026, 5, 4, 9, 0)
OLD_FP = "8a940b4ca649"  # the default scorer before the scale existed (= scale=cosine)


@pytest.fixture
def before_upgrade(db: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """An eval with default options and one result stored the day before, when the default
    was the raw cosine (the defaults as they were, fresh scorers)."""
    with monkeypatch.context() as m:
        m.setitem(options_mod.DEFAULTS, "scale", "cosine")
        scorer_mod._cached_scorer.cache_clear()
        with Service(db) as svc:
            svc.create_eval("capital", REFERENCE, threshold=0.8)
            svc.test_eval("capital", QUESTION, REFERENCE)
            svc.activate_eval("capital")
            svc.capture(QUESTION, OUTPUT, captured_at=DAY)
    scorer_mod._cached_scorer.cache_clear()
    return db


def test_stored_results_keep_their_score_and_trends_mark_the_switch(before_upgrade: str) -> None:
    cosine = simeval.score(OUTPUT, REFERENCE, QUESTION, scale="cosine")
    bands = simeval.score(OUTPUT, REFERENCE, QUESTION)
    assert cosine < 0.8 <= bands  # the switch turns this answer from a fail into a pass
    with Service(before_upgrade) as svc:
        svc.capture(QUESTION, OUTPUT, captured_at=DAY + timedelta(days=1))
        old, new = sorted(svc.list_results(eval_name="capital"), key=lambda r: r.captured_at)
        assert (old.score, old.passed, old.fingerprint) == (cosine, False, OLD_FP)
        assert (new.score, new.passed, new.fingerprint) == (bands, True, simeval.fingerprint())
        trend = svc.trend("capital", bucket="day", since=DAY - timedelta(days=1))
        assert [b.fingerprint_break for b in trend.buckets] == [False, True]
        assert [b.fingerprints for b in trend.buckets] == [[OLD_FP], [simeval.fingerprint()]]
        assert [b.versions for b in trend.buckets] == [[1], [1]]  # the eval did not change


def test_rescore_refresh_stores_the_new_scale_when_asked(before_upgrade: str) -> None:
    bands = simeval.score(OUTPUT, REFERENCE, QUESTION)
    with Service(before_upgrade) as svc:
        # the rollup has counted the old result: the refresh must move it, not add to it
        svc.store.run_write(lambda s: roll_up(s.connection()))
        plain = svc.rescore("capital", since=DAY - timedelta(days=1))
        assert (plain.added, plain.replaced) == (0, 0)  # stored results keep what they were
        report = svc.rescore("capital", since=DAY - timedelta(days=1), refresh=True)
        assert (report.scanned, report.added, report.replaced, report.passed) == (1, 1, 1, 1)
        (result,) = svc.list_results(eval_name="capital")
        assert (result.score, result.passed, result.fingerprint) == (
            bands,
            True,
            simeval.fingerprint(),
        )
        trend = svc.trend("capital", bucket="day", since=DAY - timedelta(days=1))
        (bucket,) = trend.buckets
        assert (bucket.count, bucket.pass_rate, bucket.fingerprints) == (
            1,
            1.0,
            [simeval.fingerprint()],
        )
        again = svc.rescore("capital", since=DAY - timedelta(days=1), refresh=True)
        assert (again.added, again.replaced) == (0, 0)


def test_cli_and_api_rescore_refresh(before_upgrade: str) -> None:
    from fastapi.testclient import TestClient

    from simeval.web import create_app

    res = CliRunner().invoke(
        cli, ["rescore", "--eval", "capital", "--since", "2026-05-01", "--db", before_upgrade]
    )
    assert res.exit_code == 0 and "0 results stored" in res.output, res.output
    app = create_app(db=before_upgrade)
    with TestClient(app, base_url="http://127.0.0.1:8000") as client:
        body = {"eval": "capital", "since": "2026-05-01", "refresh": True}
        got = client.post("/api/rescore", json=body)
        assert got.status_code == 200, got.text
        assert got.json()["replaced"] == 1 and got.json()["passed"] == 1
        # the studio's result page shows both numbers of the stored result's explanation
        with Service(before_upgrade) as svc:
            (result,) = svc.list_results(eval_name="capital")
        page = client.get(f"/results/{result.id}")
        assert page.status_code == 200
        cosine = simeval.score(OUTPUT, REFERENCE, QUESTION, scale="cosine")
        shown = f"cosine {cosine:.2f} → score {result.score:.2f}"
        assert shown in page.text
