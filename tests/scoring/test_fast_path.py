"""The hot path of ``Scorer.score`` (issue 29, "Speed"): the shortcuts give exactly the floats
and the verdicts of the long way round."""

from __future__ import annotations

import random

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from simeval.errors import InvalidInput, InvalidType
from simeval.scoring import _vector, scorer, vetoes
from simeval.scoring.options import PREVIOUS_DEFAULTS, RELEASE_0_1_DEFAULTS
from simeval.scoring.scorer import Scorer

_FILLER = (
    "the weather was mild and the market stayed open late for the visitors who came from far "
    "away to see the old bridge and the river"
)
_Q = "Which city hosted the summit?"
# scores pinned before the hot path was rewritten (float.hex: every bit), with the veto
PINNED = [
    (
        "The capital of France is not Paris.",
        "The capital of France is Paris.",
        None,
        "0x1.5c2c1f5158833p-1",
        'contradiction: "not" only in the output',
    ),
    (
        "The capital of France is Lyon.",
        "The capital of France is Paris.",
        None,
        "0x1.4c9e4f216675dp-1",
        "name: lyon vs paris",
    ),
    (
        "The meeting is on Tuesday at 3 pm.",
        "The meeting is on Thursday at 3 pm.",
        None,
        "0x1.56703a0fb23a4p-1",
        "weekday: tuesday vs thursday",
    ),
    (
        "It was signed in 1912 by John Smith.",
        "It was signed in 1921 by John Smith.",
        "When was it signed?",
        "0x1.44d0ab8733cfap-1",
        "number: 1912 vs 1921",
    ),
    (
        "The capital of France is Paris, a city on the Seine known for the Eiffel Tower.",
        "Paris",
        "What is the capital of France?",
        "0x1.0000000000000p+0",
        None,
    ),
    ("I don't know.", "Paris", "What is the capital of France?", "0x0.0p+0", "refusal"),
    # the answer read in one stretch of the output (``Scorer.together``)
    (
        f"Geneva was considered. {_FILLER}. Switzerland was chosen later.",
        "Geneva, Switzerland",
        _Q,
        "0x1.c867733f12357p-1",
        None,
    ),
    (
        f"The summit opened in Geneva {_FILLER} {_FILLER} in Switzerland",
        "Geneva in Switzerland in 1985",
        _Q,
        "0x1.3afd7e1d31823p-1",
        None,
    ),
]


@pytest.mark.parametrize(("output", "reference", "question", "pinned", "reason"), PINNED)
def test_scores_are_the_pinned_floats(output, reference, question, pinned, reason) -> None:
    sc = Scorer()
    for _ in range(2):  # seen once and again (the vector and facts caches)
        assert float(sc.score(output, reference, question)).hex() == pinned
        assert sc.score_detail(output, [reference], question) == (float.fromhex(pinned), 0)
    assert sc.veto(output, reference) == reason


# Words every check reads: negators, numbers (digits and words), weekdays, months, names (in
# texts of both cases), clause ends, refusals; and plain words.
WORDS = [
    "the",
    "a",
    "is",
    "was",
    "in",
    "on",
    "of",
    "not",
    "never",
    "no",
    "don't",
    "but",
    "and",
    ",",
    ".",
    "1912",
    "1921",
    "3",
    "1,650",
    "seven",
    "Tuesday",
    "Thursday",
    "June",
    "April",
    "may",
    "Paris",
    "Lyon",
    "John",
    "capital",
    "city",
    "meeting",
    "signed",
    "river",
    "answer",
    "I",
    "know",
    "However",
    "I don't know",
    "I cannot answer",
]


# words one is swapped for in place (what the number, weekday, month and name checks read)
KINDS = [["1912", "1921", "3", "1,650", "seven"], ["Tuesday", "Thursday"], ["June", "April"]]
KINDS.append(["Paris", "Lyon", "John"])


def random_pair(rng: random.Random) -> tuple[str, str]:
    """Two texts, often one the other with a few words changed, added or left out (close
    pairs, where the checks fire), else unrelated."""
    ref = [rng.choice(WORDS) for _ in range(rng.randint(0, 14))]
    if rng.random() < 0.3:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 14))), " ".join(ref)
    out = list(ref)
    for _ in range(rng.randint(0, 3)):
        at = rng.randint(0, len(out))
        edit = rng.choice(["replace", "insert", "delete", "swap"])
        word = rng.choice(WORDS)
        if edit == "swap":
            kind = rng.choice(KINDS)
            out = [rng.choice(kind) if w in kind else w for w in out]
        elif edit == "insert" or not out:
            out.insert(at, word)
        elif edit == "replace":
            out[min(at, len(out) - 1)] = word
        else:
            del out[min(at, len(out) - 1)]
    return " ".join(out), " ".join(ref)


