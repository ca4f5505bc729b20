"""Properties from design.md "The score", held over generated text."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simeval
from simeval import _vector
from simeval.analyzer import TOKEN_PATTERN

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
    assert s == simeval.score(b, a, **opts)


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
    assert simeval.score(a, sep + b.title(), **opts) == s


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


@pytest.mark.skipif(not _vector.ACCELERATED, reason="C core not built")
@settings(max_examples=1000, deadline=None)
@given(
    s=st.text(alphabet=st.characters(codec="utf-8"), max_size=40)
    | st.text(alphabet="ab1,._ 9é²٣\u0301-", max_size=40)
)
def test_c_tokenizer_matches_the_regex(s: str) -> None:
    assert _vector.tokenize(s) == TOKEN_PATTERN.findall(s)


@pytest.mark.skipif(not _vector.ACCELERATED, reason="C core not built")
@settings(max_examples=300, deadline=None)
@given(s=any_text | text)
def test_c_vector_matches_python(s: str) -> None:
    sc = simeval.get_scorer()
    assert sc.vector(s) == _vector.vectorize_py(sc.analyzer.tokens(s), {}, sc._entry, True)


@settings(max_examples=100, deadline=None)
@given(outs=st.lists(text, max_size=8), data=st.data())
def test_score_many_equals_score_elementwise(outs, data) -> None:
    refs = [data.draw(text.filter(lambda t: t.strip())) for _ in outs]
    assert simeval.score_many(outs, refs, workers=1) == [
        simeval.score(o, r) for o, r in zip(outs, refs, strict=True)
    ]
