"""The eval-set engine: bit-for-bit the scores of ``Scorer.score_detail``, eval by eval."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simeval.errors import SimevalError
from simeval.scoring.bench import synthetic_texts
from simeval.scoring.evalset import EvalSet, EvalSpec
from simeval.scoring.scorer import get_scorer

OPTION_SETS: list[tuple[tuple[str, object], ...]] = [
    (),
    (("stemming", False),),
    (("idf", "pair"),),
    (("ngram", 2),),
    (("prefix", 0),),
    (("prefix", 3), ("stop_words", 50)),
    (("sublinear_tf", False),),
    (("language", "french"),),
    (("input_weight", 1.0), ("negation", 1.0)),
    (("input_weight", 0.25), ("negation", 0.5)),
    (("tokenizer", "words"), ("input_weight", 1.0), ("negation", 1.0)),
]
WORDS = ["the", "cat", "cats", "sat", "on", "mat", "Paris", "capital", "France", "is", "a",
         "café", "naïve", "1,650", "3.5", "don't", "中文", "!!", "the the", "not", "never",
         "isn't", "北京", "首都", "😀", "no"]  # fmt: skip
text = st.lists(st.sampled_from(WORDS), min_size=0, max_size=10).map(" ".join)


def _expected(
    specs: list[EvalSpec], output: str, input: str | None = None
) -> list[tuple[float, int]]:
    return [
        get_scorer(**dict(s.options)).score_detail(output, list(s.references), input=input)
        for s in specs
    ]


@pytest.mark.parametrize("options", OPTION_SETS, ids=repr)
def test_bit_identical_to_score_detail_on_generated_texts(options):
    refs = synthetic_texts(600, words=25, seed=3)
    outputs = synthetic_texts(20, words=25, seed=4) + refs[:3] + ["", "  ", "the", "!!"]
    specs = [
        EvalSpec(i, f"e{i}", 1, tuple(refs[3 * i : 3 * i + 1 + i % 3]), 0.5, None, options)
        for i in range(200)
    ]
    specs.append(EvalSpec(900, "stop-words-only", 1, ("the", "!!"), 0.5, None, options))
    es = EvalSet(specs)
    questions = [None, "", outputs[0][:60], refs[4][:80], "Why isn't the cat on the mat?"]
    for k, output in enumerate(outputs):
        question = questions[k % len(questions)]
        got = [(r.score, r.matched_index) for r in es.score(output, input=question)]
        assert got == _expected(specs, output, question)  # exact equality, not approx


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.lists(text.filter(str.strip), min_size=1, max_size=3), min_size=1, max_size=6),
    text,
    st.one_of(st.none(), text),
    st.sampled_from(OPTION_SETS),
)
def test_bit_identical_on_random_texts(references, output, question, options):
    specs = [
        EvalSpec(i, f"e{i}", 1, tuple(refs), 0.8, None, options)
        for i, refs in enumerate(references)
    ]
    got = [(r.score, r.matched_index) for r in EvalSet(specs).score(output, input=question)]
    assert got == _expected(specs, output, question)


def test_mixed_option_groups_keep_eval_order_and_scope():
    specs = [
        EvalSpec(1, "a", 1, ("Paris is the capital of France.",), 0.8),
        EvalSpec(2, "b", 3, ("Paris is the capital of France.",), 0.8, None, (("idf", "pair"),)),
        EvalSpec(3, "scoped", 1, ("Berlin",), 0.8, "Capital of  GERMANY?"),
        EvalSpec(4, "c", 2, ("Rome, Italy",), 0.1),
    ]
    es = EvalSet(specs)
    out = "The capital of France is Paris."
    assert sorted(r.name for r in es.score(out)) == ["a", "b", "c"]
    names = sorted(r.name for r in es.score(out, input="capital of germany?"))
    assert names == ["a", "b", "c", "scoped"]
    by_name = {r.name: r for r in es.score(out)}
    assert by_name["a"].score == 1.0 and by_name["a"].passed
    assert by_name["b"].version == 3 and by_name["b"].passed
    assert by_name["c"].score == 0.0 and not by_name["c"].passed


def test_identical_texts_score_one_and_blank_output_zero():
    ref = "An answer, with punctuation!"
    es = EvalSet([EvalSpec(1, "x", 1, ("something else", ref), 0.99)])
    [r] = es.score("  an ANSWER   with punctuation ")
    assert (r.score, r.matched_index, r.passed) == (1.0, 1, True)
    [r] = es.score("   ")
    assert (r.score, r.matched_index, r.passed) == (0.0, 0, False)


def test_broken_eval_is_skipped_only_when_asked(tmp_path):
    missing = str(tmp_path / "gone.json")
    specs = [EvalSpec(1, "ok", 1, ("a b c",), 0.5), EvalSpec(2, "bad", 1, ("x",), 0.5, None,
             (("idf", missing),))]  # fmt: skip
    with pytest.raises(SimevalError, match=r"gone\.json"):
        EvalSet(specs)
    es = EvalSet(specs, skip_broken=True)
    assert [e.name for e in es.evals] == ["ok"]
    assert es.skipped and es.skipped[0][0] == "bad"