def pairs() -> st.SearchStrategy[tuple[str, str]]:
    return st.randoms(use_true_random=False).map(random_pair)


def in_place_in_full(out: vetoes.Facts, ref: vetoes.Facts, kind: str) -> tuple[str, str] | None:
    """``vetoes._in_place`` as it read before it walked the slots by kind: every slot."""
    if kind == "name" and not (ref.terms - out.terms):
        return None
    for before, term, after, k, value, word in ref.slots:
        if k != kind or (before is None and after is None):
            continue
        if kind == "name":
            if ref.terms - out.terms != {term}:
                continue
        elif value in out.values[kind]:
            continue
        for b2, t2, a2, k2, v2, w2 in out.slots:
            if t2 in ref.terms or (kind != "name" and (k2 != kind or v2 in ref.values[kind])):
                continue
            if (before is None or before == b2) and (after is None or after == a2):
                return (v2 or w2), (value or word)
    return None


def veto_in_full(out: vetoes.Facts, ref: vetoes.Facts) -> str | None:
    """``vetoes.veto`` as it read before its shortcuts: every check, in its order."""
    if out.refusal != ref.refusal:
        return "refusal" if out.refusal else "refusal: only the reference declines"
    for one, other, side in ((out, ref, "output"), (ref, out, "reference")):
        if one.negators and not other.negators and (one.negated - one.plain) & other.plain:
            return f'contradiction: "{one.negators[0]}" only in the {side}'
    in_place = in_place_in_full
    for kind in ("number", "weekday", "month"):
        a, b = out.values[kind], ref.values[kind]
        pair = (min(a), min(b)) if a and b and not a & b else in_place(out, ref, kind)
        if pair is None:
            flipped = in_place(ref, out, kind)
            pair = (flipped[1], flipped[0]) if flipped is not None else None
        if pair is not None:
            return f"{kind}: {pair[0]} vs {pair[1]}"
    # a day of a month: none of the output's days is one of the reference's (a year only
    # where both name one)
    if (
        out.dates
        and ref.dates
        and not any(
            (m1, d1) == (m2, d2) and (y1 is None or y2 is None or y1 == y2)
            for y1, m1, d1, _ in out.dates
            for y2, m2, d2, _ in ref.dates
        )
    ):
        return f"date: {out.dates[0][3]} vs {ref.dates[0][3]}"
    pair = in_place(out, ref, "name")
    return f"name: {pair[0]} vs {pair[1]}" if pair is not None else None


# pairs each shortcut must let through to the check behind it: a value replaced in place
# beside a value both texts name, a name, a month read as a name, nothing to veto
VETOED = [
    ("In 1912 he was 3 years old", "In 1921 he was 3 years old"),
    (
        "The 3 men met on Tuesday, the 4 women on Monday",
        "The 3 men met on Thursday, the 4 women on Monday",
    ),
    ("In June and in April 2001", "In June and in May 2001"),
    ("It was 7 and then 1912 in the capital", "It was 7 and then 1921 in the capital"),
    ("It was 7 in 1912 in the capital city", "It was 7 in the capital city"),
    ("John met Mary in Paris", "John met Anna in Paris"),
    ("The capital is not Paris, but Lyon is", "The capital is Paris"),
    # a day of a month written each way round, the months otherwise shared
    ("the 3 April", "June 3 April"),
]


@settings(max_examples=600, deadline=None)
@given(pair=pairs())
@example(pair=VETOED[0])
@example(pair=VETOED[1])
@example(pair=VETOED[2])
@example(pair=VETOED[3])
@example(pair=VETOED[4])
@example(pair=VETOED[5])
@example(pair=VETOED[6])
@example(pair=VETOED[7])
def test_veto_shortcuts_change_no_verdict(pair: tuple[str, str]) -> None:
    sc = Scorer()
    out, ref = (sc.facts(t) for t in pair)
    assert vetoes.veto(out, ref) == veto_in_full(out, ref)
    assert vetoes.veto(ref, out) == veto_in_full(ref, out)
    # the bits the scorer reads before it calls ``veto``: nothing to read, no veto
    for one, other in ((out, ref), (ref, out)):
        if vetoes.reads_nothing(one.reads, other.reads):
            assert veto_in_full(one, other) is None


