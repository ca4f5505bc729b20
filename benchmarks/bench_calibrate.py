"""Calibration benchmark: a threshold chosen from labelled examples against the fixed 0.80.

On the Microsoft Research Paraphrase Corpus train split (``msrp.train.tsv``: 3,576 sentence
pairs, labelled 1 = paraphrase, 0 = not), each pair is scored with simeval's default scorer
(the first sentence as output, the second as reference). Then 5-fold cross-validation: the
pairs are split into five stratified folds (same share of paraphrases in each, fixed seed);
for each fold, ``simeval.scoring.calibrate.calibrate`` chooses a threshold on the other four folds,
and the held-out fold is classified (``score >= threshold`` predicts a paraphrase) at that
threshold and at the fixed 0.80 default. The baseline is the 0.80 default, measured on the
same folds in the same run. Reports mean held-out accuracy and F1 for each, with the
thresholds chosen.

    .venv/bin/python benchmarks/bench_calibrate.py
    .venv/bin/python benchmarks/bench_calibrate.py --data /path/to/msrp.train.tsv --json

The data file is read where it lies (it is not part of the package): tab-separated, quotes
are literal characters, a few bytes are not UTF-8 (replaced).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from pathlib import Path
from typing import Any

import simeval
from simeval.scoring.calibrate import calibrate, classify
from simeval.scoring.scorer import DEFAULT_THRESHOLD

DEFAULT_DATA = "/work/shared/data/sts-dev/msrp.train.tsv"
FOLDS = 5


def load_msrp(path: Path) -> tuple[list[str], list[str], list[bool]]:
    """(first sentences, second sentences, is-paraphrase labels); split on tabs, no quoting."""
    first: list[str] = []
    second: list[str] = []
    labels: list[bool] = []
    text = path.read_bytes().decode("utf-8-sig", errors="replace")
    for n, line in enumerate(text.splitlines()):
        fields = line.split("\t")
        if n == 0 or len(fields) < 5 or fields[0].strip() not in {"0", "1"}:
            continue  # the header, or a line that is not a labelled pair
        labels.append(fields[0].strip() == "1")
        first.append(fields[3])
        second.append(fields[4])
    return first, second, labels


def stratified_folds(labels: list[bool], k: int, seed: int) -> list[list[int]]:
    """``k`` folds of row indices, each with about the same share of positives."""
    rng = random.Random(seed)
    folds: list[list[int]] = [[] for _ in range(k)]
    for wanted in (True, False):
        idx = [i for i, y in enumerate(labels) if y is wanted]
        rng.shuffle(idx)
        for j, i in enumerate(idx):
            folds[j % k].append(i)
    return folds


def cross_validate(
    scores: list[float], labels: list[bool], by: str, seed: int
) -> list[dict[str, Any]]:
    """Per fold: the threshold chosen on the other folds and held-out metrics at it and 0.80."""
    out = []
    for fold in stratified_folds(labels, FOLDS, seed):
        held = set(fold)
        train = [i for i in range(len(scores)) if i not in held]
        report = calibrate([scores[i] for i in train], [labels[i] for i in train], by=by)
        t = report["suggested"]["threshold"]
        test_scores = [scores[i] for i in fold]
        test_labels = [labels[i] for i in fold]
        out.append(
            {
                "threshold": t,
                "suggested": classify(test_scores, test_labels, t),
                "default": classify(test_scores, test_labels, DEFAULT_THRESHOLD),
                "held_out": len(fold),
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=DEFAULT_DATA, help="path of msrp.train.tsv")
    parser.add_argument("--seed", type=int, default=1, help="seed of the fold split")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    opts = parser.parse_args()
    path = Path(opts.data)
    if not path.exists():
        raise SystemExit(f"data file not found: {path} (give --data)")
    first, second, labels = load_msrp(path)
    scores = simeval.score_many(first, second)
    report: dict[str, Any] = {
        "data": str(path),
        "pairs": len(labels),
        "paraphrases": sum(labels),
        "scorer": simeval.fingerprint(),
        "folds": FOLDS,
        "seed": opts.seed,
        # context: a classifier that calls every pair a paraphrase
        "accuracy_all_pass": sum(labels) / len(labels),
    }
    for by in ("accuracy", "f1"):
        folds = cross_validate(scores, labels, by, opts.seed)
        report[f"by_{by}"] = {
            "thresholds": [f["threshold"] for f in folds],
            "accuracy_suggested": statistics.mean(f["suggested"]["accuracy"] for f in folds),
            "accuracy_default": statistics.mean(f["default"]["accuracy"] for f in folds),
            "f1_suggested": statistics.mean(f["suggested"]["f1"] for f in folds),
            "f1_default": statistics.mean(f["default"]["f1"] for f in folds),
            "accuracy_per_fold": [
                (f["suggested"]["accuracy"], f["default"]["accuracy"]) for f in folds
            ],
        }
    if opts.json:
        print(json.dumps(report, indent=2))
        return
    print(
        f"{report['pairs']:,} MSRP pairs ({report['paraphrases']:,} paraphrases), "
        f"scorer {report['scorer']}, {FOLDS}-fold cross-validation (stratified, seed {opts.seed})"
    )
    print(f"(calling every pair a paraphrase: accuracy {report['accuracy_all_pass']:.3f})")
    for by in ("accuracy", "f1"):
        r = report[f"by_{by}"]
        ts = ", ".join(f"{t:.4g}" for t in r["thresholds"])
        print(f"threshold chosen by {by} on 4 folds: {ts}")
        print(
            f"  held-out accuracy: {r['accuracy_suggested']:.3f} at the suggested threshold vs "
            f"{r['accuracy_default']:.3f} at {DEFAULT_THRESHOLD:.2f} "
            f"({r['accuracy_suggested'] / r['accuracy_default']:.2f}x)"
        )
        print(
            f"  held-out F1:       {r['f1_suggested']:.3f} at the suggested threshold vs "
            f"{r['f1_default']:.3f} at {DEFAULT_THRESHOLD:.2f}"
        )


if __name__ == "__main__":
    main()
