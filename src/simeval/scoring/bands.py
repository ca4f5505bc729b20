"""The calibrated score scale ``bands``: the TF-IDF cosine mapped onto the strictness bands.

The strictness bands promise words (``simeval.scoring.options.STRICTNESS_BANDS``): a score of
0.80 or more is "same content, different words acceptable", 0.70 "paraphrasing and some
omissions", 0.90 "near-identical phrasing". The raw cosine ranks pairs well but its numbers do
not match those words (a pair people rate "mostly equivalent" has a median cosine of 0.69).
``bands`` maps the cosine ``c`` of a pair through a fixed curve, piecewise linear through::

    (0, 0), (h*k70, 0.70), (h*k80, 0.80), (h*k90, 0.90), (1, 1)

``k70 < k80 < k90`` are the cosines fitted on the shared development data by
``benchmarks/fit_bands.py`` so that each band's threshold separates the human grades its words
describe; ``h`` lowers the knots for an output much longer than its reference (``n_out``,
``n_ref``: the distinct terms of each text, the records of ``Scorer.vector``)::

    h = max(floor, min(1, allowance * n_ref / n_out) ** exponent)

A question-answer pair (the question known: ``input=``) is also scored by its coverage ``v``,
the share of the reference's squared weight that the output holds (the question's terms
demoted as in the cosine): its score is the better of ``f(c)`` and the same piecewise-linear
map of ``v`` through the ``answer_knots``. Unrelated text added to the output lowers ``c`` and
leaves ``v`` as it is, so it never raises the score; a short right answer covers the reference
and passes however long it is.

``bands-2`` (the default) has no length rule (``h = 1``); ``bands-1`` (0.1.0, ``scale="bands-1"``)
keeps it and has no answer knots.

The curve is data, ``bands.json`` beside this module (``bands-1.json`` for ``bands-1``), with
its own ``version`` (part of every scorer fingerprint under ``scale=bands``). For a fixed pair
shape the score is continuous and strictly increasing in ``c``; ``f(0) = 0`` and ``f(1) = 1``
exactly. The arithmetic, the same operations in the same order in Python
(``_vector.bands_py``) and in C (``_cosine.h``):

1. ``c <= 0``: 0.0; ``c >= 1``: 1.0.
2. ``r = allowance * max(n_ref, 1) / max(n_out, 1)``; ``h = 1`` if ``r >= 1`` else
   ``max(floor, pow(r, exponent))``.
3. ``x_i = h * k_i``; the segment is the highest ``i`` with ``c >= x_i`` (a cosine exactly at
   a knot takes the segment above it, so it scores exactly the band's value: computed from the
   segment below, 0.7 + 0.1 * 1 would give 0.7999... and fail at 0.80).
4. ``y_lo + (y_hi - y_lo) * (c - x_lo) / (x_hi - x_lo)``.

>>> CURVE.version, CURVE.knots, CURVE_1.version
('bands-2', (0.47, 0.5525, 0.695), 'bands-1')
>>> scaled(0.5525, 10, 10), scaled(0.0, 3, 3), scaled(1.0, 3, 3)
(0.8, 0.0, 1.0)
"""

from __future__ import annotations

import itertools
import json
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simeval.scoring._vector import bands

CURVE_FILE = Path(__file__).with_name("bands.json")
CURVE_1_FILE = Path(__file__).with_name("bands-1.json")
FORMS = ("global", "length")  # the forms the scorer applies (fit_bands.py tries more)
_PACKED = struct.Struct("=9d")
_ANSWER = struct.Struct("=8d")


@dataclass(frozen=True)
class Answer:
    """A question-answer pair's part of a curve: knots for its cosine, knots for its answer
    score (coverage times ``min(1, precision / precision_floor)``), and the most reference terms
    the answer score is read for (a longer reference is judged by its cosine alone)."""

    cosine_knots: tuple[float, float, float]
    answer_knots: tuple[float, float, float]
    precision_floor: float
    max_terms: int


