"""Benchmarks behind ``simeval bench``: agreement with people, and speed against scikit-learn.

Quality reads the ``sts-dev`` layout (SemEval STS ``20*.tsv``, SICK ``sick.*.txt``, MSRP
``msrp.*.tsv``), the ``cjk-dev`` layout (``zh-*.tsv``, ``ja-*.tsv``, ``ko-*.tsv``: score, two
sentences; LCQMC's 0/1 labels as a pass/fail set) and the ``answers-dev`` layout (``*.csv`` of
graded answers with their question, scored with the question and without) and the ``qa-dev``
layout (``*.jsonl`` of model answers judged right or wrong: ``simeval.scoring.bench_answers``,
with SICK's contradictions and the padding check), and compares
configurations side by side in one run. Speed times simeval and
its baselines in the same process, on the same texts, and reports ratios: absolute times on a
shared machine are noise, ratios measured together are not.
"""

from __future__ import annotations

import csv
import gc
import itertools
import random
import re
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simeval.errors import InvalidInput
from simeval.scoring import bench_answers
from simeval.scoring.batch import iter_scores
from simeval.scoring.calibrate import classify as _classify
from simeval.scoring.calibrate import ranks, roc_auc, sweep
from simeval.scoring.scorer import PREVIOUS_DEFAULTS, RELEASE_0_1_DEFAULTS, Scorer, get_scorer

