"""Threshold calibration: choose the threshold that separates labelled good and bad outputs.

Given scores and human labels (pass/fail, or a graded score with a cut), every distinct score
is a candidate threshold ``t`` (predict pass when ``score >= t``). The sweep reports precision,
recall, F1 and accuracy at each, plus ROC AUC for the ranking as a whole, and suggests the
threshold that maximises F1 or accuracy. The suggestion is a round number strictly between the
lowest score predicted to pass and the next lower score, so it classifies the labelled data
exactly as the best candidate does while not sitting on a data point.

>>> report = calibrate([0.9, 0.8, 0.3, 0.2], [True, True, False, False])
>>> report["suggested"]["threshold"], report["suggested"]["accuracy"]
(0.6, 1.0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from simeval.errors import InvalidInput, InvalidOption
from simeval.scoring.options import DEFAULT_THRESHOLD, FAIL_WORDS, PASS_WORDS, yes_no

METRICS = ("f1", "accuracy")


def parse_label(value: object, cut: float | None = None, where: str = "label") -> bool:
    """A label as pass (True) or fail (False).

    Words (pass/fail, true/false, yes/no), booleans, 0/1, or a graded number with ``cut``
    (``value >= cut`` passes).
    """
    flag = yes_no(value, PASS_WORDS, FAIL_WORDS)
    if flag is not None:
        return flag
    number: float | None = None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is None or not math.isfinite(number):
        raise InvalidInput(f"{where}: label {value!r} is not pass/fail, true/false or a number")
    if cut is not None:
        return number >= cut
    if number in (0.0, 1.0):
        return number == 1.0
    raise InvalidInput(
        f"{where}: label {value!r} is a graded score: give --cut to say which "
        "scores count as a pass"
    )


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=values.__getitem__)
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def roc_auc(scores: Sequence[float], labels: Sequence[float]) -> float:
    """Area under the ROC curve (the Mann-Whitney statistic, ties counted half)."""
    r = ranks(scores)
    pos = [ri for ri, lab in zip(r, labels, strict=True) if lab >= 0.5]
    n_pos, n_neg = len(pos), len(labels) - len(pos)
    if not n_pos or not n_neg:
        return math.nan
    return (sum(pos) - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def _metrics(tp: int, fp: int, fn: int, tn: int) -> dict[str, float]:
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    total = tp + fp + fn + tn
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "accuracy": (tp + tn) / total if total else 0.0,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
    }


def classify(scores: Sequence[float], labels: Sequence[bool], threshold: float) -> dict[str, float]:
    """Precision, recall, F1 and accuracy of ``score >= threshold`` against the labels."""
    tp = fp = fn = tn = 0
    for s, y in zip(scores, labels, strict=True):
        if s >= threshold:
            tp += y
            fp += not y
        else:
            fn += y
            tn += not y
    return {"threshold": threshold, **_metrics(tp, fp, fn, tn)}


def sweep(scores: Sequence[float], labels: Sequence[bool]) -> list[dict[str, float]]:
    """The metrics at every distinct score as threshold, highest threshold first.

    Each entry also has ``below``: the next lower distinct score (0.0 for the lowest), so any
    threshold in ``(below, threshold]`` classifies the data the same way. O(n log n).
    """
    pairs = sorted(zip(scores, labels, strict=True), key=lambda p: -p[0])
    positives = sum(1 for _, y in pairs if y)
    negatives = len(pairs) - positives
    out: list[dict[str, float]] = []
    tp = fp = 0
    i = 0
    while i < len(pairs):
        t = pairs[i][0]
        while i < len(pairs) and pairs[i][0] == t:
            tp += pairs[i][1]
            fp += not pairs[i][1]
            i += 1
        below = pairs[i][0] if i < len(pairs) else 0.0
        out.append(
            {"threshold": t, "below": below, **_metrics(tp, fp, positives - tp, negatives - fp)}
        )
    return out


def round_between(low: float, high: float) -> float:
    """A short decimal ``x`` with ``low < x <= high`` (near their middle), else ``high``."""
    mid = (low + high) / 2
    for digits in range(1, 7):
        x = round(mid, digits)
        if low < x <= high:
            return x
    return high


def calibrate(
    scores: Sequence[float], labels: Sequence[bool], by: str = "f1", grid: int = 20
) -> dict[str, Any]:
    """Sweep thresholds over labelled scores and suggest one (maximising ``by``).

    Returns ``suggested`` (threshold and its metrics), ``best_candidate`` (the raw score the
    suggestion stands for), ``roc_auc``, the metrics at the 0.80 default, a ``table`` at
    ``grid`` evenly spaced thresholds, and the label counts.
    """
    if by not in METRICS:
        raise InvalidOption(f"calibrate by f1 or accuracy, not {by!r}")
    if len(scores) != len(labels):
        raise InvalidInput("scores and labels have different lengths")
    if not scores:
        raise InvalidInput("no labelled examples to calibrate on")
    positives = sum(1 for y in labels if y)
    if positives == 0 or positives == len(labels):
        kind = "pass" if positives else "fail"
        raise InvalidInput(
            f"every label is {kind}: calibration needs both passing and failing examples"
        )
    points = sweep(scores, labels)
    # ties: the higher threshold (the stricter eval) wins, so iterate from the top
    best = max(points, key=lambda p: (p[by], p["threshold"]))
    threshold = round_between(best["below"], best["threshold"])
    suggested = classify(scores, labels, threshold)
    table = [classify(scores, labels, round(k / grid, 6)) for k in range(1, grid)]
    return {
        "examples": len(scores),
        "positives": positives,
        "negatives": len(scores) - positives,
        "by": by,
        "suggested": suggested,
        "best_candidate": best,
        "roc_auc": roc_auc(list(scores), [1.0 if y else 0.0 for y in labels]),
        "at_default": classify(scores, labels, DEFAULT_THRESHOLD),
        "table": table,
        "warning": small_sample_warning(len(scores), positives),
    }


SMALL_SAMPLE = 30  # labelled examples below which a suggested threshold is a rough guide
SMALL_CLASS = 5  # nor with fewer passes or fails than this


def small_sample_warning(examples: int, positives: int) -> str | None:
    """A one-line caution when a threshold is suggested from few examples (None otherwise).

    >>> small_sample_warning(10, 5)[:60]
    'only 10 labelled examples: the suggested threshold is a roug'
    >>> small_sample_warning(100, 50) is None
    True
    """
    negatives = examples - positives
    if examples < SMALL_SAMPLE:
        return (
            f"only {examples} labelled examples: the suggested threshold is a rough guide "
            f"({SMALL_SAMPLE} or more, with {SMALL_CLASS}+ passes and fails, make it reliable)"
        )
    fewest = min(positives, negatives)
    if fewest < SMALL_CLASS:
        kind = "passes" if positives < negatives else "fails"
        return f"only {fewest} labelled {kind}: the suggested threshold is a rough guide"
    return None
