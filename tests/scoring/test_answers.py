"""A pass means a right answer (issue 29): question-answer pairs judged by what the reference
demands, contradictions vetoed below the band, padding never paid."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import simeval
from simeval.cli import cli
from simeval.scoring import vetoes
from simeval.scoring.evalset import EvalSet, EvalSpec
from simeval.scoring.options import RELEASE_0_1_DEFAULTS
from simeval.scoring.required import Required

CAPITAL = "The capital of France is Paris."
BRIDGE = "The old stone bridge over the river Tyne at Newcastle was opened"
BORN = "The painter and sculptor of the Paris school was born in Lyon on"
SHOW = "The crime drama series about the haunted hall in Yorkshire has"
MEETING = "The quarterly budget review meeting with the finance team is on"
LAUNCH = "The launch of the new satellite from the Kourou space centre was in"
QUESTION = "What is the capital of France?"


def test_the_issue_sentences() -> None:
    # a newcomer's verbose right answer, with its question, passes
    verbose = "The capital of France is Paris, a city on the Seine known for the Eiffel Tower."
    assert simeval.score(verbose, "Paris", input=QUESTION) >= 0.80
    # contradictions fall below the band, into "Related"
    for out, ref in [
        ("The capital of France is not Paris.", CAPITAL),
        ("The capital of France is Lyon.", CAPITAL),
        ("The meeting is on Tuesday at 3 pm.", "The meeting is on Thursday at 3 pm."),
    ]:
        assert simeval.score(out, ref) < 0.70, out
        assert simeval.score(ref, out) < 0.70, out
        assert simeval.score(out, ref, input=QUESTION) < 0.70, out
    # a reordered paraphrase and an identical text still pass
    assert simeval.score("Paris is the capital of France.", CAPITAL) >= 0.80
    assert simeval.score(CAPITAL, CAPITAL) == 1.0
    assert (
        simeval.score("The meeting is on Tuesday at 3 pm.", "On Tuesday at 3 pm: the meeting.")
        >= 0.8
    )


@pytest.mark.parametrize(
    ("output", "reference", "reason"),
    [
        ("The capital of France is not Paris.", CAPITAL, 'contradiction: "not" only in the output'),
        (
            CAPITAL,
            "The capital of France is not Paris.",
            'contradiction: "not" only in the reference',
        ),
        ("The test never passes on Linux.", "The test passes on Linux.", 'contradiction: "never"'),
        (f"{BRIDGE} in 1921.", f"{BRIDGE} in 1912.", "number: 1921 vs 1912"),
        (f"{BORN} 12 May 1921.", f"{BORN} 12 May 1912.", "number: 1921 vs 1912"),
        (f"{SHOW} three episodes.", f"{SHOW} 5 episodes.", "number: 3 vs 5"),
        (f"{MEETING} Tuesday.", f"{MEETING} Thursday.", "weekday: tuesday vs thursday"),
        (f"{LAUNCH} January 2020.", f"{LAUNCH} October 2020.", "month: january vs october"),
        ("The capital of France is Lyon.", CAPITAL, "name: lyon vs paris"),
        ("I don't know the capital of France.", CAPITAL, "refusal"),
        # a day of a month, written either way round (the numbers alone stand in other places)
        (
            "The Great Fire of London ended on September 6, 1666.",
            "The Great Fire of London ended on 5 September 1666.",
            "date: september 6, 1666 vs 5 september 1666",
        ),
        (
            "The episode aired on March 20, 2018.",
            "The episode aired on April 10, 2018.",
            "date: march 20, 2018 vs april 10, 2018",
        ),
    ],
)
def test_each_veto_is_named(output: str, reference: str, reason: str) -> None:
    exp = simeval.explain(output, reference)
    assert exp.veto is not None and exp.veto.startswith(reason), exp.veto
    assert exp.reason == exp.veto and exp.score < 0.70
    assert f"reason: {exp.veto}" in str(exp)
    assert simeval.explain(output, reference, contradiction=False).veto is None


def test_no_veto_where_the_texts_agree() -> None:
    pairs = [
        ("Nobody is playing the guitar.", "No man is playing the guitar."),  # both negate
        ("The bridge opened in 1912 and closed in 1990.", "The bridge opened in 1912."),
        ("Amendment No 7 changes the references.", "The amendment 7 changes the references."),
        ("As an AI I cannot browse. However, the capital is Paris.", "Paris"),
        ("The kids are playing outside.", "The children are playing outside."),  # not names
        # the same day written either way round, or with a year on one side only
        ("It ended on September 5, 1666.", "It ended on 5 September 1666."),
        ("It ended on the 5th of September.", "It ended on 5 September 1666."),
        # one of the output's days is the reference's; "may 5" without a year is no date
        ("It opened on 2 June 1990 and closed on 3 July 1999.", "It closed on July 3, 1999."),
        ("You may 5 times a day ask on June 1.", "You may ask on June 1."),
    ]
    for out, ref in pairs:
        assert simeval.get_scorer().veto(out, ref) is None, (out, ref)


def test_refusals_fail_a_question() -> None:
    for out in ("I don't know.", "I cannot answer that question.", "As an AI, I cannot know that."):
        exp = simeval.explain(out, "Paris", input=QUESTION)
        assert exp.score < 0.70
    # a refusal that goes on to answer is an answer
    assert simeval.score("I'm not sure, but I think it is Paris.", "Paris", input=QUESTION) >= 0.8


def test_a_question_answer_pair_reads_what_the_reference_demands() -> None:
    q = "Who got the first Nobel prize in physics?"
    gold = ["Wilhelm Conrad Röntgen"]
    right = (
        "The first Nobel Prize in Physics was awarded in 1901 to Wilhelm Conrad Röntgen, a "
        "German physicist, for his discovery of X-rays, which revolutionised medicine."
    )
    wrong = "The first Nobel Prize in Physics was awarded in 1901 to Albert Einstein."
    assert simeval.score(right, gold, input=q) >= 0.80
    assert simeval.score(right, gold) < 0.80  # without the question: a sentence pair
    assert simeval.score(wrong, gold, input=q) < 0.70
    exp = simeval.explain(right, gold, input=q)
    assert exp.coverage == 1.0 and "holds 100% of the reference" in str(exp)
    assert not exp.missing
    # repeating the question's own words earns nothing
    parrot = "Who got the first Nobel prize in physics? The first Nobel prize in physics."
    told = "The first Nobel prize in physics went to Röntgen."
    assert simeval.score(parrot, told, q) < 0.8 <= simeval.score(right, told, q)
    # the option off, and the 0.1.0 scores, stay reachable
    off = simeval.score(right, gold, input=q, answer=False)
    assert off == simeval.score(right, gold, input=q, answer=False, contradiction=False)
    assert off < simeval.score(right, gold, input=q) == 1.0
    assert simeval.fingerprint(answer=False) != simeval.fingerprint()
    assert simeval.fingerprint(**RELEASE_0_1_DEFAULTS) == "6dcf7c7bc602"


def test_scattered_terms_are_not_an_answer() -> None:
    q = "What are the elements typically included in a class definition?"
    ref = "Function members and data members."
    together = "A class definition holds its function members and data members."
    scattered = (
        "A class definition names the class. Its methods are called through a function "
        "pointer, and the data of the program is read from files; members of the team "
        "review the code."
    )
    assert simeval.score(together, ref, input=q) >= 0.80
    assert simeval.score(scattered, ref, input=q) < simeval.score(together, ref, input=q)


# -- properties --------------------------------------------------------------------------------
REF_WORDS = ["capital", "France", "Paris", "river", "Seine", "1912", "Tuesday", "May", "city"]
REF_WORDS += ["the", "is", "of", "not", "bridge", "opened", "in", "Lyon", "tower"]
PAD_WORDS = ["banana", "yellow", "quantum", "piano", "orbit", "violet", "recipe", "2040"]
PAD_WORDS += ["Saturday", "glacier", "Jupiter", ".", ",", "and", "a", "we", "gravel"]
sentences = st.lists(st.sampled_from(REF_WORDS), min_size=1, max_size=14).map(" ".join)
padding = st.lists(st.sampled_from(PAD_WORDS), min_size=1, max_size=30).map(" ".join)
questions = st.none() | st.sampled_from([QUESTION, "When did the bridge open?", "Which city?"])
glue = st.sampled_from([" ", ". ", ", ", "\n"])


@settings(max_examples=400, deadline=None)
@given(out=sentences, ref=sentences, pad=padding, q=questions, sep=glue)
def test_unrelated_padding_never_raises_the_score(out, ref, pad, q, sep) -> None:
    sc = simeval.get_scorer()
    ref_terms = vetoes.facts(ref, sc.analyzer).terms
    # unrelated: the padding shares no term with the reference (nor negates: no negator in it)
    assume(not (vetoes.facts(pad, sc.analyzer).terms & ref_terms))
    assert simeval.score(out + sep + pad, ref, input=q) <= simeval.score(out, ref, input=q)


NEGATED = st.sampled_from(["not", "never", "no longer"])
SENTENCE = st.lists(st.sampled_from(["bridge", "river", "city", "tower", "old", "big"]), min_size=2)


@settings(max_examples=300, deadline=None)
@given(
    words=SENTENCE,
    at=st.integers(min_value=0, max_value=20),
    neg=NEGATED,
    year=st.integers(min_value=1000, max_value=2100),
    other=st.integers(min_value=1000, max_value=2100),
    q=questions,
)
def test_a_vetoed_pair_is_below_the_threshold(words, at, neg, year, other, q) -> None:
    assume(year != other)
    base = ["the", *words, "opened", "in", str(year)]
    i = 1 + at % (len(base) - 1)
    negated = " ".join([*base[:i], neg, *base[i:]])
    renumbered = " ".join([*base[:-1], str(other)])
    plain = " ".join(base)
    sc = simeval.get_scorer()
    for a, b in ((negated, plain), (plain, negated), (renumbered, plain)):
        if sc.veto(a, b) is not None:
            assert simeval.score(a, b, input=q) < 0.70
    assert sc.veto(renumbered, plain) is not None
    assert simeval.score(renumbered, plain) < 0.70


LOWER = ["cat", "dog", "not", "never", "3", "7", "monday", "friday", "june", "the", "is", "on"]
LOWER += ["running", "capital", "paris", "no", "i", "don't", "know", "however"]
lower_text = st.lists(st.sampled_from(LOWER), min_size=1, max_size=14).map(" ".join)


@settings(max_examples=400, deadline=None)
@given(a=lower_text, b=lower_text)
def test_symmetric_without_a_question(a, b) -> None:
    # bands-2 has no length rule and every veto but the name's (which reads the reference's
    # capitalised names: none here) is symmetric
    assert simeval.score(a, b) == simeval.score(b, a)


@settings(max_examples=150, deadline=None)
@given(out=sentences, refs=st.lists(sentences, min_size=1, max_size=3), q=questions)
def test_every_path_gives_the_same_checked_score(out, refs, q) -> None:
    sc = simeval.get_scorer()
    want = sc.score_detail(out, refs, q)
    evals = [EvalSpec(1, "e", 1, tuple(refs), 0.8), EvalSpec(2, "f", 1, ("unrelated words",), 0.8)]
    (got, _) = EvalSet(evals).score(out, input=q)
    assert (got.score, got.matched_index) == want
    vec, terms = sc.vector(out), sc.input_terms(q)
    assert sc.best_vector(vec, sc.prepare(refs), terms, sc.asks(q), out, refs) == want
    assert simeval.score_many([out], [refs[0]], [q], workers=1) == [simeval.score(out, refs[0], q)]


def test_the_cli_and_the_api_name_the_veto(tmp_path) -> None:
    out, ref = f"{BRIDGE} in 1921.", f"{BRIDGE} in 1912."
    res = CliRunner().invoke(cli, ["score", out, ref, "--json"])
    assert res.exit_code == 1
    assert json.loads(res.output)["reason"] == "number: 1921 vs 1912"
    res = CliRunner().invoke(cli, ["score", out, ref, "--explain", "--json"])
    assert json.loads(res.output)["explanation"]["veto"] == "number: 1921 vs 1912"
    res = CliRunner().invoke(
        cli, ["score", "I don't know.", "Paris", "-i", QUESTION, "--no-contradiction"]
    )
    assert "refusal" not in res.output


def test_a_wrong_day_fails_an_answer_the_question_asked_for() -> None:
    question = "when did the great fire of london end"
    refs = ["5 September 1666", "Wednesday, 5 September 1666"]
    wrong = "The Great Fire of London ended on September 6, 1666."
    right = "The Great Fire of London ended on September 5, 1666."
    assert simeval.score(wrong, refs, input=question) < 0.70
    assert simeval.score(right, refs, input=question) >= 0.80
    assert "date: september 6, 1666 vs 5 september 1666" in str(
        simeval.explain(wrong, refs[0], input=question)
    )


def test_answers_are_read_as_models_write_them() -> None:
    # words a model ran together, number words, a loop that is also "no loops" elsewhere
    q = "an influential religion to enter china along the silk route during the han dynasty was"
    glued = "An influential religion that entered China along the Silk Road wasBuddhism1."
    assert simeval.score(glued, "Buddhism", input=q) >= 0.80
    assert simeval.score(glued, "Buddhism", input=q, **RELEASE_0_1_DEFAULTS) < 0.80
    assert "buddhism" not in [t.term for t in simeval.explain(glued, "Buddhism", input=q).missing]
    q = "how many episodes in my name is earl season 4"
    assert simeval.score("Season 4 has a total of27 episodes1.", "27", input=q) >= 0.80
    q = "what is the number of basic units in the international system of units"
    for out in ["The International System of Units has 7 basic units.", "It has seven."]:
        assert simeval.score(out, "seven", input=q) >= 0.80, out
        assert simeval.score(out, "7", input=q) >= 0.80, out
    assert simeval.score("It has six basic units.", "seven", input=q) < 0.70
    q = "how many seasons of johnny bravo are there"
    four = "There are four seasons of Johnny Bravo, which aired from 1997 to 2004."
    assert simeval.score(four, "four", input=q) >= 0.80
    q = "what is an edge that connects a vertex to itself called"
    loop = "An edge that connects a vertex to itself is called a loop. A simple graph has no loops."
    assert simeval.score(loop, "loop", input=q) >= 0.80
    assert simeval.explain(loop, "loop", input=q).veto is None
    assert simeval.score("A simple graph has no loops.", "A simple graph has loops.") < 0.70


def test_years_ordinals_and_a_negating_question_are_read_as_written() -> None:
    q = "when was the first telegraph cable laid across the atlantic"
    cited = "The first transatlantic telegraph cable was completed in 18581. It failed soon."
    assert simeval.score(cited, "1858", input=q) >= 0.80
    assert simeval.score(cited, "1858", input=q, **RELEASE_0_1_DEFAULTS) < 0.80
    # a citation mark is read off a year only: not off a longer number or a decimal
    assert simeval.score("The dam holds 185812 litres.", "1858", input=q) < 0.70
    q = "when did the league first play the shot clock"
    for out, ref in [
        ("The league used it in the 1954-1955 season.", "1954–55 season"),
        ("It came in for the 1954–55 season.", "the 1954-1955 season"),
        ("It came in for the 1999-00 season.", "the 1999-2000 season"),
    ]:
        assert simeval.score(out, ref, input=q) >= 0.80, out
    assert simeval.score("It came in for the 1954-56 season.", "1954–55 season", input=q) < 0.70
    q = "how many series of the quiz show were made"
    assert simeval.score("There were three series of the show.", "third series", input=q) >= 0.80
    assert simeval.score("There were four series of the show.", "third series", input=q) < 0.70
    # the question's own "not" is no contradiction: the answer may repeat it
    q = "when did the band release the single don't look back"
    out = "The band released Don't Look Back as a single in 1977."
    assert simeval.score(out, "1977", input=q) >= 0.80
    assert simeval.explain(out, "1977", input=q).veto is None
    assert simeval.score(out, "1977") < 0.70  # without the question, "not" is the output's
    assert simeval.score("The capital of France is not Paris.", "Paris", input=QUESTION) < 0.70


def test_a_required_number_word_is_met_by_its_digits() -> None:
    sc = simeval.get_scorer()
    need = Required(sc, ("seven",))
    assert need.missing(sc.vector("There are 7 base units.")) == []
    assert need.missing(sc.vector("There are 6 base units.")) == ["seven"]
