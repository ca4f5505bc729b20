"""Benchmarks behind ``simeval bench``: agreement with people, and speed against scikit-learn.

Quality reads the ``sts-dev`` layout (SemEval STS ``20*.tsv``, SICK ``sick.*.txt``, MSRP
``msrp.*.tsv``), the ``cjk-dev`` layout (``zh-*.tsv``, ``ja-*.tsv``, ``ko-*.tsv``: score, two
sentences; LCQMC's 0/1 labels as a pass/fail set) and the ``answers-dev`` layout (``*.csv`` of
graded answers with their question, scored with the question and without), and compares
configurations side by side in one run. Speed times simeval and
its baselines in the same process, on the same texts, and reports ratios: absolute times on a
shared machine are noise, ratios measured together are not.
"""

from __future__ import annotations

import csv
import gc
import math
import random
import re
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simeval.calibrate import classify as _classify
from simeval.calibrate import ranks, roc_auc, sweep
from simeval.errors import InvalidInput
from simeval.scorer import PREVIOUS_DEFAULTS, Scorer, get_scorer, iter_scores

# The configurations compared by `bench quality`: the default; the previous default (before
# CJK characters, symbols and "n't" were terms, and before the input and negation counted);
# and the naive baseline a hand-written TF-IDF gives (IDF from the pair, no stemming, raw tf).
CONFIGS: dict[str, dict[str, Any]] = {
    "default": {},
    "previous": PREVIOUS_DEFAULTS,
    "pair": {"idf": "pair", "stemming": False, "prefix": 0, "sublinear_tf": False},
}
KINDS_POOLED = ("sts",)


@dataclass
class Pairs:
    name: str
    # "sts" (graded 0-5, pooled), "sick" (graded 1-5), "graded" (0-5, not pooled: CJK),
    # "msrp" or "binary" (0/1 labels), "answers" (graded answers with their question)
    kind: str
    gold: list[float]
    a: list[str]
    b: list[str]
    inputs: list[str] | None = None


def _read_lines(path: Path) -> Iterator[list[str]]:
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            yield line.rstrip("\n").lstrip("\ufeff").split("\t")


def load_dataset(directory: str | Path) -> list[Pairs]:
    """Every labelled file of an ``sts-dev`` directory (tab-separated, no CSV quoting)."""
    root = Path(directory)
    if not root.is_dir():
        raise InvalidInput(f"data directory not found: {directory}")
    out: list[Pairs] = []
    for path in sorted(root.glob("20*.tsv")):
        gold, a, b = [], [], []
        for cols in _read_lines(path):
            if len(cols) >= 3 and cols[0].strip():
                gold.append(float(cols[0]))
                a.append(cols[1])
                b.append(cols[2])
        out.append(Pairs(path.stem, "sts", gold, a, b))
    for path in sorted(root.glob("sick.*.txt")):
        rows = list(_read_lines(path))
        head = rows[0]
        ia, ib, ig = (
            head.index("sentence_A"),
            head.index("sentence_B"),
            head.index("relatedness_score"),
        )
        rows = [r for r in rows[1:] if len(r) > max(ia, ib, ig)]
        out.append(
            Pairs(
                path.stem,
                "sick",
                [float(r[ig]) for r in rows],
                [r[ia] for r in rows],
                [r[ib] for r in rows],
            )
        )
    for path in sorted(root.glob("msrp.*.tsv")):
        rows = [r for r in list(_read_lines(path))[1:] if len(r) >= 5]
        out.append(
            Pairs(
                path.stem,
                "msrp",
                [float(r[0]) for r in rows],
                [r[3] for r in rows],
                [r[4] for r in rows],
            )
        )
    for path in sorted(p for lang in ("zh", "ja", "ko") for p in root.glob(f"{lang}-*.tsv")):
        gold, a, b = [], [], []
        for cols in _read_lines(path):
            if len(cols) >= 3 and cols[0].strip():
                gold.append(float(cols[0]))
                a.append(cols[1])
                b.append(cols[2])
        binary = set(gold) <= {0.0, 1.0}
        out.append(Pairs(path.stem, "binary" if binary else "graded", gold, a, b))
    for path in sorted(root.glob("*.csv")):
        with path.open(encoding="utf-8", errors="replace", newline="") as fh:
            answers = list(csv.DictReader(fh))
        need = {"question", "desired_answer", "student_answer", "score_avg"}
        if not answers or not need <= set(answers[0]):
            continue
        out.append(
            Pairs(
                path.stem,
                "answers",
                [float(r["score_avg"]) for r in answers],
                [r["student_answer"] for r in answers],
                [r["desired_answer"] for r in answers],
                [r["question"] for r in answers],
            )
        )
    if not out:
        raise InvalidInput(
            f"no benchmark files in {directory} (STS 20*.tsv, sick.*.txt, msrp.*.tsv, "
            "zh-/ja-/ko-*.tsv, graded answers *.csv)"
        )
    return out


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    return statistics.correlation(x, y)


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    return statistics.correlation(ranks(x), ranks(y))


