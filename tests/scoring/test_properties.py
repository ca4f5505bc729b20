"""Properties from design.md "The score", held over generated text."""

from __future__ import annotations

import unicodedata
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simeval
from simeval.scoring import _vector, written
from simeval.scoring.analyzer import CI_SIMPLE, WORDS_PATTERN, char_info, normalize

WORDS = [
    "cat",
    "cats",
    "dog",
    "running",
    "ran",
    "the",
    "a",
    "Paris",
    "capital",
    "1,650",
    "3.5",
    "café",
    "naïve",
    "Straße",
    "x²",
    "ﬁle",
    "中文",
    "٣",
    "_id",
    "don't",
    "well-known",
    "isn't",
    "not",
    "首都",
    "😀",
]
text = st.lists(st.sampled_from(WORDS), min_size=0, max_size=12).map(" ".join)
any_text = st.text(max_size=60)
ws = st.sampled_from([" ", "  ", "\t", "\n", " \r\n "])
CONFIGS = [
    {},
    {"idf": "pair"},
    {"stemming": False, "prefix": 0},
    {"ngram": 2},
    {"stop_words": 20, "sublinear_tf": False},
    {"input_weight": 0.25, "negation": 0.5},
    {"tokenizer": "words", "input_weight": 1.0, "negation": 1.0},
    {"language": "zh"},
    {"scale": "cosine"},
]
configs = st.sampled_from(CONFIGS)


@settings(max_examples=300, deadline=None)
@given(a=text, b=text, opts=configs)
def test_range_and_symmetry(a: str, b: str, opts: dict) -> None:
    if not b.strip():
        b = "reference"
    if not a.strip():
        a = "output"
    s = simeval.score(a, b, **opts)
    assert 0.0 <= s <= 1.0
    # the cosine is symmetric; its bands scale is not (an output much longer than its
    # reference gets lower knots), so symmetry is asked of the cosine
    cosine = {**opts, "scale": "cosine"}
    assert simeval.score(a, b, **cosine) == simeval.score(b, a, **cosine)


@settings(max_examples=200, deadline=None)
@given(a=any_text, opts=configs)
def test_identity(a: str, opts: dict) -> None:
    if a.strip():
        assert simeval.score(a, a, **opts) == 1.0


@settings(max_examples=200, deadline=None)
@given(a=text, b=text, sep=ws, opts=configs)
def test_case_whitespace_and_nfkc_do_not_change_the_score(a, b, sep, opts) -> None:
    if not a.strip() or not b.strip():
        return
    s = simeval.score(a, b, **opts)
    assert simeval.score(sep.join(a.upper().split(" ")) + sep, b, **opts) == s
    assert simeval.score(unicodedata.normalize("NFKD", a), b, **opts) == s
    # the reference's case marks its names (the name veto, simeval.scoring.vetoes): nothing
    # else of it counts
    titled = simeval.score(a, sep + b.title(), **opts)
    if titled != s:
        sc = simeval.get_scorer(**opts)
        assert (sc.veto(a, b) or "").startswith("name:") or (
            sc.veto(a, b.title()) or ""
        ).startswith("name:")
        opts = {**opts, "contradiction": False}
        assert simeval.score(a, sep + b.title(), **opts) == simeval.score(a, b, **opts)


@settings(max_examples=200, deadline=None)
@given(
    a=st.lists(st.sampled_from(["alpha", "beta", "gamma"]), min_size=1).map(" ".join),
    b=st.lists(st.sampled_from(["delta", "omega", "sigma"]), min_size=1).map(" ".join),
    opts=configs,
)
def test_disjoint_texts_score_zero(a, b, opts) -> None:
    assert simeval.score(a, b, **opts) == 0.0


@settings(max_examples=100, deadline=None)
@given(b=text, blank=st.sampled_from(["", " ", "\n\t "]))
def test_empty_output_is_zero(b, blank) -> None:
    if b.strip():
        assert simeval.score(blank, b) == 0.0
        assert simeval.explain(blank, b).reason == "output is empty"


# Characters where the piecewise normalisation of the C core could go wrong: combining marks,
# Hangul jamo that compose, compatibility forms, case folding to several characters, CJK,
# symbols, apostrophes of contractions.
TRICKY = (
    "ab1,._ 9é²٣\u0301\u0308-n't’ÉßẞﬁＡａ１０ｶﾞ\u3099\u309a"
    "\u1100\u1161\u11a8가각北京の한😀🏽\u200d\ufe0f°€™½ǅΣσςİ\u0345\u0f73\u0b47\u0b3e"
)
unicode_text = (
    st.text(alphabet=st.characters(codec="utf-8"), max_size=40)
    | st.text(alphabet=TRICKY, max_size=40)
    | st.lists(st.sampled_from([*WORDS, "isn't", "can’t", "won't", "n't", "北京是中国的首都"])).map(
        " ".join
    )
)


