"""Fit the calibrated score scale ``bands`` (issue 17) on the shared development data.

The scale maps the TF-IDF cosine ``c`` of a pair to a score through a fixed curve, piecewise
linear through five knots::

    (0, 0), (h*k70, 0.70), (h*k80, 0.80), (h*k90, 0.90), (1, 1)

``k70 < k80 < k90`` are cosines and ``h`` in (0, 1] a factor of the pair's shape (``h = 1`` in
the ``global`` form). For a fixed shape the score is continuous and strictly increasing in
``c``, with ``f(0) = 0`` and ``f(1) = 1`` exactly, so rank measures among pairs of one shape do
not change. A score reaches a band exactly when ``c >= h*k``; each ``k`` is chosen so that this
cut separates the human grades the band's words describe:

- 0.90, "equivalent": a sentence pair rated 4.6 or more of 5;
- 0.80, "same content": a sentence pair rated 4 or more; a graded answer given 4 or more of 5;
- 0.70, "roughly equivalent, some omissions": a sentence pair rated 3 or more.

Fitted on the shared dev folders only, read where they lie: STS 2012-2014 (its files pooled, as
the targets are), the graded answers (``*.csv``, scored with their question as ``input`` as
``simeval bench quality`` does; they count for 0.80 only, the grade their words name) and the
graded CJK files (``zh-stsb``, ``ja-jsts``, ``ko-korsts``). Reported, never fitted: MSRP (a
paraphrase check, accuracy at 0.80), LCQMC (0/1 "same intent"), SICK, each STS file alone, and
every file of a ``--heldout`` directory (any layout ``bench.load_dataset`` reads).

Weighting: a knot is the cosine with the best *mean over files of the balanced accuracy* (the
mean of the share of positives that pass and the share of negatives that fail) at its band's
cut, on a grid of cosines 0.2000-0.9500 in steps of 0.0025 (on a plateau, its middle). Each file
counts once whatever its size, and balanced accuracy does not depend on a file's share of
positives; STS 2012-2014 counts as one file (9,092 pairs). A form's parameters are chosen on a
grid by the mean of that objective over the three bands; objectives within 0.0001 of the best
count as a tie (less than one answer in 1,149 crossing a cut), and of the tied shapes the one
that moves the knots least wins (so a shape no file asks for stays at ``h = 1``).

Forms (``n_out``, ``n_ref``: the distinct terms of each text, i.e. the records of
``Scorer.vector``; ``cjk``: half or more of the reference's terms are Han, kana or Hangul):

- ``global``: ``h = 1``; three floats.
- ``length``: ``h = max(floor, min(1, t * n_ref / n_out) ** a)``: an output more than ``t``
  times longer than its reference gets lower knots (``t = 1``: any longer output), never below
  ``floor`` times the knots (so a very long output with one reference word does not pass).
- ``length-both``: ``h = (min(n_out, n_ref) / max(n_out, n_ref)) ** a``: either text longer.
- ``length-binned``: ``h`` one factor per bin of ``n_out / n_ref`` (edges 1.25, 2, 4; the
  first bin keeps 1).
- ``script``, ``length+script``: the 0.70 and 0.90 knots fitted apart for CJK pairs
  (``cjk_knots``) and the others, without or with the ``length`` rule. (Apart at 0.80 too, the
  non-CJK knot falls below its own 0.70 knot: the answers pull it down; and the CJK files'
  best 0.80 knot is the pooled one.)
- ``question``: ``h`` one factor for pairs scored with an input (the question), 1 without.

``LOGO`` in the comparison: the balanced accuracy at 0.80 of each fitted file when the form is
refitted without it (leave one file out), averaged; how a form carries to a kind of data it
was not fitted on. (Only the answers have long outputs and an input, so for ``length`` and
``question`` LOGO cannot test the shape rule itself.)

    .venv/bin/python benchmarks/fit_bands.py --out /work/notes/bands.json
    .venv/bin/python benchmarks/fit_bands.py --form global --no-logo
    .venv/bin/python benchmarks/fit_bands.py --heldout /path/to/sts-test --heldout /path/to/answers

The JSON (``--out``) holds the curve: ``version``, ``form``, ``scores`` and ``knots`` (the
interior knots), ``cjk_knots`` (or null), ``shape`` (how ``h`` is computed, or null), ``rule``,
and what it was fitted on. ``band_score`` is the reference arithmetic for one pair.

The package ships one such file, ``src/simeval/scoring/bands.json`` (``simeval.scoring.bands``
applies the ``global`` and ``length`` forms, in Python and in C). Every run reads it
(``--curve`` names another), reports it beside the forms refitted, and checks that the
scorer's arithmetic gives ``band_score``'s numbers for it on every pair. To ship a new curve:
write it with ``--out src/simeval/scoring/bands.json`` after raising ``VERSION`` (the version
is part of every scorer fingerprint under ``scale=bands``, so results scored with the old
curve keep theirs). The pairs are scored with ``scale=cosine``: the curve maps the cosine.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import roc_auc_score

import simeval
from simeval.scoring import bands as bands_mod
from simeval.scoring.analyzer import is_cjk
from simeval.scoring.bench import load_dataset

DEV_DIRS = (
    "/work/shared/data/sts-dev",
    "/work/shared/data/cjk-dev",
    "/work/shared/data/answers-dev",
)
VERSION = "bands-1"  # raise it with every curve shipped
COSINE = {"scale": "cosine"}  # the scorer options whose scores the curve maps
SCORES = (0.70, 0.80, 0.90)  # the bands' thresholds
CUTS = (3.0, 4.0, 4.6)  # the human grade (of 5) each one separates
SAME = 1  # the index of 0.80, the default threshold, in SCORES and CUTS
GRID = np.round(np.arange(0.2, 0.95 + 1e-9, 0.0025), 4)
ALLOWANCES = (1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0)
EXPONENTS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0)
FLOORS = (0.0, 0.3, 0.4, 0.5, 0.6)
BOTH_EXPONENTS = tuple(round(0.025 * i, 3) for i in range(41))  # 0 .. 1
BIN_EDGES = (1.25, 2.0, 4.0)
FACTORS = tuple(round(1.0 - 0.025 * i, 3) for i in range(25))  # 1 .. 0.4: h = 1 first
FORMS = ("global", "length", "length-both", "length-binned", "script", "length+script", "question")
RECOMMENDED = "length"
STS_POOLED = "STS 2012-14"
TIE = 1e-4  # objectives closer than this are equal (see the module docstring)
FLAT: tuple[float, float, float] = (0.0, 0.0, 0.0)  # placeholder knots while a shape is tried


# -- data -------------------------------------------------------------------------------------
@dataclass
class Sample:
    """One file's scored pairs: human grades, cosines and the pairs' shapes."""

    name: str
    kind: str  # bench.Pairs.kind: sts, sick, msrp, binary, graded, answers
    gold: np.ndarray
    cos: np.ndarray
    n_out: np.ndarray  # distinct terms of the output
    n_ref: np.ndarray  # distinct terms of the reference
    cjk: np.ndarray  # bool per pair
    asked: np.ndarray  # bool per pair: scored with an input
    fitted: bool = False
    heldout: bool = False

    def label(self, band: int) -> np.ndarray | None:
        """Which pairs people placed at or above band ``band``; None where the file has no
        such grade (a 0/1 file has only "same content"; answers are graded for 0.80 only)."""
        if self.kind in ("msrp", "binary"):
            return self.gold >= 0.5 if band == SAME else None
        if self.kind == "answers" and band != SAME:
            return None
        return self.gold >= CUTS[band]

    def fits(self, band: int) -> bool:
        """Whether this file helps choose band ``band``'s knot."""
        return self.fitted and self.label(band) is not None


