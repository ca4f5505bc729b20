"""The calibrated scale ``bands`` (issue 17, bands-2 from issue 29): its properties, the knot
rule, C equal to Python, and that the raw cosine, 0.1.0's curve and old fingerprints stay
reachable."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simeval
from simeval.scoring import _vector
from simeval.scoring import bands as bands_mod
from simeval.scoring.evalset import EvalSet, EvalSpec
from simeval.scoring.options import PREVIOUS_DEFAULTS, RELEASE_0_1_DEFAULTS

PACKED = bands_mod.PACKED
CURVE = bands_mod.CURVE
CURVE_1 = bands_mod.CURVE_1  # 0.1.0's, with the length rule
PACKED_1 = CURVE_1.packed()
IMPLEMENTATIONS = [_vector.bands_py] + ([_vector.bands] if _vector.ACCELERATED else [])
cosines = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
counts = st.integers(min_value=0, max_value=400)
WORDS = ["cat", "dog", "Paris", "capital", "France", "city", "river", "the", "a", "is", "of"]
WORDS += ["not", "big", "small", "tower", "built"]
texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=40).map(" ".join)


def test_the_shipped_curves() -> None:
    data = json.loads(bands_mod.CURVE_FILE.read_text(encoding="utf-8"))
    assert CURVE.version == data["version"] == "bands-2"
    assert CURVE.knots == tuple(data["knots"]) and CURVE.scores == (0.7, 0.8, 0.9)
    assert math.isinf(CURVE.allowance)  # no length rule
    assert CURVE.answer is not None and CURVE.answer.max_terms == data["answer"]["max_terms"]
    assert len(CURVE.answer_packed()) == 17 * 8
    old = json.loads(bands_mod.CURVE_1_FILE.read_text(encoding="utf-8"))
    assert CURVE_1.version == old["version"] == "bands-1" and CURVE_1.knots == CURVE.knots
    assert (CURVE_1.allowance, CURVE_1.exponent, CURVE_1.floor) == (4.0, 2.0, 0.4)
    assert CURVE_1.answer is None and CURVE_1.answer_packed() == CURVE_1.packed()


@pytest.mark.parametrize("fn", IMPLEMENTATIONS)
def test_endpoints_and_knots_are_exact(fn) -> None:
    for n_out, n_ref in [(1, 1), (5, 5), (40, 3), (400, 1), (0, 0)]:
        assert fn(0.0, n_out, n_ref, PACKED) == 0.0
        assert fn(1.0, n_out, n_ref, PACKED) == 1.0
    # the knot rule: a cosine exactly at a knot takes the segment above it and scores exactly
    # the band's value, so it passes a threshold of that value (0.7 + 0.1 * 1 would not)
    for knot, band in zip(CURVE.knots, CURVE.scores, strict=True):
        assert fn(knot, 10, 10, PACKED) == band
        assert fn(math.nextafter(knot, 0.0), 10, 10, PACKED) < band
        # bands-2 has no length rule: a long output keeps the knots
        assert fn(knot, 1000, 1, PACKED) == band
    # bands-1: an output more than 4x its reference's terms: knots scaled by h = (4*3/16) ** 2
    h = (4.0 * 3 / 16) ** 2
    for knot, band in zip(CURVE_1.knots, CURVE_1.scores, strict=True):
        assert fn(h * knot, 16, 3, PACKED_1) == band
        assert fn(h * knot, 12, 3, PACKED_1) < band  # 4x exactly: h = 1
    # never below the floor: h = 0.4 for a very long output
    assert fn(0.4 * CURVE_1.knots[1], 1000, 1, PACKED_1) == 0.8
    assert fn(0.3, 5, 5, b"") == 0.3  # no curve: the cosine itself


@settings(max_examples=400, deadline=None)
@given(a=cosines, b=cosines, n_out=counts, n_ref=counts)
def test_monotone_in_the_cosine_for_a_fixed_shape(a, b, n_out, n_ref) -> None:
    lo, hi = min(a, b), max(a, b)
    for fn in IMPLEMENTATIONS:
        for packed in (PACKED, PACKED_1):
            x, y = fn(lo, n_out, n_ref, packed), fn(hi, n_out, n_ref, packed)
            assert 0.0 <= x <= y <= 1.0
    # strictly increasing where the cosines are apart by more than rounding
    if hi - lo > 1e-9:
        py = _vector.bands_py
        assert py(lo, n_out, n_ref, PACKED) < py(hi, n_out, n_ref, PACKED)


@pytest.mark.skipif(not _vector.ACCELERATED, reason="C core not built")
@settings(max_examples=1000, deadline=None)
@given(c=cosines | st.sampled_from(CURVE.knots), n_out=counts, n_ref=counts)
def test_c_equals_python(c, n_out, n_ref) -> None:
    for packed in (PACKED, PACKED_1):
        assert _vector.bands(c, n_out, n_ref, packed) == _vector.bands_py(c, n_out, n_ref, packed)


@settings(max_examples=200, deadline=None)
@given(a=texts, refs=st.lists(texts, min_size=1, max_size=3), q=st.none() | texts)
def test_scores_are_the_curve_of_the_cosine(a, refs, q) -> None:
    # the vetoes off: the curve alone (tests/scoring/test_vetoes.py has them)
    sc = simeval.get_scorer(contradiction=False)
    raw = simeval.get_scorer(scale="cosine")
    va, terms = sc.vector(a), sc.input_terms(q)
    asked = sc.asks(q)
    mapped = []
    for r in refs:
        vr = sc.vector(r)
        c = raw.score(a, r, q)
        assert c == sc.cosine_vector(va, vr, terms)
        s = sc.score(a, r, q)
        n_out, n_ref = len(va) // _vector.RECORD_SIZE, len(vr) // _vector.RECORD_SIZE
        if asked:  # a question-answer pair: its cosine knots, and the answer score beside
            cov, prec = sc.coverage_vector(va, vr, terms)
            expected = _vector.final_py(c, cov, prec, n_out, n_ref, sc.answer_curve)
            # at most what the coverage gives: less when what the reference demands is not
            # in one stretch of the output ("Paris cat cat cat cat cat dog" for "dog Paris")
            assert s <= expected
            if len(set(r.split())) == 1 or a == r:  # one term, or the reference itself
                assert s == expected
            assert s >= _vector.final_py(c, 0.0, 0.0, n_out, n_ref, sc.answer_curve)
        else:
            assert s == _vector.bands_py(c, n_out, n_ref, PACKED) == sc.scaled(c, va, vr)
        mapped.append(s)
    # several references: the best mapped score (its index the first reaching it)
    best = max(mapped)
    assert sc.score_detail(a, refs, q) == (best, mapped.index(best))
    assert sc.best_vector(va, sc.prepare(refs), terms, asked, a, refs) == (best, mapped.index(best))
    if _vector.ACCELERATED:
        for curve in (sc.curve, sc.answer_curve, PACKED_1):
            args = (sc.pair, terms, sc.input_weight, sc.negators, sc.negation, curve)
            prepared = sc.prepare(refs)
            assert _vector.best(va, prepared, *args) == _vector.best_py(va, prepared, *args)
            for vr in prepared:
                assert _vector.cosine(va, vr, *args) == _vector.cosine_py(va, vr, *args)
    # the eval-set engine (captures, runs) gives the same floats
    es = EvalSet([EvalSpec(1, "e", 1, tuple(refs), 0.8, None, (("contradiction", False),))])
    (got,) = es.score(a, input=q)
    assert (got.score, got.matched_index) == (best, mapped.index(best))


def test_identical_texts_one_nothing_shared_zero() -> None:
    assert simeval.score("The capital is Paris.", "the capital is  paris") == 1.0
    assert simeval.score("alpha beta", "gamma delta") == 0.0
    assert simeval.score("!!!", "!!!") == 1.0
    long = " ".join(WORDS * 3)
    assert simeval.score(long, "Paris") > simeval.score(long, "Paris", scale="cosine")


def test_the_issue_examples_pass_the_default() -> None:
    ref = "The capital of France is Paris, on the Seine."
    assert simeval.score("The capital of France is Paris.", ref) >= 0.80
    assert simeval.score("The capital of France is Paris.", ref, scale="cosine") < 0.80
    tokyo = ("Tokyo is Japan's capital city.", "The capital of Japan is Tokyo.")
    assert simeval.score(*tokyo) > simeval.score(*tokyo, scale="cosine") >= 0.80


def test_option_fingerprint_and_previous_defaults() -> None:
    with pytest.raises(
        simeval.InvalidOption, match="'scale' must be one of bands, bands-1, cosine"
    ):
        simeval.score("a", "a", scale="linear")
    assert simeval.get_scorer(scale=" Cosine ").scale == "cosine"
    # the cosine scale leaves the fingerprint as it was before the scale existed, so stored
    # results keep theirs; the bands scale adds its curve's version
    assert simeval.fingerprint(scale="cosine") == "8a940b4ca649"
    assert simeval.fingerprint() != simeval.fingerprint(scale="cosine")
    assert simeval.get_scorer().describe()["scale"] == "bands"
    assert PREVIOUS_DEFAULTS["scale"] == "cosine"
    a, b = "Stocks fell 3.5 percent on Monday", "On Monday stocks fell by 3.5 percent"
    old = simeval.score(a, b, tokenizer="words", input_weight=1.0, negation=1.0, scale="cosine")
    assert simeval.score(a, b, **PREVIOUS_DEFAULTS) == old
    assert simeval.score(a, b, **PREVIOUS_DEFAULTS, input="When did stocks fall?") == old
    # 0.1.0's default scores: its curve with the length rule, no answer reading, no vetoes
    v01 = RELEASE_0_1_DEFAULTS
    assert v01 == {"scale": "bands-1", "answer": False, "contradiction": False}
    assert simeval.fingerprint(**v01) == "6dcf7c7bc602"  # 0.1.0's default fingerprint
    long_answer = "The capital of France is Paris, a city on the Seine known for the Eiffel Tower."
    va, vb = _vector.unpack(simeval.get_scorer().vector(long_answer)), [1]
    cosine = simeval.score(long_answer, "Paris", scale="cosine")
    assert simeval.score(long_answer, "Paris", **v01) == _vector.bands_py(
        cosine, len(va), len(vb), PACKED_1
    )
    assert simeval.fingerprint() not in {simeval.fingerprint(**v01), "6dcf7c7bc602"}


def test_explanation_shows_both_numbers(tmp_path) -> None:
    from click.testing import CliRunner

    from simeval.cli import cli

    ref, out = "The capital of France is Paris, on the Seine.", "The capital of France is Paris."
    exp = simeval.explain(out, ref)
    assert exp.scale == "bands" and exp.cosine == simeval.score(out, ref, scale="cosine")
    assert exp.score == simeval.score(out, ref)
    assert sum(t.weight for t in exp.shared) == pytest.approx(exp.cosine, abs=1e-5)
    assert str(exp).startswith(f"cosine {exp.cosine:.4f} → score {exp.score:.4f}")
    assert exp.to_dict()["cosine"] == exp.cosine
    res = CliRunner().invoke(cli, ["score", out, ref, "--explain"])
    assert f"cosine {exp.cosine:.4f} → score {exp.score:.4f}" in res.output
    res = CliRunner().invoke(cli, ["score", out, ref, "--explain", "--json"])
    data = json.loads(res.output)
    assert data["explanation"]["cosine"] == exp.cosine and data["score"] == exp.score


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"form": "script"}, "form 'script'"),
        ({"knots": [0.5, 0.4, 0.6]}, "increase strictly"),
        ({"version": ""}, "no version"),
        ({"cjk_knots": [0.4, 0.5, 0.6]}, "cjk_knots"),
    ],
)
def test_a_bad_curve_file_is_refused(tmp_path, change, message) -> None:
    data = json.loads(bands_mod.CURVE_FILE.read_text(encoding="utf-8")) | change
    path = tmp_path / "bands.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        bands_mod.load_curve(path)


def test_a_global_curve_file_loads(tmp_path) -> None:
    data = json.loads(bands_mod.CURVE_FILE.read_text(encoding="utf-8"))
    path = tmp_path / "bands.json"
    path.write_text(json.dumps(data | {"form": "global", "shape": None}), encoding="utf-8")
    curve = bands_mod.load_curve(path)
    assert math.isinf(curve.allowance)
    assert _vector.bands_py(0.5525, 1000, 1, curve.packed()) == 0.8  # no length rule


@pytest.mark.skipif(not _vector.ACCELERATED, reason="C core not built")
def test_the_c_core_refuses_a_curve_of_the_wrong_size() -> None:
    from array import array

    from simeval.scoring._index import Index

    sc = simeval.get_scorer()
    va, vb = sc.vector("a cat"), sc.vector("a dog")
    with pytest.raises(ValueError, match="9 or 17 packed float64"):
        _vector.cosine(va, vb, False, b"", 1.0, b"", 1.0, b"short")
    with pytest.raises(ValueError, match="9 or 17 packed float64"):
        _vector.best(va, [vb], False, b"", 1.0, b"", 1.0, PACKED + b"x")
    with pytest.raises(ValueError, match="9 or 17 packed float64"):
        Index([vb], array("i", [0, 1]).tobytes(), b"", 1.0, b"\0" * 8)
    index = Index([vb], array("i", [0, 1]).tobytes(), b"", 1.0, PACKED)
    scores, _ = index.best(va)
    assert array("d", scores)[0] == sc.score("a cat", "a dog")
