"""`simeval calibrate`: the threshold sweep, the suggestion, labels and the CLI."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import simeval
from simeval.cli import cli
from simeval.scoring.calibrate import calibrate, classify, parse_label, round_between, sweep

REFERENCE = "The Eiffel Tower is in Paris and was finished in 1889."
# Outputs from close paraphrases to unrelated text; the labels say which are acceptable. The
# wrong "Eiffel built towers in 1889" scores about 0.84: the 0.80 default lets it pass.
LABELLED = [
    ("The Eiffel Tower, finished in 1889, is in Paris.", "pass"),
    ("The Eiffel Tower is in Paris; it was completed in 1889.", "pass"),
    ("Paris has the Eiffel Tower, finished 1889.", "pass"),
    ("The Eiffel tower opened in 1889 in Paris.", "pass"),
    ("Eiffel built towers in 1889 and later.", "fail"),
    ("The Eiffel Tower is in Paris.", "fail"),
    ("The tower is in France.", "fail"),
    ("I like trains.", "fail"),
]


def write_labelled(path: Path) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["output", "reference", "verdict"])
        for output, label in LABELLED:
            w.writerow([output, REFERENCE, label])
    return path


def test_calibration_picks_the_known_best_threshold(tmp_path: Path) -> None:
    scores = [simeval.score(o, REFERENCE) for o, _ in LABELLED]
    lowest_pass = min(s for s, (_, lab) in zip(scores, LABELLED, strict=True) if lab == "pass")
    highest_fail = max(s for s, (_, lab) in zip(scores, LABELLED, strict=True) if lab == "fail")
    assert 0.8 < highest_fail < lowest_pass  # separable, and 0.80 would be wrong
    src = write_labelled(tmp_path / "labelled.csv")
    res = CliRunner().invoke(cli, ["calibrate", str(src), "--label-col", "verdict", "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    t = report["suggested"]["threshold"]
    assert highest_fail < t <= lowest_pass  # the one threshold range that separates them
    assert report["suggested"]["accuracy"] == 1.0 and report["suggested"]["f1"] == 1.0
    assert report["roc_auc"] == 1.0
    assert report["at_default"]["accuracy"] < 1.0
    assert (report["positives"], report["negatives"]) == (4, 4)
    human = CliRunner().invoke(cli, ["calibrate", str(src), "--label-col", "verdict"])
    assert human.exit_code == 0
    assert "suggested threshold" in human.output and f"{t:.4g}" in human.output


def test_sweep_with_noise_finds_the_brute_force_optimum() -> None:
    scores = [0.95, 0.9, 0.85, 0.7, 0.65, 0.6, 0.4, 0.3, 0.2, 0.1]
    labels = [True, True, False, True, True, False, False, True, False, False]
    for by in ("accuracy", "f1"):
        report = calibrate(scores, labels, by=by)
        brute = max(classify(scores, labels, t)[by] for t in [*scores, 1.01])
        assert report["suggested"][by] == pytest.approx(brute)
    # accuracy: predict pass from 0.65 up (7 of 10 right); the suggestion sits in (0.6, 0.65]
    acc = calibrate(scores, labels, by="accuracy")["suggested"]
    assert 0.6 < acc["threshold"] <= 0.65 and acc["accuracy"] == pytest.approx(0.8)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.booleans()), min_size=1, max_size=40))
def test_sweep_equals_classify_at_every_threshold(pairs: list[tuple[float, bool]]) -> None:
    scores = [s for s, _ in pairs]
    labels = [y for _, y in pairs]
    for point in sweep(scores, labels):
        direct = classify(scores, labels, point["threshold"])
        for k in ("precision", "recall", "f1", "accuracy"):
            assert point[k] == pytest.approx(direct[k])
        assert point["below"] < point["threshold"] or point["threshold"] == 0.0


@settings(max_examples=100, deadline=None)
@given(st.floats(0, 1), st.floats(0, 1))
def test_round_between_stays_in_the_range(a: float, b: float) -> None:
    low, high = min(a, b), max(a, b)
    x = round_between(low, high)
    assert (low < x <= high) or x == high


@pytest.mark.parametrize(
    ("value", "cut", "expected"),
    [
        ("pass", None, True),
        ("FAIL", None, False),
        ("yes", None, True),
        (True, None, True),
        (0, None, False),
        ("1", None, True),
        (4.5, 4, True),
        ("3", 4, False),
        ("4", 4.0, True),
    ],
)
def test_labels(value: object, cut: float | None, expected: bool) -> None:
    assert parse_label(value, cut) is expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (3.5, "give --cut"),
        ("maybe", "not pass/fail"),
        (None, "not pass/fail"),
        ("nan", "not pass/fail"),
    ],
)
def test_bad_labels(value: object, message: str) -> None:
    with pytest.raises(simeval.InvalidInput, match=message):
        parse_label(value, None, "f.csv line 2")


def test_graded_labels_with_a_cut(tmp_path: Path) -> None:
    src = tmp_path / "graded.jsonl"
    grades = [5, 5, 4, 4, 3, 2, 1, 0]
    src.write_text(
        "".join(
            json.dumps({"output": o, "reference": REFERENCE, "rating": g}) + "\n"
            for (o, _), g in zip(LABELLED, grades, strict=True)
        )
    )
    res = CliRunner().invoke(
        cli,
        [
            "calibrate",
            str(src),
            "--label-col",
            "rating",
            "--cut",
            "4",
            "--by",
            "accuracy",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["suggested"]["accuracy"] == 1.0
    res = CliRunner().invoke(cli, ["calibrate", str(src), "--label-col", "rating"])
    assert res.exit_code == 2 and "line 1: label 5 is a graded score: give --cut" in res.output


def test_calibrate_errors(tmp_path: Path) -> None:
    src = write_labelled(tmp_path / "l.csv")
    res = CliRunner().invoke(cli, ["calibrate", str(src)])
    assert res.exit_code == 2 and "--label-col" in res.output
    res = CliRunner().invoke(cli, ["calibrate", str(src), "--label-col", "nope"])
    assert res.exit_code == 2 and "no column 'nope'" in res.output
    same = tmp_path / "same.jsonl"
    same.write_text(json.dumps({"output": "a", "reference": "a", "l": "pass"}) + "\n")
    res = CliRunner().invoke(cli, ["calibrate", str(same), "--label-col", "l"])
    assert res.exit_code == 2 and "every label is pass" in res.output
    res = CliRunner().invoke(cli, ["calibrate", str(src), "--label-col", "verdict", "--by", "x"])
    assert res.exit_code == 2
    with pytest.raises(simeval.InvalidInput, match="no labelled examples"):
        calibrate([], [])


def test_bad_label_rows_can_be_skipped(tmp_path: Path) -> None:
    src = tmp_path / "l.jsonl"
    rows = [{"output": o, "reference": REFERENCE, "v": lab} for o, lab in LABELLED]
    rows[3]["v"] = "unsure"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = CliRunner().invoke(cli, ["calibrate", str(src), "--label-col", "v"])
    assert res.exit_code == 2 and "l.jsonl line 4: label 'unsure'" in res.output
    res = CliRunner().invoke(
        cli, ["calibrate", str(src), "--label-col", "v", "--on-error", "skip", "--json"]
    )
    assert res.exit_code == 0
    report = json.loads(res.output)
    assert report["examples"] == 7 and report["skipped"] == 1


# -- stored evals: reviews as labels, writing the threshold --------------------------------------
def reviewed_eval(db: str) -> None:
    """An active eval whose results a human reviewed: the LABELLED outputs, judged as labelled."""
    from simeval.service import Service

    with Service(db) as svc:
        svc.create_eval("eiffel", REFERENCE)
        svc.test_eval("eiffel", "Tell me about that landmark", REFERENCE)
        svc.activate_eval("eiffel")
        for output, label in LABELLED:
            (result,) = svc.capture("Tell me about that landmark", output).results
            svc.review_result(result.id, 1.0 if label == "pass" else 0.0, "checked by hand")


def test_calibrate_from_reviews_and_write_the_threshold(new_sqlite: Callable[..., str]) -> None:
    from simeval.service import Service

    db = new_sqlite("evals.db")
    reviewed_eval(db)
    res = CliRunner().invoke(cli, ["calibrate", "--eval", "eiffel", "--db", db, "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    assert (report["examples"], report["reviews"], report["positives"]) == (8, 8, 4)
    t = report["suggested"]["threshold"]
    assert report["suggested"]["accuracy"] == 1.0 and t > 0.8
    assert report["eval"]["threshold"] == 0.8 and report["eval"]["at_threshold"]["accuracy"] < 1
    with Service(db) as svc:
        assert svc.get_eval("eiffel").threshold == 0.8  # nothing written without --apply
    res = CliRunner().invoke(cli, ["calibrate", "--eval", "eiffel", "--db", db, "--apply"])
    assert res.exit_code == 0, res.output
    assert f"eval eiffel: threshold 0.80 -> {t:.2f} (version 2)" in res.output
    # a pending version: version 1 keeps scoring until version 2 is tested and activated
    assert "version 1 keeps scoring captures; version 2" in res.output
    with Service(db) as svc:
        ev = svc.get_eval("eiffel")
        assert (ev.threshold, ev.version, ev.status) == (t, 2, "active")
        assert (ev.active_version, ev.pending_version) == (1, 2)
    again = CliRunner().invoke(cli, ["calibrate", "--eval", "eiffel", "--db", db, "--apply"])
    assert f"eval eiffel already has threshold {t:.2f}" in again.output


def test_calibrate_an_eval_with_a_labelled_file_too(
    tmp_path: Path, new_sqlite: Callable[..., str]
) -> None:
    db = new_sqlite("evals.db")
    reviewed_eval(db)
    src = tmp_path / "more.jsonl"  # outputs only: the eval's references score them
    src.write_text(
        "".join(json.dumps({"output": o, "ok": lab == "pass"}) + "\n" for o, lab in LABELLED)
    )
    res = CliRunner().invoke(
        cli, ["calibrate", str(src), "--label-col", "ok", "--eval", "eiffel", "--db", db, "--json"]
    )
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    assert (report["examples"], report["reviews"]) == (16, 8)
    assert report["suggested"]["accuracy"] == 1.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give a labelled FILE"),
        (["FILE", "--label-col", "verdict", "--apply"], "--apply needs --eval"),
        (["--eval", "nope"], "no eval named 'nope'"),
        (["--eval", "fresh"], "has no reviewed results yet"),
        (["FILE", "--label-col", "verdict", "--eval", "fresh", "--no-stemming"], "scorer flags"),
        (["--eval", "fresh", "--label-col", "x"], "--label-col needs a FILE"),
    ],
)
def test_calibrate_eval_errors(
    tmp_path: Path, new_sqlite: Callable[..., str], args: list[str], message: str
) -> None:
    from simeval.service import Service

    db = new_sqlite("evals.db")
    with Service(db) as svc:
        svc.create_eval("fresh", REFERENCE)
    src = write_labelled(tmp_path / "l.csv")
    args = [str(src) if a == "FILE" else a for a in args]
    res = CliRunner().invoke(cli, ["calibrate", *args, "--db", db])
    assert res.exit_code == 2 and message in res.output, res.output