def _cjk_text(analyzer: Any, text: str) -> bool:
    terms = set(analyzer.terms(text))
    return bool(terms) and 2 * sum(len(t) == 1 and is_cjk(t) for t in terms) >= len(terms)


def score_file(pairs: Any, scorer: simeval.Scorer) -> Sample:
    """Cosines and shapes of one ``load_dataset`` file: the question as ``input`` where the
    file has one, like ``bench quality``; a pair with a blank text scores 0."""
    inputs = pairs.inputs or [None] * len(pairs.a)
    keep = [
        i for i, pair in enumerate(zip(pairs.a, pairs.b, strict=True)) if all(map(str.strip, pair))
    ]
    cos = np.zeros(len(pairs.a))
    cos[keep] = simeval.score_many(
        [pairs.a[i] for i in keep],
        [pairs.b[i] for i in keep],
        [inputs[i] for i in keep],
        workers=1,
        **COSINE,
    )
    terms = scorer.analyzer.terms
    return Sample(
        name=pairs.name,
        kind=pairs.kind,
        gold=np.asarray(pairs.gold, dtype=float),
        cos=cos,
        n_out=np.array([len(set(terms(t))) for t in pairs.a]),
        n_ref=np.array([len(set(terms(t))) for t in pairs.b]),
        cjk=np.array([_cjk_text(scorer.analyzer, t) for t in pairs.b]),
        asked=np.array([bool(q and q.strip()) for q in inputs]),
    )


