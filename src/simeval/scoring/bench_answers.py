"""The answer checks of ``simeval bench quality``: does a pass mean a right answer?

- Judged answers (the ``qa-dev`` layout: JSON lines with ``input``, ``output``, ``reference``
  (the gold answers, a list), ``correct`` (the people's verdict) and ``system``): the accuracy
  of pass/fail at 0.80 against the verdict, overall and per system, with each system's pass
  rate beside the share people judged right; the standard lexical match (a normalised gold
  answer inside the normalised answer) measured in the same run as the named baseline.
- Contradictions (SICK's entailment labels): the share of CONTRADICTION pairs that pass at
  0.80, beside the share of ENTAILMENT pairs rated 4 or more.
- Padding (graded answers with their question): every wrong answer (grade 2.5 of 5 or less)
  padded with ten answers to other questions (a fixed seed): the share whose score rose, and
  the pass rate before and after.
"""

from __future__ import annotations

import json
import random
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from simeval.errors import InvalidInput
from simeval.scoring.scorer import Scorer

THRESHOLD = 0.80
WRONG_GRADE = 2.5  # a graded answer at or below this is wrong (of 5)
PADDING = 10  # answers to other questions appended to a wrong one
PADDING_SEED = 29
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


@dataclass
class Judged:
    """A file of answers judged right or wrong by people."""

    name: str
    inputs: list[str]
    outputs: list[str]
    references: list[list[str]]
    correct: list[bool]
    systems: list[str]


def load_judged(root: Path) -> list[Judged]:
    """The ``*.jsonl`` files of judged answers in a data directory (``qa-dev`` layout)."""
    out = []
    for path in sorted(root.glob("*.jsonl")):
        rows = Judged(path.stem, [], [], [], [], [])
        with path.open(encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    refs = row["reference"]
                    refs = [refs] if isinstance(refs, str) else [str(r) for r in refs]
                    rows.inputs.append(str(row["input"]))
                    rows.outputs.append(str(row["output"]))
                    rows.references.append([r for r in refs if r.strip()] or [""])
                    rows.correct.append(bool(row["correct"]))
                    rows.systems.append(str(row.get("system", "")))
                except (ValueError, KeyError, TypeError) as exc:
                    raise InvalidInput(f"{path} line {n}: not a judged answer ({exc})") from None
        out.append(rows)
    return out


def normalised(text: str) -> str:
    """The SQuAD normalisation: lower case, no punctuation, no articles, single spaces."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split())


def lexical_match(output: str, references: Sequence[str]) -> bool:
    """The lexical baseline: a normalised gold answer inside the normalised answer."""
    answer = f" {normalised(output)} "
    return any(g and f" {g} " in answer for g in map(normalised, references))


def judged_report(scorer: Scorer, rows: Judged) -> dict[str, object]:
    """Accuracy of pass/fail at 0.80 against the people's verdict, overall and per system,
    each with its pass rate and the share judged right; the lexical baseline's accuracy."""
    groups: dict[str, list[tuple[bool, bool, bool]]] = {"all": []}
    for q, o, refs, ok, system in zip(
        rows.inputs, rows.outputs, rows.references, rows.correct, rows.systems, strict=True
    ):
        passed = bool(o.strip()) and all(r.strip() for r in refs)
        passed = passed and scorer.score(o, refs, q) >= THRESHOLD
        item = (passed, ok, lexical_match(o, refs))
        groups["all"].append(item)
        groups.setdefault(system, []).append(item)
    out: dict[str, dict[str, float]] = {}
    for name, items in groups.items():
        n = len(items)
        out[name] = {
            "answers": n,
            "accuracy": sum(p == ok for p, ok, _ in items) / n,
            "pass_rate": sum(p for p, _, _ in items) / n,
            "right_rate": sum(ok for _, ok, _ in items) / n,
            "lexical_accuracy": sum(lex == ok for _, ok, lex in items) / n,
        }
        out[name]["gap"] = out[name]["pass_rate"] - out[name]["right_rate"]
    return {"answers": len(groups["all"]), "systems": out}


def entailment_report(
    scorer: Scorer,
    a: Sequence[str],
    b: Sequence[str],
    grades: Sequence[float],
    labels: Sequence[str],
) -> dict[str, int | float | None]:
    """SICK: the share of CONTRADICTION pairs passing at 0.80, and of ENTAILMENT pairs rated
    4 or more."""
    contra = [
        scorer.score(x, y) >= THRESHOLD
        for x, y, lab in zip(a, b, labels, strict=False)
        if lab == "CONTRADICTION"
    ]
    entail = [
        scorer.score(x, y) >= THRESHOLD
        for x, y, g, lab in zip(a, b, grades, labels, strict=True)
        if lab == "ENTAILMENT" and g >= 4.0
    ]
    return {
        "contradictions": len(contra),
        "contradictions_pass": sum(contra) / len(contra) if contra else None,
        "entailments_rated_4": len(entail),
        "entailments_pass": sum(entail) / len(entail) if entail else None,
    }


def padding_report(
    scorer: Scorer,
    outputs: Sequence[str],
    references: Sequence[str],
    questions: Sequence[str],
    grades: Sequence[float],
) -> dict[str, int | float]:
    """Every wrong answer padded with ``PADDING`` answers to other questions (seeded): the
    share whose score rose, and the pass rate at 0.80 before and after."""
    rng = random.Random(PADDING_SEED)
    rows = list(zip(outputs, references, questions, grades, strict=True))
    raised = before = after = n = 0
    for out, ref, q, grade in rows:
        if grade > WRONG_GRADE or not out.strip():
            continue
        others = [o for o, _, q2, _ in rows if q2 != q and o.strip()]
        padded = " ".join([out, *rng.sample(others, min(PADDING, len(others)))])
        s0, s1 = scorer.score(out, ref, q), scorer.score(padded, ref, q)
        n += 1
        raised += s1 > s0
        before += s0 >= THRESHOLD
        after += s1 >= THRESHOLD
    if not n:
        return {"wrong_answers": 0}
    return {
        "wrong_answers": n,
        "raised": raised / n,
        "pass_before": before / n,
        "pass_after": after / n,
    }
