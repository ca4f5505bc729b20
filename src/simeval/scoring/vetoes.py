"""Contradiction checks: the vetoes that keep a pair below the threshold band whatever its cosine.

Two texts can share nearly every term and still say opposite things. A veto fires when, in the
same place, the two texts differ by

- a negation: only one of the texts has a negator ("not", "never", "no" ...), and a term
  within its reach (the next few words of its clause) occurs in the other text;
- a number, a weekday or a month: each text has one the other lacks ("1912" vs "1921");
- a date: both texts name a day of a month ("June 17, 1812", "5 September 1666") and no day
  of one is a day of the other (the years, where both give one, agree too);
- a name (or any other word): the output holds the whole reference but one of its words,
  which it replaces in the same place by another ("is Lyon" vs "is Paris");
- a refusal: exactly one of the two says it cannot answer ("I don't know", "As an AI ...")
  and does not go on to answer after all ("..., but", "However, ...").

A vetoed score above ``FLOOR`` is pressed into ``(FLOOR, TOP]`` (below the "Moderate" band,
order kept); below ``FLOOR`` it is left alone. The checks read positions in the text, so they
never depend on what follows the pair's shared part: text appended to an output that shares no
term with the reference (and negates none of its terms) can add a veto but never remove one.

>>> from simeval.scoring.analyzer import Analyzer
>>> a = Analyzer()
>>> veto(facts("The meeting is on Thursday.", a), facts("The meeting is on Tuesday.", a))
'weekday: thursday vs tuesday'
>>> veto(facts("The capital is not Paris.", a), facts("The capital is Paris.", a))
'contradiction: "not" only in the output'
>>> veto(facts("It ended on September 6, 1666.", a), facts("5 September 1666", a))
'date: september 6, 1666 vs 5 september 1666'
>>> round(pressed(0.95), 4)
0.6787
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

from simeval.scoring.analyzer import Analyzer, stop_word_set
from simeval.scoring.written import NUMBER_WORDS

FLOOR = 0.60  # a vetoed score above this is pressed into (FLOOR, TOP]
TOP = 0.69

# words that end a negation's reach (besides punctuation): the clause goes on without it
_CLAUSE_ENDS = frozenset(
    [
        "but",
        "and",
        "or",
        "however",
        "instead",
        "rather",
        "though",
        "although",
        "yet",
        "while",
        "whereas",
        "because",
        "so",
    ]
)
_SCOPE = 4  # a negator reaches at most this many words
_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_MONTH_WORDS = frozenset(_MONTHS) | {"sept"} | {m[:3] for m in _MONTHS if m not in ("may",)}
_MONTH_OF = {w: next(m for m in _MONTHS if m.startswith(w[:3])) for w in _MONTH_WORDS}
# month names that are also common words (case plays no part in a score: they never count)
_AMBIGUOUS_MONTHS = frozenset({"may", "march", "mar", "jun", "jan", "dec", "oct", "aug", "sept"})
# a day of a month, as written ("5 september 1666", "june 17th, 1812", "the 4th of july"):
# in a date, "march" and "may" are months
_MONTH_NAME = "(?:" + "|".join(sorted(_MONTH_WORDS | {"sep"}, key=len, reverse=True)) + r")\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?:,?\s+(\d{3,4})(?!\d))?"
_DATE = re.compile(
    rf"(?<![\w.,]){_DAY}\s+(?:of\s+)?({_MONTH_NAME})(?!\w){_YEAR}"
    rf"|(?<!\w)({_MONTH_NAME})\s+{_DAY}(?!\d|[.,]\d){_YEAR}"
)
_REFUSAL = re.compile(
    r"\b(?:i\s+(?:do\s+not|don'?t|cannot|can'?t|am\s+unable\s+to|'?m\s+unable\s+to|"
    r"am\s+not\s+able\s+to|'?m\s+not\s+able\s+to)\s+(?:know|answer|provide|determine|say|"
    r"tell|browse|access|predict|find)"
    r"|i\s+(?:do\s+not|don'?t)\s+have\s+(?:access|information|enough|real-time|the\s+ability)"
    r"|as\s+an\s+ai\b|i'?m\s+sorry,?\s+but\s+i\b|no\s+information\s+(?:is\s+)?available"
    r"|(?:it\s+is|it'?s)\s+(?:not\s+possible|impossible)\s+to\s+(?:know|determine|say))"
)
# what a refusal may be followed by when the text answers after all
_GOES_ON = re.compile(
    r"\b(?:however|but|that said|nevertheless|nonetheless|although|according to|based on)\b"
)
# a word (letters, with an English contraction's n't), a number, or a clause boundary
_WORD = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+(?:['’][^\W\d_]+)?|[.!?;:,()\[\]\"“”]")


@dataclass(frozen=True, slots=True)
class Facts:
    """What the checks read of one text."""

    terms: frozenset[str]  # every term (as the analyzer makes them)
    negated: frozenset[str]  # terms within a negator's reach
    plain: frozenset[str]  # terms that occur at least once outside any negator's reach
    negators: tuple[str, ...]  # the negator words, in order of first use
    # per kind ("number", "weekday", "month"): the values the text names
    values: dict[str, frozenset[str]]
    # every content term in its place: (term before, term, term after, kind, value, word);
    # None before or after at a clause boundary; kind and value None for a plain word, kind
    # "name" for a capitalised word within a sentence of a text that has lowercase words
    slots: tuple[tuple[str | None, str, str | None, str | None, str | None, str], ...]
    refusal: bool
    sequence: tuple[str, ...] = ()  # every term in order (stop words aside): where terms stand
    # whether the text names a number, weekday or month, and has a name: what the checks skip
    # a pair by
    named: bool = False
    valued: bool = False
    # what ``veto`` reads first, so that most pairs are cleared without a loop: the terms only
    # ever negated (``negated - plain``) and the terms of the names
    negated_only: frozenset[str] = frozenset()
    name_terms: frozenset[str] = frozenset()
    # the slots of each kind ("number", "weekday", "month", "name"), in order: what the place
    # checks walk, instead of every slot of a long text
    kind_slots: dict[
        str, tuple[tuple[str | None, str, str | None, str | None, str | None, str], ...]
    ] = field(default_factory=dict)
    # what ``veto`` can read of the text, as bits (``READS_*``): a pair whose bits
    # ``reads_nothing`` clears gets no veto, without a call
    reads: int = 0
    # the days of a month the text names: (year or None, month, day, as written)
    dates: tuple[tuple[int | None, str, int, str], ...] = ()


_KINDS = ("number", "weekday", "month")
# Facts.reads: a refusal or a negator on one side only, a name in the reference or values on
# both sides is what any check reads
READS_REFUSAL, READS_NEGATOR, READS_NAME, READS_VALUE = 1, 2, 4, 8


# the words ``facts`` reads as a value (a number, a weekday, a month) without a digit in them
_VALUE_WORDS = frozenset(NUMBER_WORDS) | frozenset(_DAYS) | (_MONTH_WORDS - _AMBIGUOUS_MONTHS)
_LETTER_RUN = re.compile(r"[a-z]+")  # the words of a lowercased ASCII text, as ``_WORD`` cuts them
_DIGIT = re.compile(r"[0-9]")


def reads_at_most(text: str, negators: frozenset[str]) -> int | None:
    """The ``Facts.reads`` bits an output's side of a pair may have (the name bit aside: only
    a reference's is read), without reading its facts: its words (its runs of letters) are
    looked up among ``negators`` (the analyzer's) and the value words (a number word, a
    weekday, a month), and a digit, an "n't" (read as "not") and a refusal are searched for.
    Every bit ``facts`` sets (but the name's) is set here too, and more may be. None for a
    text that is not ASCII, whose normal form may hold digits or words its characters do not
    show."""
    if not text.isascii():
        return None
    low = text.lower()
    words = set(_LETTER_RUN.findall(low))
    bits = 0 if negators.isdisjoint(words) and "n't" not in low else READS_NEGATOR
    if not _VALUE_WORDS.isdisjoint(words) or _DIGIT.search(low) is not None:
        bits |= READS_VALUE
    if _REFUSAL.search(low) is not None:
        bits |= READS_REFUSAL
    return bits


def _number(token: str) -> str:
    if re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", token):
        token = token.replace(",", "")
    return token


def _kind(word: str, low: str) -> tuple[str | None, str | None]:
    if word[0].isdigit():
        return "number", _number(word)
    if low in NUMBER_WORDS:
        return "number", NUMBER_WORDS[low]
    if low in _DAYS:
        return "weekday", low
    if low in _MONTH_WORDS and low not in _AMBIGUOUS_MONTHS:
        return "month", _MONTH_OF[low]
    return None, None


@functools.lru_cache(maxsize=16)
def _common_words(language: str, count: int) -> frozenset[str]:
    # the language's most frequent words: what a negation or a substitution is not about
    return stop_word_set(language, count)


def _refuses(text: str) -> bool:
    # a refusal that the text does not go on to answer after ("..., but", "However, ...")
    found = _REFUSAL.search(text)
    return found is not None and _GOES_ON.search(text, found.end()) is None


def facts(
    text: str,
    analyzer: Analyzer,
    numbers: dict[str, str] | None = None,
    word_cache: dict[str, tuple[tuple[str, str | None], ...]] | None = None,
) -> Facts:
    """The facts of ``text`` as ``analyzer`` reads its terms (see the module doc), a token in
    ``numbers`` counted as the term of its digits (``written.NUMBER_WORDS``, as the scorer
    counts it). ``word_cache``: a cache of each word's tokens and terms under these options, kept
    by the caller between texts (a word recurs far more often than a text). Case marks
    names only (a capitalised word within a sentence, in a text that has lowercase words too);
    the checks read the names of the reference alone, so the case of an output never changes
    a score."""
    nfkc = unicodedata.normalize("NFKC", text)
    low_text = nfkc.casefold()
    initials = [w[0] for w in _WORD.findall(nfkc) if w[0].isalpha()]
    # case marks names only in a text with words of both cases (not in a title or in capitals)
    mixed = any(c.islower() for c in initials) and any(c.isupper() for c in initials)
    start = True  # at the start of a sentence
    negator_words = analyzer.negators
    function_words = _common_words(analyzer.language, 100)
    terms: set[str] = set()
    negated: set[str] = set()
    plain: set[str] = set()
    negs: list[str] = []
    values: dict[str, set[str]] = {k: set() for k in _KINDS}
    # the text's content terms in order, None at a clause boundary:
    # (term, kind, value, word)
    seq: list[tuple[str, str | None, str | None, str] | None] = []
    reach = 0
    sequence: list[str] = []
    words = _WORD.findall(nfkc)
    for i, cased in enumerate(words):
        raw = cased.casefold()
        if len(raw) == 1 and not raw.isalnum():
            reach = 0
            seq.append(None)
            start = start or raw in ".!?"
            continue
        named = mixed and not start and cased[0].isupper() and not cased.isupper()
        start = False
        if raw in _CLAUSE_ENDS:
            reach = 0
        kind, value = _kind(raw, raw)
        if kind is not None and value is not None:
            values[kind].add(value)
        elif named:
            kind = "name"
        read = word_cache.get(raw) if word_cache is not None else None
        if read is None:
            read = _read_word(raw, analyzer, numbers)
            if word_cache is not None:
                if len(word_cache) > _WORDS_LIMIT:
                    word_cache.clear()
                word_cache[raw] = read
        for token, term in read:
            if term is not None:
                sequence.append(term)
            if token in negator_words and not _numbered(token, words, i):
                if token not in negs:
                    negs.append(token)
                reach = _SCOPE
                if term is not None:
                    terms.add(term)
                    plain.add(term)
                continue
            if term is None:
                continue
            terms.add(term)
            if token in function_words and kind in (None, "name"):
                if reach == 0:
                    plain.add(term)
                continue  # neither negated nor a place a substitution is read at
            if reach > 0:
                negated.add(term)
                reach -= 1
            else:
                plain.add(term)
            seq.append((term, kind, value, raw))
            kind = value = None  # "isn't": only the first token
    slots = []
    for i, item in enumerate(seq):
        if item is None:
            continue
        before = seq[i - 1] if i else None
        after = seq[i + 1] if i + 1 < len(seq) else None
        slots.append(
            (
                before[0] if before else None,
                item[0],
                after[0] if after else None,
                item[1],
                item[2],
                item[3],
            )
        )
    refusal = _refuses(low_text)
    named = any(s[3] == "name" for s in slots)
    valued = any(values.values())
    days = _dates(low_text) if values["number"] else ()
    return Facts(
        frozenset(terms),
        frozenset(negated),
        frozenset(plain),
        tuple(negs),
        {k: frozenset(v) for k, v in values.items()},
        tuple(slots),
        refusal,
        tuple(sequence),
        named,
        valued,
        frozenset(negated - plain),
        frozenset(s[1] for s in slots if s[3] == "name"),
        {k: tuple(s for s in slots if s[3] == k) for k in (*_KINDS, "name")},
        (READS_REFUSAL if refusal else 0)
        | (READS_NEGATOR if negs else 0)
        | (READS_NAME if named else 0)
        | (READS_VALUE if valued else 0),
        days,
    )


def _dates(low_text: str) -> tuple[tuple[int | None, str, int, str], ...]:
    # the days of a month named in a (casefolded) text, in order
    found = []
    for m in _DATE.finditer(low_text):
        day, month, year = (m[1], m[2], m[3]) if m[1] else (m[5], m[4], m[6])
        month = month.rstrip(".")
        if not 1 <= int(day) <= 31 or (month == "may" and m[4] and not year):
            continue  # "may 5" without a year: more often "(you) may" than the month
        found.append((int(year) if year else None, _MONTH_OF[month], int(day), m[0]))
    return tuple(found)


def _same_day(
    one: tuple[tuple[int | None, str, int, str], ...],
    other: tuple[tuple[int | None, str, int, str], ...],
) -> bool:
    # a day of ``one`` is a day of ``other`` (the same year too, where both name one)
    return any(
        (m1, d1) == (m2, d2) and (y1 is None or y2 is None or y1 == y2)
        for y1, m1, d1, _ in one
        for y2, m2, d2, _ in other
    )


_WORDS_LIMIT = 200_000  # cached words (``facts``' ``word_cache``) before the cache starts over


def _read_word(
    raw: str, analyzer: Analyzer, numbers: dict[str, str] | None
) -> tuple[tuple[str, str | None], ...]:
    # a word's tokens, each with the term it counts as (None: a stop word)
    return tuple(
        (token, analyzer.term(numbers.get(token, token) if numbers else token))
        for token in analyzer.tokens(raw)
    )


def together(sequence: Sequence[str], weights: dict[str, float], width: int) -> float:
    """The most of ``weights`` (a reference's terms and their squared weights) that any
    ``width`` consecutive terms of ``sequence`` hold, as a share of all of it: how much of the
    reference an output says in one place."""
    whole = sum(weights.values())
    if whole <= 0.0:
        return 0.0
    held: dict[str, int] = {}
    best = have = 0.0
    for i, term in enumerate(sequence):
        w = weights.get(term)
        if w is not None:
            if not held.get(term):
                have += w
            held[term] = held.get(term, 0) + 1
        if i >= width:
            old = sequence[i - width]
            wo = weights.get(old)
            if wo is not None:
                held[old] -= 1
                if not held[old]:
                    have -= wo
        best = max(best, have)
    return min(1.0, best / whole)


def _numbered(token: str, words: list[str], i: int) -> bool:
    # "No 7", "No. 7": a number's abbreviation, not a negation
    if token != "no":
        return False
    after = [w for w in words[i + 1 : i + 3] if w != "."]
    return bool(after) and after[0][:1].isdigit()


def _negation(one: Facts, other: Facts) -> str | None:
    # only ``one`` negates, and what it negates (and does not also state) ``other`` states:
    # "a loop ... no loops" says "a loop"
    if not one.negators or other.negators:
        return None
    if one.negated_only & other.plain:
        return one.negators[0]
    return None


def _in_place(out: Facts, ref: Facts, kind: str) -> tuple[str, str] | None:
    """A word of the reference of ``kind`` that the output replaces in the same place by one
    the reference does not have: (output word, reference word). The same place: the terms
    before and after the reference's word stand before and after the output's (a clause
    boundary of the reference matches anything, but not on both sides). A name is replaced by
    any word, and only where the output holds all the rest of the reference; a number, weekday
    or month by one of its kind that the reference does not name."""
    if kind == "name" and not (ref.terms - out.terms):
        return None
    candidates: list[tuple[str | None, str, str | None, str | None, str | None, str]] | None
    candidates = None  # the output's slots a reference word of ``kind`` may be replaced at
    for before, term, after, _k, value, word in ref.kind_slots.get(kind, ()):
        if before is None and after is None:
            continue
        if kind == "name":
            if ref.terms - out.terms != {term}:
                continue
        elif value in out.values[kind]:
            continue
        if candidates is None:
            if kind == "name":
                candidates = [s for s in out.slots if s[1] not in ref.terms]
            else:
                values = ref.values[kind]
                candidates = [
                    s
                    for s in out.kind_slots.get(kind, ())
                    if s[1] not in ref.terms and s[4] not in values
                ]
        for b2, _t2, a2, _k2, v2, w2 in candidates:
            if (before is None or before == b2) and (after is None or after == a2):
                return (v2 or w2), (value or word)
    return None


def reads_nothing(out: int, ref: int) -> bool:
    """Whether no check reads anything of a pair, from its texts' ``Facts.reads``: then
    ``veto`` is None (a test holds the two together)."""
    # a refusal or a negation vetoes only when one side has it
    return not (
        (out ^ ref) & (READS_REFUSAL | READS_NEGATOR) or ref & READS_NAME or out & ref & READS_VALUE
    )


def veto(out: Facts, ref: Facts, negation: bool = True) -> str | None:
    """The reason an output contradicts a reference (``None``: no veto). Every check but the
    name's is symmetric; that one reads the reference's side (its names, and the whole
    reference but the name in the output), so that neither text appended to the output nor
    the output's case can change it. ``negation=False``: no negation check (a question that
    itself negates: "when did the US not go to the Olympics?" is answered with its "not")."""
    if out.refusal != ref.refusal:
        return "refusal" if out.refusal else "refusal: only the reference declines"
    if not (out.negators or ref.negators or ref.named or (out.valued and ref.valued)):
        return None  # nothing any check reads
    if negation:
        word = _negation(out, ref)
        if word is not None:
            return f'contradiction: "{word}" only in the output'
        word = _negation(ref, out)
        if word is not None:
            return f'contradiction: "{word}" only in the reference'
    if out.valued and ref.valued:
        for kind in _KINDS:
            a, b = out.values[kind], ref.values[kind]
            # each side must name a value of the kind the other does not: a replaced one
            # (the pair of values, or ``_in_place`` either way, which finds none otherwise)
            if not (a - b and b - a):
                continue
            pair = (min(a), min(b)) if not a & b else _in_place(out, ref, kind)
            if pair is None:
                flipped = _in_place(ref, out, kind)
                pair = (flipped[1], flipped[0]) if flipped is not None else None
            if pair is not None:
                return f"{kind}: {pair[0]} vs {pair[1]}"
        # a day written elsewhere in its sentence ("September 6, 1666" vs "5 September 1666")
        if out.dates and ref.dates and not _same_day(out.dates, ref.dates):
            return f"date: {out.dates[0][3]} vs {ref.dates[0][3]}"
    # a name: the output holds the whole reference but one of its names
    if ref.named and _one_missing(ref.terms, out.terms) in ref.name_terms:
        pair = _in_place(out, ref, "name")
        if pair is not None:
            return f"name: {pair[0]} vs {pair[1]}"
    return None


def _one_missing(terms: frozenset[str], have: frozenset[str]) -> str | None:
    # the one term of ``terms`` that ``have`` lacks; None when it lacks none or several (a walk
    # that stops at the second: two long texts that differ by many terms cost little)
    missing = None
    for term in terms:
        if term not in have:
            if missing is not None:
                return None
            missing = term
    return missing


def pressed(score: float) -> float:
    """A vetoed score: above ``FLOOR``, pressed into ``(FLOOR, TOP]`` keeping the order."""
    if score <= FLOOR:
        return score
    return FLOOR + (TOP - FLOOR) * (score - FLOOR) / (1.0 - FLOOR)