def pooled(name: str, parts: Sequence[Sample]) -> Sample:
    """Several files as one (the STS years, pooled as the targets are)."""
    cat = lambda column: np.concatenate([getattr(p, column) for p in parts])  # noqa: E731
    return Sample(
        name,
        parts[0].kind,
        gold=cat("gold"),
        cos=cat("cos"),
        n_out=cat("n_out"),
        n_ref=cat("n_ref"),
        cjk=cat("cjk"),
        asked=cat("asked"),
    )


def load(dev: Sequence[str], heldout: Sequence[str]) -> tuple[list[Sample], list[Sample]]:
    """(the files the fit uses or reports, with STS 2012-14 pooled first; the STS files)."""
    scorer = simeval.get_scorer(**COSINE)
    samples: list[Sample] = []
    sts: list[Sample] = []
    for directory, held in [(d, False) for d in dev] + [(d, True) for d in heldout]:
        for pairs in load_dataset(directory):
            s = score_file(pairs, scorer)
            s.heldout = held
            if s.kind == "sts" and not held and s.name[:4] in ("2012", "2013", "2014"):
                sts.append(s)
            else:
                s.fitted = not held and s.kind in ("answers", "graded")
                samples.append(s)
    if sts:
        samples.insert(0, replace(pooled(STS_POOLED, sts), fitted=True))
    return samples, sts


# -- the curve --------------------------------------------------------------------------------
@dataclass
class Curve:
    """A ``bands`` curve: interior knots and how a pair's shape scales them (``h``)."""

    form: str
    knots: tuple[float, float, float]
    allowance: float = 1.0  # length, length+script: t
    exponent: float = 0.0  # length, length+script, length-both: a
    floor: float = 0.0  # length, length+script: the least h
    factors: tuple[float, ...] = ()  # length-binned: h per bin; question: (h with an input,)
    cjk_knots: tuple[float, float, float] | None = None  # script, length+script
    fit: dict[str, Any] = field(default_factory=dict)
    label: str = ""  # the name shown in the comparison (default: the form)

    def shrink(self, s: Sample) -> np.ndarray:
        """``h`` of every pair of ``s``."""
        n_out = np.maximum(s.n_out, 1).astype(float)
        n_ref = np.maximum(s.n_ref, 1).astype(float)
        if self.form in ("length", "length+script"):
            h = np.minimum(1.0, self.allowance * n_ref / n_out) ** self.exponent
            return np.maximum(self.floor, h)
        if self.form == "length-both":
            return (np.minimum(n_out, n_ref) / np.maximum(n_out, n_ref)) ** self.exponent
        if self.form == "length-binned":
            return np.asarray(self.factors)[np.searchsorted(BIN_EDGES, n_out / n_ref, "left")]
        if self.form == "question":
            return np.where(s.asked, self.factors[0], 1.0)
        return np.ones(len(s.cos))

    def cut_cosines(self, s: Sample) -> np.ndarray:
        """The cosines at which each pair's score is 0.70, 0.80 and 0.90 (n x 3)."""
        knots = np.tile(np.asarray(self.knots), (len(s.cos), 1))
        if self.cjk_knots is not None:
            knots[s.cjk] = self.cjk_knots
        return knots * self.shrink(s)[:, None]

    def apply(self, s: Sample) -> np.ndarray:
        """The ``bands`` score of every pair of ``s`` (``band_score``'s arithmetic)."""
        n = len(s.cos)
        xs = np.column_stack([np.zeros(n), self.cut_cosines(s), np.ones(n)])
        ys = np.array((0.0, *SCORES, 1.0))
        c = np.clip(s.cos, 0.0, 1.0)
        seg = (c[:, None] >= xs[:, 1:4]).sum(axis=1)  # at a knot: the segment above it
        x0, x1 = xs[np.arange(n), seg], xs[np.arange(n), seg + 1]
        out = ys[seg] + (ys[seg + 1] - ys[seg]) * (c - x0) / (x1 - x0)
        return np.where(c >= 1.0, 1.0, out)

    def valid(self) -> bool:
        """Whether every knot set makes a strictly increasing curve."""
        sets = [self.knots] + ([self.cjk_knots] if self.cjk_knots else [])
        return all(a < b for k in sets for a, b in itertools.pairwise((0.0, *k, 1.0)))

    def to_json(self) -> dict[str, Any]:
        """The versioned curve as stored (``--out``)."""
        measure = "distinct terms of each text (n_out, n_ref)"
        shape: dict[str, Any] | None = None
        if self.form in ("length", "length+script"):
            shape = {"h": "max(floor, min(1, allowance * n_ref / n_out) ** exponent)"}
            shape |= {"measure": measure, "allowance": self.allowance}
            shape |= {"exponent": self.exponent, "floor": self.floor}
        elif self.form == "length-both":
            shape = {"h": "(min(n_out, n_ref) / max(n_out, n_ref)) ** exponent"}
            shape |= {"measure": measure, "exponent": self.exponent}
        elif self.form == "length-binned":
            shape = {"h": "factors[number of edges below n_out / n_ref]", "measure": measure}
            shape |= {"edges": list(BIN_EDGES), "factors": list(self.factors)}
        elif self.form == "question":
            shape = {"h": "factor when scored with a non-blank input, else 1"}
            shape |= {"factor": self.factors[0]}
        return {
            "version": VERSION,
            "form": self.form,
            "scores": list(SCORES),
            "knots": list(self.knots),
            "cjk_knots": list(self.cjk_knots) if self.cjk_knots else None,
            "shape": shape,
            "rule": "piecewise linear through (0, 0), (h*knots[i], scores[i]), (1, 1); a "
            "cosine at a knot takes the segment above it; cosine >= 1 scores 1, <= 0 scores 0; "
            "cjk_knots replace knots when half or more of the reference's terms are CJK",
            "fitted": self.fit,
        }