@dataclass(frozen=True)
class Curve:
    """A stored ``bands`` curve: its version, interior knots (cosines), the band scores they
    map to, and the length rule's parameters (``allowance`` infinite: no length rule)."""

    version: str
    knots: tuple[float, float, float]
    scores: tuple[float, float, float]
    allowance: float = math.inf
    exponent: float = 1.0
    floor: float = 1.0
    answer: Answer | None = None  # a question-answer pair's part of the curve

    def packed(self) -> bytes:
        """The curve as the C core reads it: nine native float64 (knots, scores, allowance,
        exponent, floor)."""
        return _PACKED.pack(*self.knots, *self.scores, self.allowance, self.exponent, self.floor)

    def answer_packed(self) -> bytes:
        """The curve for a question-answer pair as the C core reads it: the nine floats, then
        the cosine knots, the answer knots, the precision floor and the most reference terms
        (the nine alone for a curve without an answer part)."""
        a = self.answer
        if a is None:
            return self.packed()
        return self.packed() + _ANSWER.pack(
            *a.cosine_knots, *a.answer_knots, a.precision_floor, float(a.max_terms)
        )


def _floats(data: Mapping[str, object], key: str, where: str) -> tuple[float, float, float]:
    values = data.get(key)
    if not isinstance(values, list) or len(values) != 3:
        raise ValueError(f"{where}: {key!r} must be a list of three numbers")
    a, b, c = (float(v) for v in values)
    return a, b, c


def _answer(data: dict[str, Any], where: str) -> Answer | None:
    part = data.get("answer")
    if not part:
        return None
    floor, terms = float(part["precision_floor"]), int(part["max_terms"])
    if not (0 < floor <= 1 and terms >= 1):
        raise ValueError(f"{where}: answer precision_floor in (0, 1] and max_terms >= 1 required")
    return Answer(
        _floats(part, "cosine_knots", where), _floats(part, "answer_knots", where), floor, terms
    )


def load_curve(path: str | Path = CURVE_FILE) -> Curve:
    """A curve file as ``benchmarks/fit_bands.py --out`` writes it; ``ValueError`` naming the
    problem for a form the scorer does not apply or a curve that does not increase."""
    where = str(path)
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    form = data.get("form")
    if form not in FORMS:
        raise ValueError(f"{where}: form {form!r} is not one of {', '.join(FORMS)}")
    if data.get("cjk_knots"):
        raise ValueError(f"{where}: cjk_knots are not applied by the scorer")
    knots, scores = _floats(data, "knots", where), _floats(data, "scores", where)
    answer = _answer(data, where)
    extra = (answer.cosine_knots, answer.answer_knots) if answer else ()
    for xs in (knots, scores, *extra):
        if not all(a < b for a, b in itertools.pairwise((0.0, *xs, 1.0))):
            raise ValueError(f"{where}: knots and scores must increase strictly within (0, 1)")
    version = data.get("version")
    if not isinstance(version, str) or not version:
        raise ValueError(f"{where}: the curve has no version")
    if form == "global":
        return Curve(version, knots, scores, answer=answer)
    shape = data.get("shape") or {}
    allowance, exponent, floor = (float(shape[k]) for k in ("allowance", "exponent", "floor"))
    if not (allowance > 0 and exponent >= 0 and 0 < floor <= 1):
        raise ValueError(f"{where}: allowance > 0, exponent >= 0 and floor in (0, 1] required")
    return Curve(version, knots, scores, allowance, exponent, floor, answer)


CURVE = load_curve()
PACKED = CURVE.packed()
CURVE_1 = load_curve(CURVE_1_FILE)  # 0.1.0's curve, with its length rule (scale "bands-1")


def scaled(cosine: float, n_out: int, n_ref: int) -> float:
    """The ``bands`` score of a pair with this cosine, ``n_out`` distinct output terms and
    ``n_ref`` distinct reference terms (the C core's arithmetic where it is built)."""
    return float(bands(cosine, n_out, n_ref, PACKED))
