"""Migration 0003 on a database made at revision 0002 with data: every captured result is
packed on its capture in its original order, reviews follow their results, run rows keep their
ids, and trends, stats, counts and exports give what they gave before."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from simeval.service import Service
from simeval.store import head_revision, make_engine, resolve_db_url, unpack_results, upgrade

FP = "0123456789ab"
T1 = "2026-01-05 10:00:00.000000"
T2 = "2026-01-05 11:30:00.000000"
T3 = "2026-01-06 09:00:00.000000"


def make_0002_database(db: Path) -> None:
    engine = make_engine(resolve_db_url(db))
    with engine.begin() as conn:
        upgrade(conn, "0002")
    engine.dispose()
    con = sqlite3.connect(db)
    assert con.execute("SELECT version_num FROM alembic_version").fetchone() == ("0002",)
    rows = []
    for eid, name, ref in ((1, "capital", "Paris is the capital."), (2, "river", "The Seine.")):
        refs = json.dumps([ref, ref + " Indeed."])
        rows.append(
            f"""INSERT INTO evals (id, name, type, status, version, reference_answers,
                threshold, input_scope, options, fingerprint, created_at, updated_at)
            VALUES ({eid}, '{name}', 'similarity', 'active', 2, '{refs}', 0.5, NULL, '{{}}',
                '{FP}', '{T1}', '{T1}');"""
        )
        for version in (1, 2):
            rows.append(
                f"""INSERT INTO eval_versions (eval_id, version, reference_answers, threshold,
                    input_scope, options, fingerprint, changes, created_at)
                VALUES ({eid}, {version}, '{refs}', 0.5, NULL, '{{}}', '{FP}', '{{}}', '{T1}');"""
            )
    captures = [(1, T1, 1), (2, T2, 1), (3, T3, 0), (4, T3, 1)]
    for cid, when, evaluated in captures:
        rows.append(
            f"""INSERT INTO captures (id, input, output, conversation_id, metadata, captured_at,
                evaluated) VALUES ({cid}, 'q{cid}', 'out {cid}', 'conv', '{{"n": {cid}}}',
                '{when}', {evaluated});"""
        )
    results = [  # id, capture, eval, version, score, passed, matched
        (1, 1, 2, 1, 0.25, 0, 1),
        (2, 1, 1, 1, 0.75, 1, 0),
        (3, 2, 1, 2, 0.5, 1, 1),
        (4, 2, 2, 2, 0.125, 0, 0),
    ]
    for rid, cid, eid, ver, score, ok, at in results:
        when = dict((c, w) for c, w, _ in captures)[cid]
        rows.append(
            f"""INSERT INTO results (id, capture_id, eval_id, eval_version, score, passed,
                threshold, fingerprint, matched_index, created_at)
            VALUES ({rid}, {cid}, {eid}, {ver}, {score}, {ok}, 0.5, '{FP}', {at}, '{when}');"""
        )
    rows.append(
        f"""INSERT INTO runs (id, name, source, options, summary, created_at)
        VALUES (1, 'nightly', 'data.jsonl', '{{}}', '{{}}', '{T3}');"""
    )
    for rid in (5, 6):
        rows.append(
            f"""INSERT INTO results (id, run_id, eval_id, eval_name, eval_version, score, passed,
                threshold, fingerprint, matched_index, input, output, reference, created_at)
            VALUES ({rid}, 1, 1, 'capital', 2, 0.9, 1, 0.5, '{FP}', 0, 'in', 'out', 'ref',
                '{T3}');"""
        )
    rows.append(
        f"INSERT INTO reviews (result_id, score, note, created_at) VALUES (1, 0.9, 'ok', '{T3}');"
    )
    rows.append(
        f"INSERT INTO reviews (result_id, score, note, created_at) VALUES (6, 0.1, 'no', '{T3}');"
    )
    con.executescript("\n".join(rows))
    con.commit()
    con.close()


def test_a_0002_database_with_data_is_carried_over(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    make_0002_database(db)
    with Service(db) as svc:
        assert svc.store.revision() == head_revision()
        # captured results, packed in their original order, with their versions and fields
        c1 = svc.get_capture(1)
        assert [
            (r.id, r.eval_name, r.eval_version, r.score, r.matched_index) for r in c1.results
        ] == [
            ("1-2", "river", 1, 0.25, 1),
            ("1-1", "capital", 1, 0.75, 0),
        ]
        assert c1.results[0].passed is True  # the review of old result 1 (0.9 >= 0.5) wins
        assert c1.results[0].review is not None and c1.results[0].review.note == "ok"
        assert c1.results[1].matched_reference == "Paris is the capital."
        assert svc.get_capture(3).results == [] and svc.get_capture(3).evaluated is False
        assert svc.get_capture(4).results == [] and svc.get_capture(4).evaluated is True
        # run rows keep their ids (old ids still work) and their review
        assert svc.get_result("r6").review is not None
        assert svc.get_result("6").passed is False and svc.get_result("r5").passed is True
        # counts and listings: 4 captured results + 2 run rows, newest first
        assert svc.count_results() == 6
        assert svc.count_results(eval_name="capital") == 4
        assert svc.count_results(passed=True) == 4  # 1-1, 2-1, r5, and 1-2 by review
        assert svc.count_results(reviewed=True) == 2
        listed = [r.id for r in svc.list_results()]
        assert set(listed) == {"1-2", "1-1", "2-1", "2-2", "r5", "r6"}
        assert listed.index("2-1") < listed.index("1-1")
        # trends and stats from the rollup match the carried-over results
        tr = svc.trend("river", bucket="hour")
        assert [(b.count, b.mean_score, b.pass_rate, b.reviewed) for b in tr.buckets] == [
            (1, 0.9, 1.0, 1),
            (1, 0.125, 0.0, 0),
        ]
        assert [b.versions for b in tr.buckets] == [[1], [2]]
        stats = {e.name: e.stats for e in svc.list_evals()}
        assert stats["capital"] is not None and stats["capital"].results == 2
        # the export has every row
        assert len(svc.export_results("json") and json.loads(svc.export_results("json"))) == 6
        # and the database works on: a new capture is packed and counted
        new = svc.capture("q", "Paris is the capital.")
        assert {r.eval_name for r in new.results} == {"capital", "river"}
        assert svc.count_results() == 8
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*) FROM results").fetchone()[0] == 2  # run rows only
    packed = [unpack_results(b) for (b,) in con.execute("SELECT scores FROM captures ORDER BY id")]
    assert [len(p) for p in packed] == [2, 2, 0, 0, 2]
    con.close()