# texts with what the checks read spelled every way the tokenisers and ``unglue`` meet it:
# glued words and digits, number words read as digits, contractions, refusals, and text that
# is not ASCII (whose normal form may hold digits)
READ_WORDS = [
    *WORDS,
    "isn't",
    "cannot",
    "nothing",
    "NOT",
    "Never.",
    "seven",
    "Twelfth",
    "twenty-one",
    "monday,",
    "Feb.",
    "1,000",
    "3rd",
    "in1912",
    "2016.It",
    "wasNot",
    "I don't know",
    "As an AI",
    "I'm sorry, but I",
    "no information available",
    "However",
    "No. 7",
    "①",
    "½",
    "２０１６",
    "Ⅻ",
    "mañana",
]


@settings(max_examples=600, deadline=None)
@given(
    words=st.lists(st.sampled_from(READ_WORDS), max_size=16),
    joins=st.sampled_from([" ", "", ". ", ", ", "\n"]),
    opts=st.sampled_from([{}, {"answer": False}, {"tokenizer": "words"}, {"stop_words": 100}]),
)
def test_the_quick_reading_of_an_output_misses_nothing_its_facts_hold(
    words: list[str], joins: str, opts: dict[str, object]
) -> None:
    # ``Scorer.reads`` clears most outputs without reading their facts: it may say more than
    # the facts hold, never less (the name bit aside, which only a reference's side sets)
    text = joins.join(words)
    quick, full = Scorer(**opts), Scorer(**opts)
    bits = quick.reads(text)
    held = full.facts(text).reads & ~vetoes.READS_NAME
    assert held & ~bits == 0, (text, held, bits)


def test_the_quick_reading_clears_an_output_that_reads_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # and it does clear one: the output's facts are never read, the reference's are
    read: list[str] = []
    facts = vetoes.facts
    monkeypatch.setattr(vetoes, "facts", lambda text, *a: read.append(text) or facts(text, *a))
    sc = Scorer()
    text = "The committee met in the old hall and agreed on the plan"
    assert sc.reads(text) == 0
    assert sc.score(text, "The committee met in the hall and agreed on a plan") >= 0.8
    assert read == ["The committee met in the hall and agreed on a plan"]
    for text, bit in (
        ("It was 1912", vetoes.READS_VALUE),
        ("It was seven", vetoes.READS_VALUE),
        ("on Monday", vetoes.READS_VALUE),
        ("it isn't", vetoes.READS_NEGATOR),
        ("I don't know", vetoes.READS_REFUSAL),
    ):
        assert sc.reads(text) & bit, text


def test_the_generated_pairs_reach_every_veto() -> None:
    # the property above is only as good as the pairs: each kind of veto fires on some
    sc, rng = Scorer(), random.Random(29)
    seen = {
        (veto_in_full(sc.facts(a), sc.facts(b)) or "none").split(":")[0]
        for a, b in (random_pair(rng) for _ in range(3000))
    }
    assert {"contradiction", "number", "weekday", "month", "name", "refusal"} <= seen


CONFIGS = [
    {},
    PREVIOUS_DEFAULTS,
    RELEASE_0_1_DEFAULTS,
    {"scale": "cosine"},
    {"idf": "pair"},
    {"contradiction": False},
    {"answer": False},
    {"sublinear_tf": False},
    {"negation": 1.0, "input_weight": 1.0},
    {"ngram": 2},
]
questions = st.sampled_from([None, "", "  ", "When was the capital city signed?", "Who is John?"])


@settings(max_examples=400, deadline=None)
@given(pair=pairs(), q=questions, opts=st.sampled_from(CONFIGS))
def test_score_gives_the_long_paths_floats(pair: tuple[str, str], q: str | None, opts) -> None:
    out, ref = pair
    sc = Scorer(**opts)
    if not ref.strip():
        for score in (sc.score, lambda o, r, q: sc.score_detail(o, [r], q)):
            with pytest.raises(InvalidInput, match="reference answer is empty"):
                score(out, ref, q)
        return
    # the score by the general path: one reference in a list (``score_detail``), and that of
    # a fresh scorer (nothing cached)
    long_way = sc.score_detail(out, [ref], q)[0]
    for _ in range(2):
        assert sc.score(out, ref, q) == long_way
    assert Scorer(**opts).score(out, ref, q) == long_way
    # the cosine and the curve by the C core and by its Python reference, every option set
    va, vb = sc.vector(out), sc.vector(ref)
    terms, asked, curve = sc.question(q) if q is not None else (b"", False, sc.curve)
    assert curve == sc.curve_for(asked)
    args = (sc.pair, terms, sc.input_weight, sc.negators, sc.negation, curve)
    assert _vector.cosine(va, vb, *args) == _vector.cosine_py(va, vb, *args)