# The configurations compared by `bench quality`: the default; the previous default (before
# CJK characters, symbols and "n't" were terms, and before the input and negation counted);
# and the naive baseline a hand-written TF-IDF gives (IDF from the pair, no stemming, raw tf).
CONFIGS: dict[str, Mapping[str, object]] = {
    "default": {},
    # 0.1.0's default (its curve with the length rule, no answer reading, no vetoes)
    "0.1.0": RELEASE_0_1_DEFAULTS,
    # the default's raw cosine: what the bands scale maps (docs/scores.md "The scale: bands")
    "cosine": {"scale": "cosine"},
    "previous": PREVIOUS_DEFAULTS,
    "pair": {"idf": "pair", "stemming": False, "prefix": 0, "sublinear_tf": False},
}
KINDS_POOLED = ("sts",)
SAME_GRADE = 4.0  # "same content": rated 4 or more of 5 (a graded answer given 4 of 5)
BAND_EDGES = (0.70, 0.80, 0.90)  # the strictness bands' thresholds (options.STRICTNESS_BANDS)
BAND_NAMES = ("< 0.70", "0.70-0.79", "0.80-0.89", "0.90+")


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
    labels: list[str] | None = None  # SICK's entailment judgement per pair


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
        il = head.index("entailment_judgment") if "entailment_judgment" in head else None
        rows = [r for r in rows[1:] if len(r) > max(ia, ib, ig, il or 0)]
        out.append(
            Pairs(
                path.stem,
                "sick",
                [float(r[ig]) for r in rows],
                [r[ia] for r in rows],
                [r[ib] for r in rows],
                labels=[r[il] for r in rows] if il is not None else None,
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
    if not out and not list(root.glob("*.jsonl")):
        raise InvalidInput(
            f"no benchmark files in {directory} (STS 20*.tsv, sick.*.txt, msrp.*.tsv, "
            "zh-/ja-/ko-*.tsv, graded answers *.csv, judged answers *.jsonl)"
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


def same_content(ds: Pairs) -> tuple[list[bool], str]:
    """Which pairs of a file people judged "same content", and how that was read: a 0/1
    file's label; a grade of ``SAME_GRADE`` or more of 5 otherwise (STS, SICK, the graded CJK
    files, graded answers)."""
    if ds.kind in ("msrp", "binary"):
        return [g >= 0.5 for g in ds.gold], "labelled 1 (paraphrase / same intent)"
    return [g >= SAME_GRADE for g in ds.gold], f"rated >= {SAME_GRADE:g} of 5"


def at_default(
    scores: Sequence[float], gold: Sequence[float], same: Sequence[bool], label: str
) -> dict[str, Any]:
    """How the default threshold 0.80 ("Strict: same content") agrees with people: the share
    of "same content" pairs that pass, of the others that pass, balanced accuracy (their
    mean of pass and fail rates), accuracy and ROC AUC; and the mean human grade of the pairs
    in each strictness band (``BAND_NAMES``, lowest first: it should rise band by band)."""
    passed = [x >= 0.80 for x in scores]
    pos = [p for p, y in zip(passed, same, strict=True) if y]
    neg = [p for p, y in zip(passed, same, strict=True) if not y]
    pass_same = sum(pos) / len(pos) if pos else float("nan")
    pass_other = sum(neg) / len(neg) if neg else float("nan")
    bands: list[list[float]] = [[] for _ in BAND_NAMES]
    for x, g in zip(scores, gold, strict=True):
        bands[sum(x >= e for e in BAND_EDGES)].append(g)
    means = [statistics.fmean(b) if b else None for b in bands]
    filled = [m for m in means if m is not None]
    return {
        "same_content": label,
        "positives": len(pos),
        "pass_same": pass_same,
        "pass_other": pass_other,
        "balanced_accuracy": 0.5 * (pass_same + 1.0 - pass_other),
        "accuracy": sum(p == y for p, y in zip(passed, same, strict=True)) / len(passed),
        "roc_auc": roc_auc(scores, [1.0 if y else 0.0 for y in same]) if pos and neg else None,
        "band_mean_grade": dict(zip(BAND_NAMES, means, strict=True)),
        "band_pairs": dict(zip(BAND_NAMES, map(len, bands), strict=True)),
        "band_means_rising": all(a < b for a, b in itertools.pairwise(filled)),
    }


def _scores(scorer: Scorer, ds: Pairs, with_input: bool) -> list[float]:
    inputs = ds.inputs if with_input and ds.inputs else [None] * len(ds.a)
    return [
        scorer.score(x, y, q) if x.strip() and y.strip() else 0.0
        for x, y, q in zip(ds.a, ds.b, inputs, strict=True)
    ]


def quality(
    directory: str | Path | Sequence[str | Path],
    configs: Mapping[str, Mapping[str, object]] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Agreement of each configuration with human judgements, per file and pooled: Pearson
    and Spearman (graded files), ROC AUC and the best cuts (0/1 files), and for every file
    ``at_0.80`` (``at_default``: the default threshold against "same content").

    ``directory``: one data directory or several (their files are reported together)."""
    dirs = [directory] if isinstance(directory, str | Path) else list(directory)
    data = [ds for d in dirs for ds in load_dataset(d)]
    judged = [j for d in dirs for j in bench_answers.load_judged(Path(d))]
    configs = configs or CONFIGS
    report: dict[str, Any] = {"configs": {}, "options": {}}
    for name, opts in configs.items():
        scorer = get_scorer(**opts)
        report["options"][name] = {**scorer.describe(), "fingerprint": scorer.fingerprint}
        files: dict[str, Any] = {}
        pooled_s: list[float] = []
        pooled_g: list[float] = []
        pooled_y: list[bool] = []
        for ds in data:
            if progress:
                progress(f"{name}: {ds.name}")
            s = _scores(scorer, ds, with_input=True)
            entry: dict[str, Any] = {"pairs": len(s)}
            same, label = same_content(ds)
            if ds.kind == "answers":
                entry["pearson"] = pearson(s, ds.gold)
                entry["spearman"] = spearman(s, ds.gold)
                entry["pearson_no_input"] = pearson(_scores(scorer, ds, False), ds.gold)
                if ds.inputs:
                    entry["padding"] = bench_answers.padding_report(
                        scorer, ds.a, ds.b, ds.inputs, ds.gold
                    )
            elif ds.kind in ("msrp", "binary"):
                entry["roc_auc"] = roc_auc(s, ds.gold)
                entry["best_accuracy"] = best_threshold(s, ds.gold, "accuracy")
                entry["best_f1"] = best_threshold(s, ds.gold, "f1")
                entry["at_0.80"] = classify(s, ds.gold, 0.80)
            else:
                entry["pearson"] = pearson(s, ds.gold)
                entry["spearman"] = spearman(s, ds.gold)
                if ds.labels:
                    entry["entailment"] = bench_answers.entailment_report(
                        scorer, ds.a, ds.b, ds.gold, ds.labels
                    )
                if ds.kind in KINDS_POOLED:
                    pooled_s += s
                    pooled_g += ds.gold
                    pooled_y += same
            # 0/1 files: classify's precision, recall and F1 beside the shares
            entry["at_0.80"] = {**entry.get("at_0.80", {}), **at_default(s, ds.gold, same, label)}
            files[ds.name] = entry
        report["configs"][name] = {"files": files}
        if judged:
            report["configs"][name]["judged"] = {}
        for j in judged:
            if progress:
                progress(f"{name}: {j.name}")
            report["configs"][name]["judged"][j.name] = bench_answers.judged_report(scorer, j)
        if pooled_s:
            report["configs"][name]["sts_pooled"] = {
                "pairs": len(pooled_s),
                "pearson": pearson(pooled_s, pooled_g),
                "spearman": spearman(pooled_s, pooled_g),
                "at_0.80": at_default(
                    pooled_s, pooled_g, pooled_y, f"rated >= {SAME_GRADE:g} of 5"
                ),
            }
    return report


# -- speed ------------------------------------------------------------------------------------
SKLEARN_TOKENS = re.compile(r"(?u)\b\w\w+\b")


def synthetic_texts(n: int, words: int = 100, seed: int = 7) -> list[str]:
    """``n`` texts of ``words`` words drawn by frequency from the English word list, so the
    vocabulary has a natural long tail (a fixed seed: every run times the same texts)."""
    import wordfreq

    vocab = wordfreq.top_n_list("en", 20000)
    # cumulative weights once (choices() would sum all 20,000 per text): the same draws
    cum = list(itertools.accumulate(1.0 / (i + 10) for i in range(len(vocab))))
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        ws = rng.choices(vocab, cum_weights=cum, k=words)
        out.append(" ".join(ws).capitalize() + ".")
    return out


def synthetic_chinese(n: int, chars: int = 100, seed: int = 7) -> list[str]:
    """``n`` Chinese texts of ``chars`` characters, words drawn by frequency from the Chinese
    word list (a fixed seed), with a comma every ~12 characters and a full stop at the end."""
    import wordfreq

    vocab = wordfreq.top_n_list("zh", 20000)
    cum = list(itertools.accumulate(1.0 / (i + 10) for i in range(len(vocab))))
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        text = ""
        while len(text) < chars - 1:
            for word in rng.choices(vocab, cum_weights=cum, k=chars):
                text += word + ("，" if rng.random() < 0.08 else "")
        out.append(text[: chars - 1] + "。")
    return out


def with_quotes(text: str, curly: bool, every: int = 12) -> str:
    """``text`` with every ``every``-th word quoted and one word in ten given an apostrophe
    ("word's"): straight ASCII quotes, or typographic ones (“word”, word’s)."""
    open_q, close_q, apos = ("“", "”", "’") if curly else ('"', '"', "'")
    words = text.split(" ")
    for i in range(0, len(words), every):
        words[i] = f"{open_q}{words[i]}{close_q}"
    for i in range(5, len(words), 10):
        words[i] += f"{apos}s"
    return " ".join(words)


def median_rounds(
    fns: Mapping[str, Callable[[int], object]], n: int, rounds: int
) -> dict[str, float]:
    """Median seconds per call of each ``fn(i)``, i in range(n), over ``rounds`` rounds. Each
    round runs every fn once, in alternating order, so a slow patch of a shared machine falls
    on all of them alike; the median ignores the rounds it spoiled."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    names = list(fns)
    for r in range(rounds):
        for k in names if r % 2 == 0 else names[::-1]:
            fn = fns[k]
            gc.collect()
            t = time.perf_counter()
            for i in range(n):
                fn(i)
            times[k].append((time.perf_counter() - t) / n)
    return {k: statistics.median(v) for k, v in times.items()}


class _Cold:
    """fn(i) scoring pair i with a scorer whose token cache is empty at i = 0: a new one is
    made whenever a round starts, and the time that takes is kept apart in ``untimed``."""

    def __init__(self, options: Mapping[str, object], left: list[str], right: list[str]):
        self.options, self.left, self.right = options, left, right
        self.scorer = Scorer(**options)
        self.untimed = 0.0

    def __call__(self, i: int) -> float:
        if i == 0:
            t = time.perf_counter()
            self.scorer = Scorer(**self.options)
            self.untimed += time.perf_counter() - t
        return self.scorer.score(self.left[i], self.right[i])


def speed(
    pairs: int = 100_000,
    single: int = 2000,
    workers: int | None = None,
    progress: Callable[[str], None] | None = None,
    rounds: int = 9,
) -> dict[str, Any]:
    """Latency of one ``score`` call and batch throughput, with baselines from the same run.

    Latencies are medians of interleaved rounds (``median_rounds``): the default beside the
    previous default options, warm (token cache filled) and cold (a new scorer each round);
    100-word texts with typographic quotes beside the same with ASCII quotes; a 100-character
    Chinese pair beside the 100-word English one; and a scorer that has scored a 1 MB text
    beside one that has not; the default (the bands scale) beside ``scale=cosine``."""
    try:
        import sklearn.feature_extraction.text  # noqa: F401
    except ImportError:
        raise InvalidInput("bench speed needs scikit-learn: pip install 'simeval[bench]'") from None
    say = progress or (lambda _m: None)
    report = _latency(single, rounds, say)
    report["batch"] = _batch(pairs, workers, say)
    say("memory: score_many streamed at two sizes")
    small, large = max(pairs // 10, 1000), pairs
    report["memory"] = {
        "pairs_small": small,
        "pairs_large": large,
        "peak_rss_mb_small": stream_peak_rss_mb(small, workers),
        "peak_rss_mb_large": stream_peak_rss_mb(large, workers),
    }
    return report


def _latency(single: int, rounds: int, say: Callable[[str], None]) -> dict[str, Any]:
    """``speed``'s single-pair figures: latencies of interleaved rounds, and scikit-learn
    fitted per pair."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    texts = synthetic_texts(2 * single + 2)
    left, right = texts[0::2], texts[1::2]
    zh = synthetic_chinese(2 * single + 2)
    zl, zr = zh[0::2], zh[1::2]
    al = [with_quotes(t, curly=False) for t in left]
    ar = [with_quotes(t, curly=False) for t in right]
    cl = [with_quotes(t, curly=True) for t in left]
    cr = [with_quotes(t, curly=True) for t in right]
    scorer = Scorer()
    raw = Scorer(scale="cosine")  # the default's cosine: what the bands scale costs
    previous = Scorer(**PREVIOUS_DEFAULTS)
    after = Scorer()  # the same options; it scores a 1 MB text first
    big = " ".join(synthetic_texts(1400, seed=3))
    say(f"one text of {len(big) / 1e6:.1f} MB")
    after.score(big, left[0])
    for i in range(single):  # warm: the token cache is part of a running scorer
        for s in (scorer, raw, previous, after):
            s.score(left[i], right[i])
        scorer.score(zl[i], zr[i])
        scorer.score(al[i], ar[i])
        scorer.score(cl[i], cr[i])
    say("single pair: simeval, interleaved rounds")
    cold_default = _Cold({}, left, right)
    cold_previous = _Cold(PREVIOUS_DEFAULTS, left, right)
    warm = median_rounds(
        {
            "default": lambda i: scorer.score(left[i], right[i]),
            "cosine": lambda i: raw.score(left[i], right[i]),
            "previous": lambda i: previous.score(left[i], right[i]),
            "after_1mb": lambda i: after.score(left[i], right[i]),
            "ascii_quotes": lambda i: scorer.score(al[i], ar[i]),
            "curly_quotes": lambda i: scorer.score(cl[i], cr[i]),
            "chinese_100_chars": lambda i: scorer.score(zl[i], zr[i]),
            "cold_default": cold_default,
            "cold_previous": cold_previous,
            "tokenize_only": lambda i: (
                SKLEARN_TOKENS.findall(left[i].lower()),
                SKLEARN_TOKENS.findall(right[i].lower()),
            ),
        },
        single,
        rounds,
    )
    # the scorers made at the start of each cold round are not part of the time per pair
    warm["cold_default"] -= cold_default.untimed / (rounds * single)
    warm["cold_previous"] -= cold_previous.untimed / (rounds * single)
    say("single pair: scikit-learn fitted per pair")
    n_sk = max(50, single // 10)

    def sk_pair(i: int) -> float:
        m = TfidfVectorizer().fit_transform([left[i], right[i]])
        return float(m[0].multiply(m[1]).sum())

    t_sk = median_rounds({"sk": sk_pair}, n_sk, 3)["sk"]
    t_ours = warm["default"]
    us = {k: v * 1e6 for k, v in warm.items()}
    report: dict[str, Any] = {
        "words_per_text": 100,
        "single": {
            "simeval_us": t_ours * 1e6,
            "tokenize_only_us": warm["tokenize_only"] * 1e6,
            "sklearn_per_pair_us": t_sk * 1e6,
            "speedup_vs_sklearn_per_pair": t_sk / t_ours,
            "ratio_to_tokenize_only": t_ours / warm["tokenize_only"],
        },
        "latency": {
            "rounds": rounds,
            "pairs_per_round": single,
            "statistic": "median of interleaved rounds",
            "us": us,
            "ratios": {
                # targets: <= 1.05, <= 1.10, <= 1.10, <= 1.10, <= 1.30, <= 2.0
                "default_vs_cosine_scale": warm["default"] / warm["cosine"],
                "default_vs_previous_warm": warm["default"] / warm["previous"],
                "default_vs_previous_cold": warm["cold_default"] / warm["cold_previous"],
                "after_1mb_vs_before": warm["after_1mb"] / warm["default"],
                "curly_vs_ascii_quotes": warm["curly_quotes"] / warm["ascii_quotes"],
                "chinese_100_chars_vs_english_100_words": warm["chinese_100_chars"]
                / warm["default"],
            },
        },
    }
    return report


def _batch(pairs: int, workers: int | None, say: Callable[[str], None]) -> dict[str, Any]:
    """``speed``'s batch throughput: ``iter_scores`` beside scikit-learn's batch pipeline."""
    # a pool of distinct texts, paired in a rotating pattern so every pair is new
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
    return {
        "pairs": count,
        "workers": workers or "all cores",
        "simeval_pairs_per_s": count / t_many,
        "sklearn_batch_pairs_per_s": pairs / t_skb,
        "throughput_ratio_vs_sklearn_batch": t_skb / t_many,
    }


_STREAM = """
import resource, sys, simeval
from simeval.scoring.bench import synthetic_texts
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