def classify(
    scores: Sequence[float], labels: Sequence[float], threshold: float
) -> dict[str, float]:
    """``calibrate.classify`` with 0/1 gold labels (a label of 0.5 or more is a pass)."""
    return _classify(scores, [y >= 0.5 for y in labels], threshold)


def best_threshold(
    scores: Sequence[float], labels: Sequence[float], by: str = "accuracy"
) -> dict[str, float]:
    """The threshold (one of the scores) that maximises ``by`` (accuracy or f1); on a tie the
    lowest such score."""
    points = sweep(scores, [y >= 0.5 for y in labels])
    return max(points, key=lambda p: (p[by], -p["threshold"]))


def _scores(scorer: Scorer, ds: Pairs, with_input: bool) -> list[float]:
    inputs = ds.inputs if with_input and ds.inputs else [None] * len(ds.a)
    return [
        scorer.score(x, y, q) if x.strip() and y.strip() else 0.0
        for x, y, q in zip(ds.a, ds.b, inputs, strict=True)
    ]


def quality(
    directory: str | Path | Sequence[str | Path],
    configs: dict[str, dict[str, Any]] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Agreement of each configuration with human judgements, per file and pooled.

    ``directory``: one data directory or several (their files are reported together)."""
    dirs = [directory] if isinstance(directory, str | Path) else list(directory)
    data = [ds for d in dirs for ds in load_dataset(d)]
    configs = configs or CONFIGS
    report: dict[str, Any] = {"configs": {}, "options": {}}
    for name, opts in configs.items():
        scorer = get_scorer(**opts)
        report["options"][name] = {**scorer.describe(), "fingerprint": scorer.fingerprint}
        files: dict[str, Any] = {}
        pooled_s: list[float] = []
        pooled_g: list[float] = []
        for ds in data:
            if progress:
                progress(f"{name}: {ds.name}")
            s = _scores(scorer, ds, with_input=True)
            entry: dict[str, Any] = {"pairs": len(s)}
            if ds.kind == "answers":
                entry["pearson"] = pearson(s, ds.gold)
                entry["spearman"] = spearman(s, ds.gold)
                entry["pearson_no_input"] = pearson(_scores(scorer, ds, False), ds.gold)
            elif ds.kind in ("msrp", "binary"):
                entry["roc_auc"] = roc_auc(s, ds.gold)
                entry["best_accuracy"] = best_threshold(s, ds.gold, "accuracy")
                entry["best_f1"] = best_threshold(s, ds.gold, "f1")
                entry["at_0.80"] = classify(s, ds.gold, 0.80)
            else:
                entry["pearson"] = pearson(s, ds.gold)
                entry["spearman"] = spearman(s, ds.gold)
                if ds.kind in KINDS_POOLED:
                    pooled_s += s
                    pooled_g += ds.gold
            files[ds.name] = entry
        report["configs"][name] = {"files": files}
        if pooled_s:
            report["configs"][name]["sts_pooled"] = {
                "pairs": len(pooled_s),
                "pearson": pearson(pooled_s, pooled_g),
                "spearman": spearman(pooled_s, pooled_g),
            }
    return report


# -- speed ------------------------------------------------------------------------------------
SKLEARN_TOKENS = re.compile(r"(?u)\b\w\w+\b")


def synthetic_texts(n: int, words: int = 100, seed: int = 7) -> list[str]:
    """``n`` texts of ``words`` words drawn by frequency from the English word list, so the
    vocabulary has a natural long tail (a fixed seed: every run times the same texts)."""
    import wordfreq

    vocab = wordfreq.top_n_list("en", 20000)
    weights = [1.0 / (i + 10) for i in range(len(vocab))]
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        ws = rng.choices(vocab, weights, k=words)
        out.append(" ".join(ws).capitalize() + ".")
    return out


def _per_call(fn: Callable[[int], Any], n: int, repeat: int = 5) -> float:
    """Best-of-``repeat`` seconds per call of fn(i) over i in range(n)."""
    best = math.inf
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        for i in range(n):
            fn(i)
        best = min(best, (time.perf_counter() - t) / n)
    return best


def speed(
    pairs: int = 100_000,
    single: int = 2000,
    workers: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Latency of one ``score`` call and batch throughput, with baselines from the same run."""
    try:
        from sklearn.feature_extraction.text import TfidfVectorizer
    except ImportError:
        raise InvalidInput("bench speed needs scikit-learn: pip install 'simeval[bench]'") from None
    say = progress or (lambda _m: None)
    texts = synthetic_texts(2 * single + 2)
    left, right = texts[0::2], texts[1::2]
    scorer = get_scorer()
    for i in range(single):  # warm: the token cache is part of a running scorer
        scorer.score(left[i], right[i])
    say("single pair: simeval")
    t_ours = _per_call(lambda i: scorer.score(left[i], right[i]), single)
    say("single pair: tokenising only")
    t_tok = _per_call(
        lambda i: (
            SKLEARN_TOKENS.findall(left[i].lower()),
            SKLEARN_TOKENS.findall(right[i].lower()),
        ),
        single,
    )
    say("single pair: scikit-learn fitted per pair")
    n_sk = max(50, single // 10)

    def sk_pair(i: int) -> float:
        m = TfidfVectorizer().fit_transform([left[i], right[i]])
        return float(m[0].multiply(m[1]).sum())

    t_sk = _per_call(sk_pair, n_sk, repeat=3)
    report: dict[str, Any] = {
        "words_per_text": 100,
        "single": {
            "simeval_us": t_ours * 1e6,
            "tokenize_only_us": t_tok * 1e6,
            "sklearn_per_pair_us": t_sk * 1e6,
            "speedup_vs_sklearn_per_pair": t_sk / t_ours,
            "ratio_to_tokenize_only": t_ours / t_tok,
        },
    }
    # Batch: a pool of distinct texts, paired in a rotating pattern so every pair is new.
    pool = synthetic_texts(20_000, seed=11)
    n_pool = len(pool)

    def outs() -> Iterator[str]:
        return (pool[i % n_pool] for i in range(pairs))

    def refs() -> Iterator[str]:
        return (pool[(i * 7 + 3) % n_pool] for i in range(pairs))

    say(f"batch: simeval score_many on {pairs:,} pairs")
    t = time.perf_counter()
    count = sum(1 for _ in iter_scores(outs(), refs(), workers=workers))
    t_many = time.perf_counter() - t
    say(f"batch: scikit-learn pipeline on {pairs:,} pairs")
    t = time.perf_counter()
    sk_batch(list(outs()), list(refs()))
    t_skb = time.perf_counter() - t
    report["batch"] = {
        "pairs": count,
        "workers": workers or "all cores",
        "simeval_pairs_per_s": count / t_many,
        "sklearn_batch_pairs_per_s": pairs / t_skb,
        "throughput_ratio_vs_sklearn_batch": t_skb / t_many,
    }
    say("memory: score_many streamed at two sizes")
    small, large = max(pairs // 10, 1000), pairs
    report["memory"] = {
        "pairs_small": small,
        "pairs_large": large,
        "peak_rss_mb_small": stream_peak_rss_mb(small, workers),
        "peak_rss_mb_large": stream_peak_rss_mb(large, workers),
    }
    return report


_STREAM = """
import resource, sys, simeval
from simeval.bench import synthetic_texts
n, workers = int(sys.argv[1]), (int(sys.argv[2]) or None)
pool = synthetic_texts(20000, seed=5)
outs = (pool[i % 20000] for i in range(n))
refs = (pool[(i * 7 + 3) % 20000] for i in range(n))
total = sum(simeval.iter_scores(outs, refs, workers=workers))
# ru_maxrss of this process also counts the image it was exec'd from (Linux carries the
# high-water mark across exec), so read the peak of this process's own memory when we can.
try:
    with open("/proc/self/status") as f:
        own = next(int(x.split()[1]) for x in f if x.startswith("VmHWM:"))
except (OSError, StopIteration):
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(max(own, kids) / 1024)
"""


def stream_peak_rss_mb(pairs: int, workers: int | None) -> float:
    """Peak resident memory (MB; the parent or the largest worker) of streaming ``pairs``
    generated pairs through ``iter_scores`` in a fresh process."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _STREAM, str(pairs), str(workers or 0)],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip())


def sk_batch(a: list[str], b: list[str]) -> list[float]:
    """scikit-learn's batch pipeline: fit once on all texts, transform, row-wise dot."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer().fit(a + b)
    xa, xb = vec.transform(a), vec.transform(b)
    return list(xa.multiply(xb).sum(axis=1).A1)