# The prototype (knots chosen on STS 2012-14 alone), measured beside the fitted forms.
PROTOTYPE = Curve("prototype", (0.525, 0.575, 0.685))


def read_curve(path: str | Path) -> Curve:
    """A stored curve (``Curve.to_json``'s format, the one the package ships) as a ``Curve``."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    shape = data.get("shape") or {}
    k = data["knots"]
    cjk = data.get("cjk_knots")
    factors = shape.get("factors") or ([shape["factor"]] if "factor" in shape else [])
    return Curve(
        data["form"],
        (float(k[0]), float(k[1]), float(k[2])),
        allowance=float(shape.get("allowance", 1.0)),
        exponent=float(shape.get("exponent", 0.0)),
        floor=float(shape.get("floor", 0.0)),
        factors=tuple(float(f) for f in factors),
        cjk_knots=(float(cjk[0]), float(cjk[1]), float(cjk[2])) if cjk else None,
        fit=dict(data.get("fitted") or {}),
    )


def check_package(path: str | Path, samples: Sequence[Sample]) -> int:
    """The scorer's ``bands`` arithmetic (``simeval.scoring.bands``, C where built) against
    ``band_score`` for the curve file at ``path`` on every pair of ``samples``: the number
    of pairs compared. Raises when one differs by a bit (numpy is not involved here)."""
    stored = json.loads(Path(path).read_text(encoding="utf-8"))
    packed = bands_mod.load_curve(path).packed()
    n = 0
    for s in samples:
        for i in range(len(s.cos)):
            c, no, nr = float(s.cos[i]), int(s.n_out[i]), int(s.n_ref[i])
            want = band_score(stored, c, no, nr, bool(s.cjk[i]), bool(s.asked[i]))
            if bands_mod.bands(c, no, nr, packed) != want:
                raise SystemExit(f"{s.name} pair {i}: the scorer's bands differ from band_score")
            n += 1
    return n


def band_score(
    curve: dict[str, Any], cosine: float, n_out: int, n_ref: int, cjk: bool, asked: bool
) -> float:
    """The score of one pair under a stored curve (``Curve.to_json``): the reference
    arithmetic for the scorer and the C core."""
    if cosine <= 0.0:
        return 0.0
    if cosine >= 1.0:
        return 1.0
    form, shape, h = curve["form"], curve["shape"], 1.0
    no, nr = max(n_out, 1), max(n_ref, 1)
    if form in ("length", "length+script"):
        h = max(shape["floor"], min(1.0, shape["allowance"] * nr / no) ** shape["exponent"])
    elif form == "length-both":
        h = (min(no, nr) / max(no, nr)) ** shape["exponent"]
    elif form == "length-binned":
        h = shape["factors"][sum(e < no / nr for e in shape["edges"])]
    elif form == "question" and asked:
        h = shape["factor"]
    knots = curve["cjk_knots"] if cjk and curve["cjk_knots"] else curve["knots"]
    xs = [0.0, *(h * k for k in knots), 1.0]
    ys = [0.0, *curve["scores"], 1.0]
    i = sum(cosine >= x for x in xs[1:4])
    return ys[i] + (ys[i + 1] - ys[i]) * (cosine - xs[i]) / (xs[i + 1] - xs[i])


# -- fitting ----------------------------------------------------------------------------------
def balanced_curve(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Balanced accuracy of ``x >= t`` against ``y`` for every ``t`` of ``GRID``."""
    pos, neg = np.sort(x[y]), np.sort(x[~y])
    if not len(pos) or not len(neg):
        return np.full(len(GRID), np.nan)
    tpr = 1.0 - np.searchsorted(pos, GRID, "left") / len(pos)
    tnr = np.searchsorted(neg, GRID, "left") / len(neg)
    return 0.5 * (tpr + tnr)