@pytest.mark.slow
@pytest.mark.skipif(not _vector.ACCELERATED, reason="C core not built")
@settings(max_examples=1500, deadline=None)
@given(s=unicode_text, tokenizer=st.sampled_from(["unicode", "words"]))
def test_c_tokenizer_and_normaliser_match_python(s: str, tokenizer: str) -> None:
    sc = simeval.get_scorer(tokenizer=tokenizer)
    assert sc._vz.normalize(s) == normalize(s)
    assert sc._vz.tokens(s) == sc.analyzer.tokens(s)
    if tokenizer == "words":
        assert sc._vz.tokens(s) == WORDS_PATTERN.findall(normalize(s))


@pytest.mark.skipif(not _vector.ACCELERATED, reason="C core not built")
@settings(max_examples=500, deadline=None)
@given(s=unicode_text, tokenizer=st.sampled_from(["unicode", "words"]))
def test_c_first_words_match_python(s: str, tokenizer: str) -> None:
    # the data-set runner names a reference's terms by their first word, in C when it can
    from simeval.scoring.explain import Explainer

    sc = simeval.get_scorer(tokenizer=tokenizer)
    python = Explainer(sc).tokens(s)  # the Python tokenizer, term by term
    words = sc.first_words(s)
    assert words is not None
    assert words == dict(reversed(python))
    assert list(words) == list(dict.fromkeys(h for h, _ in python))  # first appearance
    assert set(words) == set(array("Q", sc.vector(s))[0::3])


def test_pieces_cut_only_where_normalisation_allows() -> None:
    # The C core normalises a text a piece at a time, cutting before "simple" characters;
    # that is exact only if no simple character is the second of a canonical composition.
    seconds = set()
    for cp in range(0x110000):
        d = unicodedata.decomposition(chr(cp))
        if d and not d.startswith("<") and len(d.split()) == 2:
            seconds.add(int(d.split()[1], 16))
    seconds |= set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))  # Hangul V and T
    assert not [hex(c) for c in seconds if char_info(c) & CI_SIMPLE]


@pytest.mark.skipif(not _vector.ACCELERATED, reason="C core not built")
@settings(max_examples=300, deadline=None)
@given(s=any_text | text)
def test_c_vector_matches_python(s: str) -> None:
    sc = simeval.get_scorer()
    tokens = sc.analyzer.tokens(written.unglue_py(s))
    assert sc.vector(s) == _vector.vectorize_py(tokens, {}, sc._entry, True)


glue_text = st.text(alphabet="aAzZs t h n d r 0 9 é\u00e9\u4e00", max_size=24) | st.text(
    alphabet="a Z t h 0 1 2 5 9 - \u2013 . ,", max_size=24
)


@pytest.mark.skipif(not _vector.ACCELERATED, reason="C core not built")
@settings(max_examples=500, deadline=None)
@given(s=glue_text | text)
def test_c_unglue_matches_python(s: str) -> None:
    # the C core reads glued words apart exactly as the regular expression does
    assert written.unglue(s) == written.unglue_py(s)


@pytest.mark.skipif(not _vector.ACCELERATED, reason="C core not built")
@settings(max_examples=300, deadline=None)
@given(a=unicode_text, b=unicode_text, q=unicode_text, opts=configs)
def test_c_score_matches_python(a: str, b: str, q: str, opts: dict) -> None:
    sc = simeval.get_scorer(**opts)
    va, vb, terms = sc.vector(a), sc.vector(b), sc.input_terms(q)
    args = (sc.pair, terms, sc.input_weight, sc.negators, sc.negation, sc.curve)
    assert _vector.cosine(va, vb, *args) == _vector.cosine_py(va, vb, *args)
    assert _vector.best(va, [vb, va], *args) == _vector.best_py(va, [vb, va], *args)
    assert _vector.has_any(va, sc.negator_hashes) == _vector.has_any_py(va, sc.negator_hashes)


@settings(max_examples=100, deadline=None)
@given(outs=st.lists(text, max_size=8), data=st.data())
def test_score_many_equals_score_elementwise(outs, data) -> None:
    refs = [data.draw(text.filter(lambda t: t.strip())) for _ in outs]
    assert simeval.score_many(outs, refs, workers=1) == [
        simeval.score(o, r) for o, r in zip(outs, refs, strict=True)
    ]


@settings(max_examples=300, deadline=None)
@given(s=unicode_text, tokenizer=st.sampled_from(["unicode", "words"]))
def test_rank_orders_terms_as_python_sorts_them(s: str, tokenizer: str) -> None:
    # a reference's terms heaviest first, ties by word: the order of missing terms in runs
    from simeval.scoring.explain import Explainer

    sc = simeval.get_scorer(tokenizer=tokenizer)
    vec = sc.vector(s)
    expected = Explainer(sc).ranked(s, vec)
    for rank in (_vector.rank, _vector.rank_py):
        packed, words = rank(vec, Explainer(sc).words(s))
        assert list(zip(array("Q", packed), words, strict=True)) == expected