@pytest.mark.skipif(not _vector.ACCELERATED, reason="C core not built")
def test_c_cosine_reads_its_arguments_as_before() -> None:
    sc = Scorer()
    va, vb = sc.vector("Paris is the capital of France"), sc.vector("The capital is Paris")
    terms = sc.input_terms("What is the capital?")
    full = (True, terms, 0.5, sc.negators, 0.9, sc.answer_curve)
    expected = _vector.cosine_py(va, vb, *full)
    assert _vector.cosine(va, vb, *full) == expected
    # any bytes-like object, ints for the factors, None for a hash set or the curve
    assert (
        _vector.cosine(
            bytearray(va),
            memoryview(vb),
            1,
            bytearray(terms),
            0.5,
            memoryview(sc.negators),
            0.9,
            bytearray(sc.answer_curve),
        )
        == expected
    )
    assert _vector.cosine(va, vb, False, None, 1, None, 1, None) == _vector.cosine_py(va, vb, False)
    assert _vector.cosine(va, vb, False) == _vector.cosine_py(va, vb, False)
    with pytest.raises(TypeError, match="argument 'b' must be a bytes-like object"):
        _vector.cosine(va, "text", False)
    with pytest.raises(TypeError, match="from 3 to 8 arguments"):
        _vector.cosine(va, vb)
    with pytest.raises(TypeError):
        _vector.cosine(va, vb, False, None, "half")
    with pytest.raises(ValueError, match="hash set"):
        _vector.cosine(va, vb, False, b"1234567", 0.5)
    with pytest.raises(ValueError, match="bands curve"):
        _vector.cosine(va, vb, False, None, 1.0, None, 1.0, b"12345678")


def test_the_vector_cache_is_bounded(monkeypatch) -> None:
    monkeypatch.setattr(scorer, "_VECTORS_LIMIT", 2000)
    sc, fresh = Scorer(), Scorer()
    texts = [f"text number {i} about the river and the bridge" for i in range(60)]
    for t in texts:
        assert sc.vector(t) == fresh._vector(t)
        assert sc.vector(t) == fresh._vector(t)  # from the cache
        assert sum(len(k) + len(v) + 100 for k, v in sc._vectors.items()) <= 2000
    assert 0 < len(sc._vectors) < 20
    big = "word " * 1000  # bigger than the whole cache: scored, never kept
    assert sc.vector(big) == fresh._vector(big) and big not in sc._vectors


def test_bad_input_on_the_hot_path() -> None:
    sc = Scorer()
    with pytest.raises(InvalidType, match="output must be a string"):
        sc.score(None, "Paris")  # type: ignore[arg-type]
    with pytest.raises(InvalidType, match="input must be a string"):
        sc.score("Paris", "Paris", ["a list"])  # type: ignore[arg-type]
    with pytest.raises(InvalidType, match="reference must be a string or a list"):
        sc.score("Paris", 3)  # type: ignore[arg-type]
    assert sc.score("the of", "the of") == 1.0  # identical texts without terms
    assert sc.score("   ", "Paris") == 0.0


# one word cache per option set, kept across examples as a scorer keeps it across texts
_WORD_CACHE: dict[str, dict[str, tuple[tuple[str, str | None], ...]]] = {}


@settings(max_examples=200, deadline=None)
@given(pair=pairs(), opts=st.sampled_from(CONFIGS))
def test_facts_read_through_the_word_cache_are_the_same(pair: tuple[str, str], opts) -> None:
    sc = Scorer(**opts)
    cache = _WORD_CACHE.setdefault(repr(sorted(opts.items())), {})
    for text in pair:
        for _ in range(2):  # the words' first reading and their cached one
            assert vetoes.facts(text, sc.analyzer, sc.numbers, cache) == vetoes.facts(
                text, sc.analyzer, sc.numbers
            )