def plateau_middle(values: np.ndarray) -> int:
    """The middle index of the run of maxima that starts at the first maximum."""
    i = j = int(np.nanargmax(values))
    while j + 1 < len(values) and values[j + 1] >= values[i] - 1e-12:
        j += 1
    return (i + j) // 2


def fit_knots(
    samples: Sequence[Sample], curve: Curve, default: Sequence[float] = ()
) -> tuple[tuple[float, float, float], float]:
    """The knots that ``curve``'s shape rule (``h``) asks for on ``samples``, and the mean
    over bands of the best mean-over-files balanced accuracy (-inf if the knots do not
    increase). ``default``: the knots of bands no file of ``samples`` grades."""
    knots, best = [], []
    scaled = [(s, s.cos / curve.shrink(s)) for s in samples]
    for band in range(len(SCORES)):
        labelled = [(x, s.label(band)) for s, x in scaled if s.fits(band)]
        rows = [balanced_curve(x, y) for x, y in labelled if y is not None]
        if not rows:
            knots.append(default[band])
            continue
        mean = np.nanmean(rows, axis=0)
        i = plateau_middle(mean)
        knots.append(float(GRID[i]))
        best.append(float(mean[i]))
    k = (knots[0], knots[1], knots[2])
    return k, float(np.mean(best)) if replace(curve, knots=k).valid() else -math.inf


def change(curve: Curve, samples: Sequence[Sample]) -> float:
    """How far ``curve``'s shape rule moves the knots: the mean over files of mean(1 - h)."""
    return float(np.mean([np.mean(1.0 - curve.shrink(s)) for s in samples]))


def best_of(trials: Sequence[Curve], samples: Sequence[Sample]) -> Curve:
    """The trial shape with the best objective, its knots fitted. Objectives within ``TIE``
    of the best count as equal; of those, the shape that changes the knots least wins."""
    scored = []
    for trial in trials:
        knots, objective = fit_knots(samples, trial)
        scored.append((objective, replace(trial, knots=knots)))
    best = max(objective for objective, _ in scored)
    ties = [(change(c, samples), n, o, c) for n, (o, c) in enumerate(scored) if o >= best - TIE]
    _, _, objective, curve = min(ties)
    curve.fit = {"objective": round(objective, 4)} if objective > -math.inf else {}
    return curve


def _binned(samples: Sequence[Sample]) -> Curve:
    """Coordinate ascent over the bin factors (the first bin stays 1), twice round."""
    curve = Curve("length-binned", FLAT, factors=(1.0,) * (len(BIN_EDGES) + 1))
    for _ in range(2):
        for b in range(1, len(curve.factors)):
            f = curve.factors
            trials = [replace(curve, factors=(*f[:b], x, *f[b + 1 :])) for x in FACTORS]
            curve = best_of(trials, samples)
    return curve


