"""Chinese, Japanese and Korean text, symbols, the question's own words, and negation."""

from __future__ import annotations

import math

import pytest

import simeval
from simeval.scoring import _vector
from simeval.scoring.analyzer import LANGUAGES, Analyzer, has_stemmer
from simeval.scoring.idf import BackgroundIdf
from simeval.scoring.scorer import PREVIOUS_DEFAULTS, Scorer

OFF = {"input_weight": 1.0, "negation": 1.0}

# Scorers with the C core and the Python reference: every figure below must hold for both.
SCORERS = ["c", "python"]


def scorer(kind: str, **options: object) -> Scorer:
    s = Scorer(**options)
    if kind == "python":
        s._vz = None
    elif s._vz is None:
        pytest.skip("C core not built")
    return s


# -- scripts without spaces -------------------------------------------------------------------
@pytest.mark.parametrize("kind", SCORERS)
def test_chinese_characters_are_terms(kind: str) -> None:
    s = scorer(kind)
    capital = s.score("北京是中国的首都", "北京是中国最大的沙漠")  # capital vs largest desert
    assert 0.2 < capital < 0.8
    assert s.score("东京是日本的首都。", "日本的首都是东京。") >= 0.9  # the same, reordered
    assert s.score("东京是日本的首都。", "日本的首都是东京。") == 1.0  # the same characters


@pytest.mark.parametrize("kind", SCORERS)
def test_japanese_and_korean_pairs(kind: str) -> None:
    s = scorer(kind)
    # "a woman is riding a horse" / "a woman rides a horse" vs "a man is cooking"
    ja_same = s.score("女性が馬に乗っています。", "女の人が馬に乗っている。")
    ja_other = s.score("女性が馬に乗っています。", "男性が料理をしています。")
    # in the bands' words: the paraphrase is "same content", the other pair not even moderate
    assert ja_same >= 0.8 > 0.7 > ja_other > 0.0
    ko_same = s.score("한 남자가 말을 타고 있다.", "남자가 말을 타고 있다.")
    ko_other = s.score("한 남자가 말을 타고 있다.", "여자가 요리를 하고 있다.")
    assert ko_same > 0.9 and ko_other < 0.7


@pytest.mark.parametrize("kind", SCORERS)
def test_mixed_latin_and_cjk(kind: str) -> None:
    s = scorer(kind)
    tokens = s.analyzer.tokens("用Python 3.11写代码, running fast")
    assert tokens == ["用", "python", "3.11", "写", "代", "码", "running", "fast"]
    assert s.score("用Python写代码", "用Java写代码") < s.score("用Python写代码", "用python写代码")
    assert s.score("用Python写代码", "用python写代码") == 1.0
    # Latin words keep their stems and their English weights in mixed text
    assert s.score("我在running", "我在runs") == 1.0


def test_cjk_weights_come_from_the_merged_table() -> None:
    idf = BackgroundIdf(Analyzer())
    assert idf.idf("的") < 3.0 < idf.idf("首") < idf.idf("沙")  # common < specific
    assert idf.idf("한") < idf.idf("쥐")  # Hangul from the Korean list
    assert idf.idf("の") < 2.5  # kana from the Japanese list
    # the same table whatever the language (no language detection)
    assert BackgroundIdf(Analyzer("german")).idf("首") == idf.idf("首")


@pytest.mark.parametrize("kind", SCORERS)
def test_emoji_and_symbols_are_terms(kind: str) -> None:
    s = scorer(kind)
    assert s.analyzer.tokens("Great 👍🏽 at 25°C for €5") == [
        "great", "👍", "🏽", "at", "25", "°", "c", "for", "€", "5",
    ]  # fmt: skip
    assert s.score("🎉", "🎉") == 1.0  # an emoji-only output is scored
    assert s.score("🎉🎉", "🎉 🎂") > 0.0
    assert s.score("👍", "👎") == 0.0
    assert simeval.explain("🎉", "🎉 🎂").missing[0].term == "🎂"
    assert s.analyzer.tokens("broken \ufffd data") == ["broken", "data"]


@pytest.mark.parametrize("language", ["zh", "ja", "ko", "vi", "uk", "he", "fa", "sh", "ms"])
def test_every_wordfreq_language(language: str) -> None:
    s = Scorer(language=language)
    assert s.score("hello world 123", "hello world 123") == 1.0
    assert s.describe()["stemming"] == has_stemmer(s.analyzer.language)


