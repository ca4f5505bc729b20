"""``Service.recent_verdicts``: an eval's newest results as (score, verdict), read from the
packed results and run rows, give what ``list_results`` gives, reviews and run rows included."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from simeval import runs
from simeval.service import Service

REF = "Paris is the capital of France."


def test_recent_verdicts_are_the_listing_s_scores_and_verdicts(db: str, tmp_path: Path) -> None:
    with Service(db) as svc:
        for name, ref in (("capital", REF), ("river", "The Seine flows through Paris.")):
            svc.create_eval(name, ref, threshold=0.6)
            svc.test_eval(name, "q", ref)
            svc.activate_eval(name)
        now = datetime.now(UTC).replace(tzinfo=None)
        outputs = [REF, "Lyon is a city.", "Paris, France.", "The capital is Paris."]
        svc.capture_many(
            {
                "output": outputs[i % 4],
                "captured_at": (now - timedelta(minutes=40 - i)).isoformat(),
            }
            for i in range(30)
        )
        src = tmp_path / "cases.jsonl"
        src.write_text(
            "".join(json.dumps({"id": f"c{i}", "output": o}) + "\n" for i, o in enumerate(outputs))
        )
        doc = {"evals": [{"name": "capital", "references": [REF], "threshold": 0.6}]}
        (tmp_path / "evals.yaml").write_text(json.dumps(doc))
        evals = runs.load_evals(str(tmp_path / "evals.yaml"))  # stored under its eval's id
        sink = runs.RunStore(svc, "r1", str(src), {})
        runs.run_file(str(src), runs.RunOptions(store=sink, evals=evals))
        for output in outputs[:2]:  # newer than the run's rows
            svc.capture("q", output)
        listed = svc.list_results(eval_name="capital", limit=100, explain=False)
        assert any(r.run_id is not None for r in listed)  # run rows are in the listing
        # reviews that turn verdicts round: a failing result passed, a passing one failed
        failing = next(r for r in listed if not r.passed and r.capture_id is not None)
        passing = next(r for r in listed if r.passed and r.capture_id is not None)
        run_row = next(r for r in listed if r.run_id is not None)
        svc.review_result(failing.id, 0.9, "fine")
        svc.review_result(passing.id, 0.1, "wrong")
        svc.review_result(run_row.id, 0.0 if run_row.passed else 1.0, "flipped")
        for limit in (1, 5, 17, 100):
            want = [
                (r.score, r.passed)
                for r in svc.list_results(eval_name="capital", limit=limit, explain=False)
            ]
            assert svc.recent_verdicts("capital", limit=limit) == want
        # the look-back bounds the captures read: the run rows still come
        bounded = svc.recent_verdicts("capital", limit=100, lookback=3)
        assert 3 + len(outputs) >= len(bounded) > len(outputs)