def _with_scripts(curve: Curve, samples: Sequence[Sample]) -> Curve:
    """``curve``'s shape with the 0.70 and 0.90 knots fitted apart for the CJK files and the
    others; 0.80 keeps the knot fitted on all files."""
    both = fit_knots(samples, curve)[0]
    apart = []
    for cjk in (False, True):
        group = [s for s in samples if (s.cjk.mean() >= 0.5) == cjk]
        knots = fit_knots(group, curve, both)[0]
        apart.append((knots[0], both[SAME], knots[2]))
    out = replace(curve, knots=apart[0], cjk_knots=apart[1])
    out.fit = {"objective": round(objective(out, samples), 4)} if out.valid() else {}
    return out


def fit_form(form: str, samples: Sequence[Sample]) -> Curve:
    """The curve of ``form`` with the best objective on the fitted files of ``samples``; no
    ``objective`` in its ``fit`` when the form gives knots that do not increase."""
    fitting = [s for s in samples if s.fitted]
    # every list of trials holds h = 1 first, so a shape no file asks for (a tie) stays flat
    lengths = [Curve("length", FLAT)] + [
        Curve("length", FLAT, allowance=t, exponent=a, floor=f)
        for t, a, f in itertools.product(ALLOWANCES, EXPONENTS, FLOORS)
    ]
    if form == "length":
        return best_of(lengths, fitting)
    if form == "length-both":
        return best_of([Curve(form, FLAT, exponent=a) for a in BOTH_EXPONENTS], fitting)
    if form == "length-binned":
        return _binned(fitting)
    if form == "question":
        return best_of([Curve(form, FLAT, factors=(x,)) for x in FACTORS], fitting)
    if form == "script":
        return _with_scripts(Curve(form, FLAT), fitting)
    if form == "length+script":
        return _with_scripts(replace(best_of(lengths, fitting), form=form), fitting)
    return best_of([Curve("global", FLAT)], fitting)


def objective(curve: Curve, samples: Sequence[Sample]) -> float:
    """The fit's objective at ``curve``'s own knots."""
    per_band = []
    for band, threshold in enumerate(SCORES):
        score = [(s, curve.apply(s)) for s in samples if s.fits(band)]
        per_band.append(np.mean([balanced(x, s.label(band), threshold) for s, x in score]))
    return float(np.mean(per_band))


def rounded(curve: Curve) -> Curve:
    """The curve as stored and measured: knots to 4 decimals, shape parameters to 3."""
    four = lambda k: (round(k[0], 4), round(k[1], 4), round(k[2], 4))  # noqa: E731
    return replace(
        curve,
        knots=four(curve.knots),
        cjk_knots=four(curve.cjk_knots) if curve.cjk_knots else None,
        allowance=round(curve.allowance, 3),
        exponent=round(curve.exponent, 3),
        floor=round(curve.floor, 3),
        factors=tuple(round(f, 3) for f in curve.factors),
    )


def leave_one_out(form: str, samples: Sequence[Sample]) -> float:
    """Mean balanced accuracy at 0.80 on each fitted file, the form refitted without it."""
    out = []
    for held in [s for s in samples if s.fitted]:
        curve = fit_form(form, [s for s in samples if s is not held])
        if "objective" not in curve.fit:
            return math.nan
        out.append(balanced(curve.apply(held), held.label(SAME), SCORES[SAME]))
    return float(np.mean(out))


# -- measures ---------------------------------------------------------------------------------
def balanced(score: np.ndarray, y: np.ndarray | None, threshold: float) -> float:
    """Balanced accuracy of ``score >= threshold`` against ``y``."""
    if y is None or y.all() or not y.any():
        return math.nan
    passed = score >= threshold
    return float(0.5 * (passed[y].mean() + (~passed[~y]).mean()))


def measures(score: np.ndarray, s: Sample) -> dict[str, Any]:
    """One file at 0.80 (balanced accuracy, shares of "same content" and other pairs that
    pass, accuracy), the mean grade per band, Pearson, Spearman and ROC AUC (positive:
    "same content"), and the balanced accuracy of the 0.70 and 0.90 bands where graded."""
    y = s.label(SAME)
    assert y is not None
    passed = score >= SCORES[SAME]
    band = np.searchsorted(SCORES, score, "right")  # 0: < 0.70 ... 3: >= 0.90
    means = [float(s.gold[band == b].mean()) if (band == b).any() else math.nan for b in range(4)]
    filled = [m for m in means if not math.isnan(m)]
    return {
        "pairs": len(score),
        "balanced": balanced(score, y, SCORES[SAME]),
        "pass_same": float(passed[y].mean()),
        "pass_other": float(passed[~y].mean()),
        "accuracy": float((passed == y).mean()),
        "band_means": means,
        "rising": all(a < b for a, b in itertools.pairwise(filled)),
        "pearson": float(pearsonr(score, s.gold)[0]),
        "spearman": float(spearmanr(score, s.gold)[0]),
        "auc": float(roc_auc_score(y, score)),
        "balanced_70": balanced(score, s.label(0), SCORES[0]),
        "balanced_90": balanced(score, s.label(2), SCORES[2]),
    }