def test_languages_are_those_of_wordfreq() -> None:
    import wordfreq

    assert {code for _, code in LANGUAGES.values()} == set(
        wordfreq.available_languages(wordlist="best")
    )
    assert Scorer(language="uk").describe()["stemming"] is False  # no Snowball for Ukrainian
    assert Scorer(language="ru").describe()["stemming"] is True
    with pytest.raises(simeval.InvalidOption, match="unsupported language 'th'"):
        Scorer(language="th")


def test_previous_default_gives_the_previous_scores_and_fingerprint() -> None:
    # Scores and fingerprint of simeval 0.1.0's default, computed with that version.
    pairs = [
        ("北京是中国的首都", "北京是中国最大的沙漠"),
        ("The test isn't valid", "The test is not valid"),
        ("I love it 😀", "I love it"),
        ("Ünïcödé ﬁle x² café", "unicode file x2 cafe"),
        ("Stocks fell 3.5 percent", "stocks dropped 3.5%"),
    ]
    before = [
        "0x1.0000000000000p+0",
        "0x1.1e87e4309d0f6p-1",
        "0x1.0000000000000p+0",
        "0x1.8dddf01aec562p-2",
        "0x1.aa091b34ff659p-1",
    ]
    for kind in SCORERS:
        if kind == "c" and not _vector.ACCELERATED:
            continue
        s = scorer(kind, **PREVIOUS_DEFAULTS)
        assert [s.score(a, b).hex() for a, b in pairs] == before
        assert s.fingerprint == "bfa5232a5ee8"
    assert simeval.fingerprint() != "bfa5232a5ee8"


# -- scoring with the question ---------------------------------------------------------------
QUESTION = "What is the role of a prototype program in problem solving?"
REFERENCE = "To simulate the behaviour of portions of the desired software product."
PARROT = "The role of a prototype program in problem solving is a prototype program."
ANSWER = "It simulates portions of the software product before it is built."


@pytest.mark.parametrize("kind", SCORERS)
def test_input_weight_one_changes_nothing(kind: str) -> None:
    # with the answer reading off (the question's presence turns it on, see test_answers.py)
    for opts in ({}, {"idf": "pair"}, {"negation": 1.0}):
        s = scorer(kind, **opts, input_weight=1.0, answer=False)
        for out in (PARROT, ANSWER):
            plain = s.score(out, REFERENCE)
            assert s.score(out, REFERENCE, QUESTION) == plain  # exactly
            assert s.score(out, REFERENCE) == Scorer(**opts, input_weight=0.5, answer=False).score(
                out, REFERENCE
            )  # and without an input, the weight does not matter


@pytest.mark.parametrize("kind", SCORERS)
def test_question_words_count_less(kind: str) -> None:
    s = scorer(kind)
    ref = "A prototype program simulates portions of the product."
    parrot = "A prototype program is a prototype program in problem solving."
    assert s.score(parrot, ref, QUESTION) < s.score(parrot, ref)
    assert s.score(ANSWER, ref, QUESTION) > s.score(ANSWER, ref)


@pytest.mark.parametrize("kind", SCORERS)
def test_input_weight_formula(kind: str) -> None:
    # "cat dog" vs "cat fox", input "cat": cat at weight x in both texts.
    s = scorer(kind, input_weight=0.25, negation=1.0, scale="cosine")  # the cosine's formula
    idf = s.idf.idf
    c, d, f = idf("cat") * 0.25, idf("dog"), idf("fox")
    expected = c * c / (math.sqrt(c * c + d * d) * math.sqrt(c * c + f * f))
    assert s.score("cat dog", "cat fox", "a cat?") == pytest.approx(expected, abs=1e-12)
    zero = scorer(kind, input_weight=0.0)  # the bands scale keeps 0 and 1
    assert zero.score("cat dog", "cat fox", "a cat?") == 0.0  # only the input's word shared
    assert zero.score("cat", "cat", "cat") == 1.0  # identical texts stay 1.0


def test_capture_api_gives_score_detail_bit_for_bit() -> None:
    s = simeval.get_scorer()
    refs = [REFERENCE, "A prototype shows the program can be built.", "不是这样"]
    prepared = s.prepare(refs)
    for out in (PARROT, ANSWER, "The prototype is not a product.", "是这样"):
        for q in (QUESTION, None, "", "是吗"):
            vec, terms = s.vector(out), s.input_terms(q)
            got = s.best_vector(vec, prepared, terms, s.asks(q), out, refs)
            assert got == s.score_detail(out, refs, input=q)
            assert s.best(out, prepared, q, refs) == got
    assert s.input_terms(None) == s.input_terms("  ") == b""
    assert Scorer(input_weight=1.0).input_terms(QUESTION) == b""
    terms = s.input_terms("cat, cat and dog")
    assert len(terms) == 3 * 8 and terms == _vector.hashes(s.vector("dog and cat"))


