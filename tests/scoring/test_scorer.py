"""The scorer: the formula, its properties, its options and its errors."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from typing import Any

import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

import simeval
from simeval.scoring import _vector
from simeval.scoring.analyzer import TOKEN_PATTERN
from simeval.scoring.idf import BACKGROUND_DOC_LEN, BackgroundIdf, IdfTable
from simeval.scoring.scorer import check_threshold

# the cosine itself (scale=cosine): what scikit-learn computes and the formulas below give
NAIVE = {"idf": "pair", "stemming": False, "prefix": 0, "sublinear_tf": False, "scale": "cosine"}
COSINE = {"scale": "cosine"}


def sklearn_pair(a: str, b: str) -> float:
    vec = TfidfVectorizer(token_pattern=TOKEN_PATTERN.pattern)
    m = vec.fit_transform([a, b])
    return float(m[0].multiply(m[1]).sum())


PAIRS = [
    ("The cat sat on the mat.", "A cat was sitting on a mat."),
    ("Paris is the capital of France", "The capital of France is Paris, a big city"),
    ("Stocks fell 3.5 percent on Monday", "On Monday stocks fell by 3.5 percent and 1,650 more"),
    ("the the the cat", "the cat cat dog"),
    ("completely different words here", "nothing shared at all"),
]
# PAIRS on the bands scale (bands-1): changed by design from the cosines (issue 17)
BANDS_PINNED = [0.889856, 0.943954, 0.927521, 0.950391, 0.0]
PARIS = ("Paris is a city in France", "The capital of France is Paris")


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_pair_mode_equals_sklearn(a: str, b: str) -> None:
    assert simeval.score(a, b, **NAIVE) == pytest.approx(sklearn_pair(a, b), abs=1e-9)


def test_golden_pair_value_by_hand() -> None:
    # "a b" vs "a c": a is in both texts (idf 1), b and c in one (idf ln(3/2) + 1);
    # cosine = 1 / (1 + idf1^2).
    idf1 = math.log(1.5) + 1
    assert simeval.score("a b", "a c", **NAIVE) == pytest.approx(1 / (1 + idf1**2), abs=1e-12)
    assert simeval.score("a b", "a c", **NAIVE) == pytest.approx(0.336097, abs=1e-6)


def test_golden_background_value_by_hand() -> None:
    # "cats run" vs "cat runs": the stems cat/run are shared with one occurrence each -> 1.0;
    # "cats run fast" vs "cat runs": cosine = (w_cat^2 + w_run^2) / (|a| |b|).
    assert simeval.score("cats run", "cat runs") == 1.0
    idf = BackgroundIdf(simeval.get_scorer().analyzer)
    w = {t: idf.idf(t) for t in ("cat", "run", "fast")}
    expected = (w["cat"] ** 2 + w["run"] ** 2) / (
        math.sqrt(w["cat"] ** 2 + w["run"] ** 2 + w["fast"] ** 2)
        * math.sqrt(w["cat"] ** 2 + w["run"] ** 2)
    )
    got = simeval.score("cats run fast", "cat runs", **COSINE)
    assert got == pytest.approx(expected, abs=1e-12)


def test_golden_values_pinned() -> None:
    # Regression guard: a change to these numbers must come with a new ALGORITHM_VERSION.
    cosines = [round(simeval.score(a, b, **COSINE), 6) for a, b in PAIRS]
    assert cosines == [0.680545, 0.829059, 0.778939, 0.848693, 0.0]
    # the default scale maps them through the bands curve (its version is in the fingerprint)
    got = [round(simeval.score(a, b), 6) for a, b in PAIRS]
    assert got == BANDS_PINNED


def test_background_weight_formula_and_unknown_terms() -> None:
    idf = BackgroundIdf(simeval.get_scorer().analyzer)
    assert idf.idf("the") == pytest.approx(math.log(1 + 1 / (BACKGROUND_DOC_LEN * 0.0537)), 0.01)
    assert idf.idf("the") < 2.0 < 6.0 < idf.idf("capi")  # "capital" after stem + prefix 4
    unknown = idf.idf("zzqxj")
    assert unknown == pytest.approx(math.log(1 + 1 / (BACKGROUND_DOC_LEN * idf._floor)))
    assert unknown > idf.idf("capi")


def test_properties_basic() -> None:
    assert simeval.score("same words here", "same words here") == 1.0
    assert simeval.score("alpha beta", "gamma delta") == 0.0
    a, b = "The quick brown fox jumps", "A quick fox leaps over the dog"
    assert simeval.score(a, b) == simeval.score(b, a)
    assert 0.0 < simeval.score(a, b) < 1.0
    assert simeval.score("  THE quick\tBrown  fox ", "the quick brown fox") == 1.0
    assert simeval.score("ﬁne café", "fine cafe\u0301") == 1.0  # NFKC ligature + combining


def test_identical_text_without_terms_is_one() -> None:
    assert simeval.score("the of and", "The  of and", stop_words=True) == 1.0
    assert simeval.score("!!!", "!!!") == 1.0


def test_empty_output_scores_zero_with_reason() -> None:
    assert simeval.score("", "reference text") == 0.0
    assert simeval.score("  \n\t", "reference text") == 0.0
    exp = simeval.explain("   ", "The capital of France is Paris")
    assert exp.score == 0.0 and exp.reason == "output is empty"
    assert [t.term for t in exp.missing][:2] == ["paris", "capital"]


def test_several_references_best_match_is_named() -> None:
    refs = ["The sky is blue.", "Water boils at 100 degrees Celsius."]
    s, idx = simeval.get_scorer().score_detail("water boils at 100 degrees", refs)
    assert idx == 1 and s == simeval.score("water boils at 100 degrees", refs[1])
    assert simeval.score("water boils at 100 degrees", refs) == s
    exp = simeval.explain("water boils at 100 degrees", refs)
    assert exp.matched_reference == 1 and exp.reference == refs[1]


def test_explain_contributions_sum_to_score() -> None:
    exp = simeval.explain("Paris is a city in France", "The capital of France is Paris", top=100)
    # the contributions sum to the cosine; the score is the cosine on the bands scale
    assert sum(t.weight for t in exp.shared) == pytest.approx(exp.cosine, abs=1e-5)
    assert exp.cosine == simeval.score(*PARIS, **COSINE) < exp.score == simeval.score(*PARIS)
    assert f"cosine {exp.cosine:.4f} → score {exp.score:.4f}" in str(exp)
    assert {t.term for t in exp.shared} == {"paris", "france", "is"}
    assert exp.missing[0].term == "capital"
    assert {t.term for t in exp.extra} >= {"city", "a", "in"}
    assert exp.fingerprint == simeval.fingerprint()
    assert json.loads(json.dumps(exp.to_dict()))["score"] == exp.score
    assert "missing from output: capital" in str(exp)


def test_explain_pair_mode_contributions_sum_to_score() -> None:
    exp = simeval.explain("a b b c", "a c d", top=100, **NAIVE)
    assert sum(t.weight for t in exp.shared) == pytest.approx(exp.score, abs=1e-5)
    assert exp.cosine == exp.score and exp.scale == "cosine"
    assert str(exp).startswith("score ")
    bands = simeval.explain("a b b c", "a c d", top=100, **{**NAIVE, "scale": "bands"})
    assert sum(t.weight for t in bands.shared) == pytest.approx(bands.cosine, abs=1e-5)
    assert bands.cosine == exp.score


def test_options_change_score_and_fingerprint() -> None:
    a, b = "The organization organized meetings", "An organizer organizes a meeting"
    base = simeval.score(a, b)
    assert simeval.score(a, b, stemming=False, prefix=0) < base
    fps = {
        simeval.fingerprint(),
        simeval.fingerprint(stemming=False),
        simeval.fingerprint(idf="pair"),
        simeval.fingerprint(sublinear_tf=False),
        simeval.fingerprint(ngram=2),
        simeval.fingerprint(stop_words=50),
        simeval.fingerprint(language="german"),
    }
    assert len(fps) == 7
    assert simeval.fingerprint(language="en") == simeval.fingerprint()


def test_ngrams_and_stop_words() -> None:
    a, b = "new york is big", "york new is big"
    assert simeval.score(a, b) == 1.0
    assert simeval.score(a, b, ngram=2) < 1.0
    assert simeval.score("the cat", "the dog", stop_words=True) == 0.0
    assert simeval.score("the cat", "the dog") > 0.0


def test_other_languages() -> None:
    assert simeval.score("Die Katzen schlafen", "Die Katze schläft", language="de") > 0.5
    assert simeval.score("Les chats dorment", "le chat dort", language="french") > 0.3


def test_corpus_idf_fit_save_load(tmp_path) -> None:
    texts = ["the cat sat", "the dog ran", "the cat ran", "a bird flew"]
    table = simeval.fit_idf(texts)
    assert table.n_docs == 4 and table.df["the"] == 3
    assert table.idf("the") == pytest.approx(math.log(5 / 4) + 1)
    assert table.idf("unseen") == pytest.approx(math.log(5) + 1)
    path = tmp_path / "idf.json"
    table.save(path)
    loaded = IdfTable.load(path)
    assert loaded == table and loaded.version == table.version
    s_obj = simeval.score("the cat sat", "the cat ran", idf=table)
    s_path = simeval.score("the cat sat", "the cat ran", idf=str(path))
    assert s_obj == s_path
    assert s_obj != simeval.score("the cat sat", "the cat ran")
    assert simeval.fingerprint(idf=str(path)) != simeval.fingerprint()
    assert simeval.fit_idf([*texts, "more"]).version != table.version


def test_corpus_idf_errors(tmp_path) -> None:
    table = simeval.fit_idf(["one text"], stemming=False)
    with pytest.raises(simeval.InvalidOption, match="different analyzer options"):
        simeval.score("a", "b", idf=table)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(simeval.InvalidInput, match="not an IDF table"):
        simeval.score("a", "b", idf=str(bad))
    with pytest.raises(simeval.NotFound, match="not found"):
        simeval.score("a", "b", idf=str(tmp_path / "missing.json"))
    doc = json.loads(
        json.dumps(
            {
                "format": "simeval-idf",
                "analyzer": {},
                "n_docs": 1,
                "df": {"a": 1},
                "version": "000000000000",
            }
        )
    )
    bad.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(simeval.InvalidInput, match="corrupt"):
        IdfTable.load(bad)
    with pytest.raises(simeval.InvalidInput, match="no texts"):
        simeval.fit_idf([])
    with pytest.raises(simeval.InvalidType, match="text 1"):
        simeval.fit_idf(["ok", None])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("output", "reference", "error", "message"),
    [
        (None, "ref", simeval.InvalidType, "output must be a string, not NoneType"),
        (42, "ref", simeval.InvalidType, "output must be a string, not int"),
        ("out", None, simeval.InvalidType, "reference must be a string or a list"),
        ("out", b"ref", simeval.InvalidType, "reference must be a string or a list"),
        ("out", "", simeval.InvalidInput, "reference answer is empty"),
        ("out", "   ", simeval.InvalidInput, "reference answer is empty"),
        ("out", [], simeval.InvalidInput, "at least one reference answer"),
        ("out", ["ok", ""], simeval.InvalidInput, "reference answer 2 is empty"),
        ("out", ["ok", 3], simeval.InvalidType, "reference answer 2 must be a string"),
    ],
)
def test_bad_input(output, reference, error, message) -> None:
    with pytest.raises(error, match=message):
        simeval.score(output, reference)
    with pytest.raises(error, match=message):
        simeval.explain(output, reference)
    assert issubclass(error, simeval.SimevalError)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"stemmming": True}, "unknown scorer option 'stemmming'"),
        ({"language": "klingon"}, "unsupported language 'klingon'"),
        ({"prefix": -1}, "'prefix' must be in"),
        ({"ngram": 9}, "'ngram' must be in"),
        ({"stemming": "maybe"}, "'stemming' must be true or false"),
        ({"idf": 3}, "'idf' must be background, pair or a table file"),
        ({"idf": {}}, "must be plain values"),
    ],
)
def test_bad_options(options, message) -> None:
    with pytest.raises(simeval.InvalidOption, match=message):
        simeval.score("a", "b", **options)


@pytest.mark.parametrize("value", [1.5, -0.1, float("nan"), float("inf"), "abc", None, True])
def test_bad_threshold(value) -> None:
    with pytest.raises(simeval.InvalidInput, match="threshold must be a number in"):
        check_threshold(value)


def test_threshold_accepts_numbers_and_strings() -> None:
    assert check_threshold(0) == 0.0 and check_threshold("0.75") == 0.75
    assert simeval.DEFAULT_THRESHOLD == 0.80


@pytest.mark.process
def test_score_many_equals_score() -> None:
    outs = [p[0] for p in PAIRS] * 3 + ["", "x"]
    refs = [p[1] for p in PAIRS] * 3 + ["a", ["x", "y"]]
    expected = [simeval.score(o, r) for o, r in zip(outs, refs, strict=True)]
    assert simeval.score_many(outs, refs, workers=1) == expected
    # several processes and chunks, fed from generators
    got = list(simeval.iter_scores(iter(outs), iter(refs), workers=2, chunk_size=3))
    assert got == expected
    assert simeval.score_many(outs, refs, workers=2, **NAIVE) == [
        simeval.score(o, r, **NAIVE) for o, r in zip(outs, refs, strict=True)
    ]


@pytest.mark.process
def test_score_many_errors() -> None:
    with pytest.raises(simeval.InvalidInput, match="different lengths"):
        simeval.score_many(["a", "b"], ["a"], workers=1)
    with pytest.raises(simeval.InvalidType, match="not a string"):
        simeval.score_many("abc", ["a"], workers=1)
    with pytest.raises(simeval.InvalidInput, match="workers must be a positive integer"):
        simeval.score_many(["a"], ["a"], workers=0)
    with pytest.raises(simeval.InvalidType, match="output must be a string"):
        simeval.score_many(["a"] * 10 + [None], ["a"] * 11, workers=2, chunk_size=2)
    assert simeval.score_many([], [], workers=2) == []


def _in_fresh_process(
    a: str, b: str, env: dict[str, str] | None = None, **options: Any
) -> list[Any]:
    """[score, fingerprint] of the pair computed by a new Python process."""
    code = (
        "import simeval, json, sys; a, b, o = json.load(sys.stdin); "
        "print(json.dumps([simeval.score(a, b, **o), simeval.fingerprint(**o)]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps([a, b, options]),
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    result: list[Any] = json.loads(out.stdout)
    return result


@pytest.mark.process
def test_same_numbers_in_a_fresh_process() -> None:
    a, b = PAIRS[1]
    assert _in_fresh_process(a, b) == [simeval.score(a, b), simeval.fingerprint()]


@pytest.mark.process
def test_background_table_cache_gives_the_same_scores(tmp_path) -> None:
    """The derived background table is cached on disk; a cached, missing or corrupt cache all
    give bit-identical scores (each run in a fresh process, so nothing is shared in memory).
    Options whose table the package does not ship (it ships the default's), so one is derived."""
    a, b = PAIRS[1]
    env = {**os.environ, "SIMEVAL_CACHE_DIR": str(tmp_path / "cache")}
    options = {"prefix": 5}

    def fresh() -> float:
        return float(_in_fresh_process(a, b, env, **options)[0])

    expected = simeval.score(a, b, **options)
    assert fresh() == expected  # derives the table and writes the cache
    (cached,) = (tmp_path / "cache").glob("background-english-*.json")
    assert json.loads(cached.read_text())["freq"]["capit"] > 0
    assert fresh() == expected  # reads the cache
    cached.write_text('{"freq": {"capi"')  # a torn write: ignored, derived again
    assert fresh() == expected
    assert json.loads(cached.read_text())["floor"] > 0  # and rewritten whole


def test_c_core_matches_python_reference() -> None:
    if not _vector.ACCELERATED:
        pytest.skip("C core not built")
    sc = simeval.get_scorer()
    texts = [p[0] for p in PAIRS] + [p[1] for p in PAIRS] + ["Ünïcödé 中文 ½ x²", "a " * 3000]
    vecs = []
    for t in texts:
        v = sc.vector(t)
        assert v == _vector.vectorize_py(sc.analyzer.tokens(t), {}, sc._entry, True)
        vecs.append(v)
    for a in vecs:
        for b in vecs:
            assert _vector.cosine(a, b, False) == _vector.cosine_py(a, b, False)
            assert _vector.cosine(a, b, True) == _vector.cosine_py(a, b, True)
        assert _vector.best(a, vecs, False) == _vector.best_py(a, vecs, False)


@pytest.mark.slow
def test_large_text_is_scored() -> None:
    big = "The quick brown fox jumps over the lazy dog. " * 230_000  # ~10 MB
    assert len(big) > 10_000_000
    assert simeval.score(big, "the quick brown fox") > 0.5
    assert simeval.score(big, big) == 1.0


def test_c_core_keeps_no_big_buffers_after_a_big_text() -> None:
    """After one large text, later small texts use tables as small as before (the scratch
    counter and the normalised copy of the text are not kept at their grown size)."""
    if not _vector.ACCELERATED:
        pytest.skip("C core not built")
    # whole words (20,000 distinct terms below), read as written (no glued words read apart)
    sc = simeval.scoring.scorer.Scorer(prefix=0, answer=False)
    small = "The quick brown fox jumps over the lazy dog"
    sc.vector(small)
    before = sc._vz.sizes()
    # ~1.3 MB; 20,000 distinct terms need a 65,536-slot counter, which used to be kept
    big = " ".join(f"word{i % 20_000} café" for i in range(100_000))
    vec = sc.vector(big)
    assert len(vec) == (20_000 + 1) * 24
    cells, scratch, norm = sc._vz.sizes()
    assert scratch <= 1024 and norm <= 65536
    later = "The lazy dog sleeps"  # a text not seen yet: the C core vectorises it
    assert sc.vector(later) == _vector.vectorize_py(sc.analyzer.tokens(later), {}, sc._entry, True)
    assert sc._vz.sizes()[1:] == before[1:]
    assert cells > before[0]  # the token cache itself stays warm


def test_c_core_normalises_only_the_pieces_that_need_it() -> None:
    if not _vector.ACCELERATED:
        pytest.skip("C core not built")
    from simeval.scoring.analyzer import char_info, normalize

    pieces: list[str] = []

    def fold(piece: str) -> str:
        pieces.append(piece)
        return normalize(piece)

    sc = simeval.scoring.scorer.Scorer()
    vz = _vector.Vectorizer(sc._entry, char_info, fold)
    text = "Don’t say “café” — Ünïcode is fine, 北京 😀"
    assert vz.normalize(text) == normalize(text)
    assert pieces == []  # typographic quotes, accents, CJK, emoji: nothing to fold
    text = "a ﬁle of x² and ＡＢ, e\u0301"
    assert vz.normalize(text) == normalize(text)
    assert pieces == [" ﬁ", "x²", " ＡＢ", "e\u0301"]
    assert vz.tokens(text) == sc.analyzer.tokens(text)


@pytest.mark.parametrize(
    ("valid", "invalid"),
    [
        ({"sublinear_tf": False}, {"sublinear_tf": 0}),
        ({"sublinear_tf": True}, {"sublinear_tf": 1}),
        ({"synonyms": [[1, "abcdef"]]}, {"synonyms": [[True, "abcdef"]]}),
    ],
)
def test_a_cached_scorer_is_never_handed_out_for_other_options(
    valid: dict[str, Any], invalid: dict[str, Any]
) -> None:
    """0 == False in Python (and one hash): a scorer built for one is not the other's, whose
    check refuses it (an eval edit with ``sublinear_tf: 0`` was stored after one with
    ``false`` had been scored)."""
    simeval.get_scorer(**valid)
    with pytest.raises(simeval.InvalidOption):
        simeval.get_scorer(**invalid)


def test_an_empty_outputs_missing_weights_are_shares_of_the_reference() -> None:
    """An empty output misses every reference term, each with its share of the reference's
    weight (the question's terms counting less), as an output sharing no term does: they sum
    to 1 (they were raw squared TF-IDF weights, 59.1 for "paris")."""
    ref, question = "Paris is the capital of France.", "What is the capital of France?"
    empty = simeval.explain("", ref, input=question)
    unrelated = simeval.explain("zebra", ref, input=question)
    assert empty.reason == "output is empty" and empty.score == 0.0
    assert [(t.term, t.weight, t.demoted) for t in empty.missing] == [
        (t.term, t.weight, t.demoted) for t in unrelated.missing
    ]
    assert sum(t.weight for t in empty.missing) == pytest.approx(1.0, abs=1e-5)
    assert empty.demoted == unrelated.demoted == ["capital", "france", "is", "of", "the"]


@pytest.mark.process
def test_an_answer_scores_the_same_whatever_the_hash_seed() -> None:
    # the answer reading sums a reference's weights: in its terms' order of use, not in a
    # set's (whose order follows the process's hash seed), so two processes give one float
    output = (
        "pushes node values stack root and order pointer queue data order last sort list first "
        "sort holds onto values first pushes in the array array and"
    )
    reference, question = "pointer queue queue last key memory array", "What does a stack do?"
    code = (
        "import simeval, json, sys; a, b, q = json.load(sys.stdin); "
        "print(simeval.score(a, b, input=q).hex())"
    )
    seen = {
        subprocess.run(
            [sys.executable, "-c", code],
            input=json.dumps([output, reference, question]),
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
        ).stdout
        for seed in range(8)
    }
    assert len(seen) == 1, seen
