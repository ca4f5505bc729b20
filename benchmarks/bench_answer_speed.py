"""Benchmark: what the answer reading and the vetoes (issue 29) cost the hot paths, same run.

1. ``score`` of one pair, against rapidfuzz's ``fuzz.token_set_ratio`` on the same pairs (the
   library people reach for to compare two strings), at 12, 100 and 2,000 words, without and
   with a question, on two kinds of pairs: unrelated texts (drawn by frequency from the English
   word list) and close ones (the reference with two of its words changed, so the score passes
   the veto floor and the text checks run). ``warm``: one scorer that has scored these very
   pairs; ``new``: a scorer that has seen the references and their words, each output a text
   it has not seen (what a capture or a data set's row is: a new output, known words); ``cold``:
   a fresh scorer and texts (nothing cached but the background IDF table). Each side of a
   ``new`` or ``cold`` round scores outputs of its own, so no side reads another's cache.
2. One capture scored against 1,000 evals (``EvalSet.score``, what ``POST /api/capture`` does
   with 1,000 active evals), today's default beside 0.1.0's (``RELEASE_0_1_DEFAULTS``: no
   answer reading, no vetoes), with and without a question.

Every figure is the median of interleaved rounds (the sides alternate their order), reported
as a ratio against its named baseline measured in the same round, with the load average.

    .venv/bin/python benchmarks/bench_answer_speed.py               # 7 rounds
    .venv/bin/python benchmarks/bench_answer_speed.py --rounds 5 --json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from rapidfuzz import fuzz

from simeval.scoring.bench import synthetic_texts
from simeval.scoring.evalset import EvalSet, EvalSpec
from simeval.scoring.options import RELEASE_0_1_DEFAULTS
from simeval.scoring.scorer import Scorer

QUESTION = "What does the report say about the committee and its decision this year?"


def close_copy(text: str, rng: random.Random, vocab: list[str]) -> str:
    """The text with two of its words replaced: a close pair, above the veto floor."""
    words = text.split()
    for _ in range(2):
        words[rng.randrange(len(words))] = rng.choice(vocab)
    return " ".join(words)


def pairs_of(words: int, n: int, close: bool, seed: int) -> list[tuple[str, str]]:
    texts = synthetic_texts(2 * n, words, seed=seed)
    if not close:
        return list(zip(texts[:n], texts[n:], strict=True))
    rng = random.Random(seed)
    vocab = " ".join(texts[n:]).split()
    return [(close_copy(t, rng, vocab), t) for t in texts[:n]]


def per_call(fn: Callable[[str, str], Any], pairs: list[tuple[str, str]]) -> float:
    """Seconds per call of ``fn`` over the pairs (one pass)."""
    start = time.perf_counter()
    for a, b in pairs:
        fn(a, b)
    return (time.perf_counter() - start) / len(pairs)


def fresh_outputs(pairs: list[tuple[str, str]], close: bool, seed: int) -> list[tuple[str, str]]:
    """The pairs with outputs no scorer has seen, of the same words: a close output with two
    other words changed, an unrelated one with its words in another order."""
    rng = random.Random(seed)
    vocab = " ".join(r for _, r in pairs).split()
    out = []
    for a, b in pairs:
        if close:
            out.append((close_copy(b, rng, vocab), b))
        else:
            words = a.split()
            rng.shuffle(words)
            out.append((" ".join(words), b))
    return out


def pair_round(words: int, n: int, close: bool, mode: str, seed: int) -> dict[str, float]:
    pairs = pairs_of(words, n, close, seed)
    scorers: dict[str, Scorer] = {}

    def scorer_for(name: str) -> Scorer:
        # warm and new: one scorer per option set, warmed on the pairs; cold: one per side
        options = RELEASE_0_1_DEFAULTS if name.startswith("0.1.0") else {}
        key = name if mode == "cold" else name.split("+")[0]
        if key not in scorers:
            scorers[key] = Scorer(**options)
            if mode != "cold":
                for a, b in pairs:
                    scorers[key].score(a, b)
                    scorers[key].score(a, b, QUESTION)
        return scorers[key]

    def call(name: str) -> Callable[[str, str], Any]:
        if name == "rapidfuzz":
            return fuzz.token_set_ratio
        sc = scorer_for(name)
        if name.endswith("+question"):
            return lambda a, b: sc.score(a, b, QUESTION)
        return sc.score

    order = ["rapidfuzz", "simeval", "simeval+question", "0.1.0", "0.1.0+question"]
    if seed % 2:
        order.reverse()
    out = {}
    for k, name in enumerate(order):
        fn = call(name)  # scorers are made and warmed before the clock starts
        side = pairs if mode == "warm" else fresh_outputs(pairs, close, seed * 10 + k)
        out[name] = per_call(fn, side)
    return out


def capture_round(evals: int, seed: int) -> dict[str, float]:
    refs = synthetic_texts(evals, 20, seed=seed)
    outputs = [
        close_copy(r, random.Random(seed + i), refs[0].split()) for i, r in enumerate(refs[:50])
    ]
    sets = {
        "0.1.0": EvalSet(
            [
                EvalSpec(i, f"e{i}", 1, (r,), 0.8, None, tuple(RELEASE_0_1_DEFAULTS.items()))
                for i, r in enumerate(refs)
            ]
        ),
        "default": EvalSet([EvalSpec(i, f"e{i}", 1, (r,), 0.8) for i, r in enumerate(refs)]),
    }
    out: dict[str, float] = {}
    order = list(sets) if seed % 2 == 0 else list(reversed(sets))
    for name in order:
        es = sets[name]
        for q, label in ((None, ""), (QUESTION, "+question")):
            es.score(outputs[0], q)  # warm: the prepared index, the scorer's caches
            start = time.perf_counter()
            for o in outputs:
                es.score(o, q)
            out[name + label] = (time.perf_counter() - start) / len(outputs)
    return out


def median_ratio(rounds: list[dict[str, float]], num: str, den: str) -> float:
    return statistics.median(r[den] / r[num] for r in rounds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--pairs", type=int, default=2000, help="pairs per round at 12 words")
    ap.add_argument("--evals", type=int, default=1000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    report: dict[str, Any] = {"rounds": args.rounds, "pairs": {}, "capture": {}}
    for words, n in ((12, args.pairs), (100, max(args.pairs // 5, 50)), (2000, 40)):
        for close in (False, True):
            for mode in ("warm", "new", "cold"):
                rounds, loads = [], []
                for r in range(args.rounds):
                    rounds.append(pair_round(words, n, close, mode, seed=1000 * r + words))
                    loads.append(os.getloadavg()[0])
                kind = "close" if close else "unrelated"
                key = f"{words} words, {kind}, {mode}"
                report["pairs"][key] = {
                    "simeval_us": statistics.median(x["simeval"] for x in rounds) * 1e6,
                    "simeval_question_us": statistics.median(x["simeval+question"] for x in rounds)
                    * 1e6,
                    "rapidfuzz_us": statistics.median(x["rapidfuzz"] for x in rounds) * 1e6,
                    # > 1: simeval is faster than rapidfuzz
                    "speed_vs_rapidfuzz": median_ratio(rounds, "simeval", "rapidfuzz"),
                    "speed_vs_rapidfuzz_with_question": median_ratio(
                        rounds, "simeval+question", "rapidfuzz"
                    ),
                    # > 1: slower than 0.1.0's options by this factor, in the same process
                    "cost_vs_0_1": statistics.median(x["simeval"] / x["0.1.0"] for x in rounds),
                    "cost_vs_0_1_with_question": statistics.median(
                        x["simeval+question"] / x["0.1.0+question"] for x in rounds
                    ),
                    "load_avg": statistics.median(loads),
                }
    rounds, loads = [], []
    for r in range(args.rounds):
        rounds.append(capture_round(args.evals, seed=r))
        loads.append(os.getloadavg()[0])
    for label in ("", "+question"):
        report["capture"][f"{args.evals} evals{label or ', no question'}"] = {
            "default_ms": statistics.median(x["default" + label] for x in rounds) * 1e3,
            "release_0_1_ms": statistics.median(x["0.1.0" + label] for x in rounds) * 1e3,
            # > 1: today's default is slower than 0.1.0's by this factor
            "cost_vs_0_1": statistics.median(
                x["default" + label] / x["0.1.0" + label] for x in rounds
            ),
            "load_avg": statistics.median(loads),
        }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{args.rounds} interleaved rounds, medians; ratio > 1: simeval faster than rapidfuzz")
    for key, e in report["pairs"].items():
        print(
            f"{key:34s} simeval {e['simeval_us']:8.1f} us ({e['speed_vs_rapidfuzz']:.2f}x), "
            f"with question {e['simeval_question_us']:8.1f} us "
            f"({e['speed_vs_rapidfuzz_with_question']:.2f}x); "
            f"rapidfuzz {e['rapidfuzz_us']:8.1f} us; "
            f"vs 0.1.0 x{e['cost_vs_0_1']:.2f} / x{e['cost_vs_0_1_with_question']:.2f}; "
            f"load {e['load_avg']:.2f}"
        )
    for key, e in report["capture"].items():
        print(
            f"capture vs {key}: default {e['default_ms']:.3f} ms, "
            f"0.1.0 {e['release_0_1_ms']:.3f} ms (x{e['cost_vs_0_1']:.2f}); "
            f"load {e['load_avg']:.2f}"
        )


if __name__ == "__main__":
    main()