def test_score_many_and_explain_take_the_input() -> None:
    outs, refs, qs = [PARROT, ANSWER], [REFERENCE, REFERENCE], [QUESTION, None]
    assert simeval.score_many(outs, refs, qs, workers=1) == [
        simeval.score(PARROT, REFERENCE, QUESTION),
        simeval.score(ANSWER, REFERENCE),
    ]
    assert simeval.score_many(outs, refs, workers=1) == [
        simeval.score(o, r) for o, r in zip(outs, refs, strict=True)
    ]
    with pytest.raises(simeval.InvalidInput, match="different lengths"):
        simeval.score_many(outs, refs, [QUESTION], workers=1)
    exp = simeval.explain(PARROT, REFERENCE, input=QUESTION)
    assert exp.score == simeval.score(PARROT, REFERENCE, QUESTION)
    assert {"prototype", "program", "role"} <= set(exp.demoted)
    assert all(t.demoted for t in exp.extra if t.term in {"prototype", "program"})
    assert "in the input" in str(exp)
    assert sum(t.weight for t in exp.shared) == pytest.approx(exp.cosine, abs=1e-5)
    assert not simeval.explain(PARROT, REFERENCE).demoted


# -- negation ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", SCORERS)
def test_negation_applied_once_when_one_side_negates(kind: str) -> None:
    # the factor multiplies the cosine (the bands scale maps the product)
    s = scorer(kind, negation=0.9, scale="cosine")
    off = scorer(kind, negation=1.0, scale="cosine")
    a, b = "The test is not valid", "The test is valid"
    assert s.score(a, b) == off.score(a, b) * 0.9
    assert s.score(b, a) == s.score(a, b)
    # "n't" is a negator: the contraction is read as its word and "not"
    assert s.analyzer.tokens("It isn't valid") == ["it", "isn", "not", "valid"]
    c, d = "The test isn't valid", "The test is valid"
    assert s.score(c, d) == off.score(c, d) * 0.9
    # both sides negate: no factor; several negators on one side: the factor once
    e, f = "The test is not valid", "No, the test isn't valid"
    assert s.score(e, f) == off.score(e, f)
    g = "No, the test is never ever not valid"
    assert s.score(g, b) == off.score(g, b) * 0.9
    assert s.score(a, a) == 1.0
    # Chinese and Korean negators count in every language
    assert s.score("他不是学生", "他是学生") == off.score("他不是学生", "他是学生") * 0.9
    assert (
        s.score("비가 오지 않는다", "비가 온다") == off.score("비가 오지 않는다", "비가 온다") * 0.9
    )


def test_negation_in_explanation_and_other_languages() -> None:
    exp = simeval.explain("The test is not valid", "The test is valid")
    # the factor on the cosine, and the veto that then keeps the pair below the band
    assert exp.negation == 0.9 and exp.veto == 'contradiction: "not" only in the output'
    assert exp.reason == exp.veto and exp.score < 0.7
    plain = simeval.explain("The test is not valid", "The test is valid", contradiction=False)
    assert plain.veto is None and "negator" in (plain.reason or "")
    assert sum(t.weight for t in exp.shared) == pytest.approx(exp.cosine, abs=1e-5)
    de = Scorer(language="de")
    assert de.score("Der Test ist nicht gültig", "Der Test ist gültig") < de.score(
        "Der Test ist gültig", "Der Test ist gültig."
    )
    assert de.has_negator(de.vector("kein Test")) and not de.has_negator(de.vector("Test"))
    # negators are kept even when stop words are dropped
    s = Scorer(stop_words=100)
    assert s.has_negator(s.vector("it is not"))


def test_options_are_validated_and_in_the_fingerprint() -> None:
    base = simeval.fingerprint()
    assert (
        len({base, simeval.fingerprint(input_weight=0.3), simeval.fingerprint(negation=0.8)}) == 3
    )
    assert simeval.fingerprint(tokenizer="words") != base
    for bad in ({"input_weight": 1.5}, {"negation": -0.1}, {"negation": "x"}, {"tokenizer": "x"}):
        with pytest.raises(simeval.InvalidOption):
            simeval.score("a", "b", **bad)
    assert Scorer(input_weight="0.5").input_weight == 0.5