def summary(curve: Curve, samples: Sequence[Sample]) -> dict[str, float]:
    """The figures of the issue's targets, per file, for the comparison of forms."""
    by = {s.name: measures(curve.apply(s), s) for s in samples}
    out = {n: m["accuracy" if n == "msrp.train" else "balanced"] for n, m in by.items()}
    fitted = [by[s.name] for s in samples if s.fitted and s.kind != "answers"]
    out["bal70"] = float(np.mean([m["balanced_70"] for m in fitted]))
    out["bal90"] = float(np.mean([m["balanced_90"] for m in fitted]))
    if STS_POOLED in by:
        out["pearson"] = by[STS_POOLED]["pearson"]
        out["spearman"] = by[STS_POOLED]["spearman"]
    out["rising"] = float(all(m["rising"] for m in by.values()))
    return out


# -- report -----------------------------------------------------------------------------------
def _short(name: str) -> str:
    for tail in (".test", ".dev", ".valid"):
        name = name.replace(tail, "")
    return name


def _shape(curve: Curve) -> str:
    if curve.form in ("length", "length+script"):
        text = f"t={curve.allowance:g} a={curve.exponent:g} floor={curve.floor:g}"
    elif curve.form == "length-both":
        text = f"a={curve.exponent:g}"
    elif curve.form == "length-binned":
        text = "h=" + ",".join(f"{f:g}" for f in curve.factors[1:])
    elif curve.form == "question":
        text = f"h={curve.factors[0]:g}"
    else:
        text = ""
    if curve.cjk_knots:
        text += " cjk " + "/".join(f"{k:.3f}" for k in curve.cjk_knots)
    return text


def print_comparison(rows: list[tuple[Curve, dict[str, float], float]], files: list[str]) -> None:
    """One line per form: its parameters, the target figures, the objective and LOGO."""
    print("\nForms: balanced accuracy at 0.80 for 'same content' (rated >= 4; msrp: accuracy);")
    print("bal70/bal90: mean over the fitted sentence-pair files at 0.70 (>= 3) and 0.90 (>= 4.6)")
    cols = [*files, "bal70", "bal90", "pearson", "spearman"]
    heads = "".join(f" {_short(c)[:8]:>8s}" for c in cols)
    print(f"{'form':13s} {'k70/k80/k90':17s} {'shape':36s}{heads}   obj  LOGO")
    for curve, figures, logo in rows:
        line = f"{curve.label or curve.form:13s} {'/'.join(f'{k:.3f}' for k in curve.knots):17s}"
        line += f" {_shape(curve):36s}"
        if "objective" not in curve.fit:
            print(line + " knots do not increase: no curve")
            continue
        line += "".join(f" {figures.get(c, math.nan):8.3f}" for c in cols)
        line += f" {curve.fit['objective']:.4f} {logo:.3f}"
        print(line + ("" if figures["rising"] else "  band means not rising everywhere"))


def print_table(curve: Curve, samples: Sequence[Sample]) -> None:
    """Per file, the cosine beside ``bands``: the figures ``bench quality`` is to report."""
    print(f"\nPer file, form {curve.form!r}: each pair of columns is cosine, bands")
    print(
        f"{'file':22s} {'pairs':>5s}  {'bal@0.80':>11s}  {'pass same':>11s}  {'pass other':>11s}"
        f"  {'bands mean grade: <.7 .7 .8 .9+':>31s}  {'pearson':>11s}  {'spearman':>11s}"
        f"  {'auc':>11s}"
    )
    for s in samples:
        a, b = measures(s.cos, s), measures(curve.apply(s), s)
        two = {k: f"{a[k]:.3f} {b[k]:.3f}" for k in a if isinstance(a[k], float)}
        means = " ".join("   - " if math.isnan(m) else f"{m:5.2f}" for m in b["band_means"])
        tag = " held out" if s.heldout else "" if s.fitted else " not fitted"
        if s.kind == "sts" and s.name[:4] in ("2012", "2013", "2014"):
            tag = " (in STS 2012-14)"
        if s.kind == "msrp":
            tag += f"; accuracy at 0.80 {a['accuracy']:.3f} -> {b['accuracy']:.3f}"
        print(
            f"{_short(s.name)[:22]:22s} {a['pairs']:5d}  {two['balanced']}  {two['pass_same']}"
            f"  {two['pass_other']}  {means:>31s}{' ' if b['rising'] else '!'} {two['pearson']}"
            f"  {two['spearman']}  {two['auc']}{tag}"
        )


def check(curve: Curve, samples: Sequence[Sample]) -> float:
    """``band_score`` agrees with ``Curve.apply`` on every pair (the largest difference is
    returned); endpoints are exact and the score increases strictly with the cosine for
    several shapes. Raises when one fails."""
    stored = curve.to_json()
    worst = 0.0
    for s in samples:
        fast = curve.apply(s)
        for i in range(len(s.cos)):
            args = (int(s.n_out[i]), int(s.n_ref[i]), bool(s.cjk[i]), bool(s.asked[i]))
            worst = max(worst, abs(band_score(stored, float(s.cos[i]), *args) - fast[i]))
    if worst > 1e-12:  # numpy's and Python's pow may differ in the last bit, no more
        raise SystemExit(f"band_score differs from Curve.apply by {worst:.1e}")
    grid = [i / 2000 for i in range(2001)]
    for shape in itertools.product((1, 3, 12, 80), (1, 4, 20), (False, True), (False, True)):
        ys = [band_score(stored, c, *shape) for c in grid]
        if ys[0] != 0.0 or ys[-1] != 1.0 or not all(a < b for a, b in itertools.pairwise(ys)):
            raise SystemExit(f"not an increasing curve from 0 to 1 for shape {shape}")
    return worst


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", action="append", help="a dev directory (repeatable)")
    parser.add_argument("--heldout", action="append", default=[], help="reported, never fitted")
    parser.add_argument("--form", choices=FORMS, default=RECOMMENDED, help="the curve to keep")
    parser.add_argument("--out", help="write the kept curve as JSON here (default: print only)")
    parser.add_argument("--no-logo", action="store_true", help="skip the leave-one-out refits")
    parser.add_argument(
        "--curve",
        default=str(bands_mod.CURVE_FILE),
        help="a stored curve to report and check (default: the one the package ships)",
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    samples, sts_files = load(args.data or DEV_DIRS, args.heldout)
    pairs = sum(len(s.cos) for s in samples)
    print(f"scored {pairs:,} pairs in {time.perf_counter() - started:.1f} s")
    fitting = [s for s in samples if s.fitted]
    proto = replace(PROTOTYPE, fit={"objective": round(objective(PROTOTYPE, fitting), 4)})
    shipped = replace(read_curve(args.curve), label="shipped")
    shipped.fit = {"objective": round(objective(shipped, fitting), 4)}
    rows = [
        (proto, summary(proto, samples), math.nan),
        (shipped, summary(shipped, samples), math.nan),
    ]
    for form in FORMS:
        curve = rounded(fit_form(form, samples))
        if "objective" not in curve.fit:
            rows.append((curve, {}, math.nan))
            continue
        logo = math.nan if args.no_logo else leave_one_out(form, samples)
        rows.append((curve, summary(curve, samples), logo))
    print_comparison(rows, [s.name for s in samples])
    kept = next(c for c, _, _ in rows if c.form == args.form)
    if "objective" not in kept.fit:
        raise SystemExit(f"form {args.form!r} gives no increasing curve on this data")
    print_table(kept, samples + sts_files)
    worst = check(kept, samples + sts_files)
    print(f"\nchecked: band_score = Curve.apply on every pair (largest difference {worst:.0e});")
    if shipped.form in bands_mod.FORMS:
        n = check_package(args.curve, samples + sts_files)
        print(f"the scorer's bands = band_score for {args.curve} on all {n:,} pairs, bit for bit;")
    print("f(0) = 0 and f(1) = 1 exactly, strictly increasing, for 48 pair shapes")
    kept.fit |= {
        "files": {s.name: len(s.cos) for s in samples if s.fitted},
        "weighting": "mean over files of balanced accuracy; STS 2012-14 pooled as one file",
        "scorer": simeval.fingerprint(**COSINE),
    }
    text = json.dumps(kept.to_json(), indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
    print(f"total {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
