"""The rules every layer shares, each in one place: the scorer options (names, defaults, help,
parsing), the yes/no words, the threshold check and the strictness bands, and the retention
choices. No storage, HTTP or CLI here: the scorer, the IDF tables, the service, the CLI and
the studio all read these.

>>> check_threshold("0.75"), strictness(0.75), yes_no(" Yes ")
(0.75, 'moderate', True)
"""

from __future__ import annotations

import math
import os
from collections.abc import Collection
from typing import Any, NamedTuple

from simeval.errors import InvalidInput, InvalidOption
from simeval.scoring.analyzer import TOKENIZERS, Analyzer, language_name

# -- scorer options -------------------------------------------------------------------------------
DEFAULTS: dict[str, Any] = {
    "language": "english",
    "stemming": True,
    "prefix": 4,
    "stop_words": 0,
    "ngram": 1,
    "sublinear_tf": True,
    "idf": "background",
    "tokenizer": "unicode",
    # Chosen on the benchmark (docs/benchmarks.md "Scoring with the question", "Negation").
    "input_weight": 0.5,
    "negation": 0.9,
    # the calibrated scale (simeval.scoring.bands, docs/scores.md "The scale: bands")
    "scale": "bands",
    # docs/scores.md "A pass means a right answer": with the question known, the score is also
    # read as the share of the reference the output holds; contradictions (negation, numbers,
    # dates, names, refusals) are vetoed below the threshold band
    "answer": True,
    "contradiction": True,
    # per eval (docs/scores.md "Required terms and synonyms"): words in one group count as one term;
    # terms an output must contain to pass (not part of the score, nor of the fingerprint)
    "synonyms": (),
    "required": (),
}
OPTION_NAMES = tuple(DEFAULTS)
# The options as they were before the tokenizer, the input and negation existed: the baseline
# `simeval bench` compares the default with, and a way to keep scoring as before.
PREVIOUS_DEFAULTS: dict[str, Any] = {
    "tokenizer": "words",
    "input_weight": 1.0,
    "negation": 1.0,
    "scale": "cosine",
    "answer": False,
    "contradiction": False,
}
# The options that give the default scores of simeval 0.1.0 exactly (its calibrated curve with
# the length rule, no answer reading, no vetoes).
RELEASE_0_1_DEFAULTS: dict[str, Any] = {"scale": "bands-1", "answer": False, "contradiction": False}
OPTION_HELP = {
    "language": "stemmer and background word list, e.g. english, german, fr",
    "stemming": "Snowball stemming on/off",
    "prefix": "keep the first N characters of each stemmed term (0 = all)",
    "stop_words": "drop the N most frequent words of the language (0 = none, true = 100)",
    "ngram": "largest word n-gram used as a term (1-3)",
    "sublinear_tf": "term frequency weight 1 + ln(count) instead of count",
    "idf": "background (built-in), pair (naive, the two texts only) or a corpus table file",
    "tokenizer": "unicode (CJK characters, symbols, n't) or words (runs of word characters)",
    "input_weight": "weight of the terms the input (question) contains, 0-1 (1 = ignore input)",
    "negation": "factor when exactly one text has a negator, 0-1 (1 = off)",
    "synonyms": "groups of words counted as one term, e.g. begin,commence,start (repeatable)",
    "required": "a term the output must contain to pass, whatever its score (repeatable)",
    "scale": "bands (calibrated to the strictness bands), bands-1 (0.1.0's curve) or cosine",
    "answer": "with the question known, score the share of the reference the output holds",
    "contradiction": "veto negated, other-number/date/name and refusal pairs below 0.70",
}
SCALES = ("bands", "bands-1", "cosine")


# -- yes/no words ---------------------------------------------------------------------------------
TRUE_WORDS = frozenset({"true", "yes", "on"})
FALSE_WORDS = frozenset({"false", "no", "off"})
# a human label or a verdict filter: pass/fail words as well as true/false, yes/no
PASS_WORDS = frozenset({"pass", "passed", "true", "yes", "y", "good", "positive", "ok"})
FAIL_WORDS = frozenset({"fail", "failed", "false", "no", "n", "bad", "negative"})


def yes_no(
    value: object, true: Collection[str] = TRUE_WORDS, false: Collection[str] = FALSE_WORDS
) -> bool | None:
    """True/False for a bool or a word like "yes"/"off" (case and spacing aside); None for
    anything else. ``true``/``false``: other word lists, e.g. ``PASS_WORDS``/``FAIL_WORDS``.

    >>> yes_no("OFF"), yes_no(True), yes_no("maybe"), yes_no("good", PASS_WORDS, FAIL_WORDS)
    (False, True, None, True)
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        word = value.strip().lower()
        if word in true:
            return True
        if word in false:
            return False
    return None


def _as_bool(name: str, value: object) -> bool:
    flag = yes_no(value)
    if flag is None and isinstance(value, str) and value.strip() in {"0", "1"}:
        flag = value.strip() == "1"
    if flag is None:
        raise InvalidOption(f"option {name!r} must be true or false, not {value!r}")
    return flag


def _as_int(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # 34.0: an integer to JSON (and JSON Schema), as 34
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvalidOption(f"option {name!r} must be an integer in [{low}, {high}], not {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise InvalidOption(f"option {name!r} must be an integer, not {value!r}") from None
    if not low <= number <= high:
        raise InvalidOption(f"option {name!r} must be in [{low}, {high}], not {number}")
    return number


def resolve_options(options: dict[str, Any]) -> dict[str, Any]:
    """Validate scorer options and fill in defaults; the canonical form of a configuration.

    The ``idf`` value is kept as given (the scorer turns it into its source). Raises
    ``InvalidOption`` naming the unknown option or the bad value.
    """
    unknown = sorted(set(options) - set(DEFAULTS))
    if unknown:
        raise InvalidOption(
            f"unknown scorer option {unknown[0]!r}; known options: {', '.join(DEFAULTS)}"
        )
    merged = {**DEFAULTS, **{k: v for k, v in options.items() if v is not None}}
    stop = merged["stop_words"]
    flag = yes_no(stop)
    if flag is not None:  # on: the 100 most frequent words; off: none
        stop = 100 if flag else 0
    idf = merged["idf"]
    return {
        "language": language_name(merged["language"]),
        "stemming": _as_bool("stemming", merged["stemming"]),
        "prefix": _as_int("prefix", merged["prefix"], 0, 64),
        "stop_words": _as_int("stop_words", stop, 0, 5000),
        "ngram": _as_int("ngram", merged["ngram"], 1, 3),
        "sublinear_tf": _as_bool("sublinear_tf", merged["sublinear_tf"]),
        "idf": idf,
        "tokenizer": _as_tokenizer(merged["tokenizer"]),
        "input_weight": _as_factor("input_weight", merged["input_weight"]),
        "negation": _as_factor("negation", merged["negation"]),
        "scale": _as_scale(merged["scale"]),
        "answer": _as_bool("answer", merged["answer"]),
        "contradiction": _as_bool("contradiction", merged["contradiction"]),
        "synonyms": synonym_groups(merged["synonyms"]),
        "required": required_words(merged["required"]),
    }


def _words(value: object, what: str) -> list[str]:
    # a list of words, or one comma-separated string of them (the CLI, a form field)
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise InvalidOption(f"{what} must be a list of words, not {value!r}")
    out: list[str] = []
    for item in items:
        if isinstance(item, int | float) and not isinstance(item, bool):
            item = str(item)  # YAML reads "9" in [nine, 9] as a number
        if not isinstance(item, str):
            raise InvalidOption(f"{what} must be words (text), not {item!r}")
        word = " ".join(item.split())
        if word and word not in out:
            out.append(word)
    return out


def _whole_number(word: object) -> object:
    """A synonym given as a number: a whole one is its digits (YAML reads "9" in [nine, 9] as
    a number; JSON's 9.0 is 9), a fraction is no word."""
    if isinstance(word, float):
        if not word.is_integer():
            raise InvalidOption(f"a synonym must be a word or a whole number, not {word!r}")
        return int(word)
    return word


def synonym_groups(value: object) -> tuple[tuple[str, ...], ...]:
    """The ``synonyms`` option in its canonical form: groups of at least two distinct words,
    each group sorted, the groups sorted (so the same groups, given in any order, give the
    same fingerprint). A group is a list of words or one comma-separated string.

    >>> synonym_groups([["start", "Begin"], "commence, begin"])
    (('begin', 'commence'), ('begin', 'start'))
    """
    if value is None or value == "" or value == ():
        return ()
    groups = [value] if isinstance(value, str) else value
    if not isinstance(groups, list | tuple):
        raise InvalidOption(f"option 'synonyms' must be a list of groups of words, not {value!r}")
    if groups and all(isinstance(g, str) and "," not in g for g in groups):
        groups = [groups]  # one group given as a plain list of words
    out = set()
    for group in groups:
        if isinstance(group, list | tuple):
            group = [_whole_number(w) for w in group]
            if any(isinstance(w, str) and not w.split() for w in group):
                raise InvalidOption(f"a synonym must be a word, not blank: {group!r}")
        given = _words(group, "a synonym group")
        for word in given:  # the API schema states this shape; stop words are the analyzer's
            if not all(c.isalnum() for c in word):
                raise InvalidOption(f"synonym {word!r} must be one word of letters and digits")
        words = sorted({w.lower() for w in given})
        if len(words) < 2:
            raise InvalidOption(f"a synonym group needs at least two different words: {group!r}")
        out.add(tuple(words))
    return tuple(sorted(out))


def required_words(value: object) -> tuple[str, ...]:
    """The ``required`` option in its canonical form: distinct words (or phrases) in the order
    given; a list or one comma-separated string.

    >>> required_words("Paris, Seine")
    ('Paris', 'Seine')
    """
    if value is None or value == ():
        return ()
    return tuple(_words(value, "option 'required'"))


def _as_factor(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidOption(f"option {name!r} must be a number in [0, 1], not {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise InvalidOption(f"option {name!r} must be a number in [0, 1], not {value!r}") from None
    if not 0.0 <= number <= 1.0:  # NaN fails too
        raise InvalidOption(f"option {name!r} must be in [0, 1], not {value!r}")
    return number


def _as_scale(value: object) -> str:
    name = value.strip().lower() if isinstance(value, str) else value
    if name not in SCALES:
        raise InvalidOption(f"option 'scale' must be one of {', '.join(SCALES)}, not {value!r}")
    return str(name)


def _as_tokenizer(value: object) -> str:
    name = value.strip().lower() if isinstance(value, str) else value
    if name not in TOKENIZERS:
        raise InvalidOption(
            f"option 'tokenizer' must be one of {', '.join(TOKENIZERS)}, not {value!r}"
        )
    return str(name)


def analyzer_from_options(options: dict[str, Any]) -> Analyzer:
    """The analyzer part of a set of scorer options (validated)."""
    opts = resolve_options({k: v for k, v in options.items() if k != "idf"})
    return Analyzer(
        opts["language"],
        opts["stemming"],
        opts["prefix"],
        opts["stop_words"],
        opts["ngram"],
        opts["tokenizer"],
        opts["synonyms"],
    )


# -- thresholds -----------------------------------------------------------------------------------
DEFAULT_THRESHOLD = 0.80


def check_unit(value: object, what: str) -> float:
    """``value`` as a float in [0, 1]; ``InvalidInput`` naming ``what`` for anything else (NaN
    included). A threshold, a score, a review."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidInput(f"{what} must be a number in [0, 1], not {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise InvalidInput(f"{what} must be a number in [0, 1], not {value!r}") from None
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        # the number, not how it arrived: "1.5" typed in the studio or the CLI and 1.5 sent
        # as JSON get the same message
        raise InvalidInput(f"{what} must be a number in [0, 1], not {number:g}")
    return number


def check_threshold(threshold: object) -> float:
    """A threshold as a float in [0, 1]; ``InvalidInput`` for anything else (NaN included)."""
    return check_unit(threshold, "threshold")


class Band(NamedTuple):
    """A strictness band: the lowest threshold in it, a key (CSS class), a label and help."""

    low: float
    key: str
    label: str
    help: str

    @property
    def range(self) -> str:
        """The thresholds the band covers, as shown beside it: ``0.80–0.89``."""
        i = STRICTNESS_BANDS.index(self)
        if i == 0:
            return f"{self.low:.2f}+"
        above = STRICTNESS_BANDS[i - 1].low
        if i == len(STRICTNESS_BANDS) - 1:
            return f"< {above:.2f}"
        return f"{self.low:.2f}–{above - 0.01:.2f}"


# design.md "Words" (the seed page's strictness guidance), highest band first
STRICTNESS_BANDS: tuple[Band, ...] = (
    Band(0.90, "very-strict", "Very strict", "near-identical phrasing required"),
    Band(0.80, "strict", "Strict", "same content, different words acceptable"),
    Band(0.70, "moderate", "Moderate", "paraphrasing and some omissions acceptable"),
    Band(0.0, "lenient", "Lenient", "general topic alignment"),
)


def band(threshold: float) -> Band:
    """The strictness band of a threshold.

    >>> band(0.85).label, band(0.85).range
    ('Strict', '0.80–0.89')
    """
    for b in STRICTNESS_BANDS:
        if threshold >= b.low:
            return b
    return STRICTNESS_BANDS[-1]


def strictness(threshold: float) -> str:
    """The strictness band of a threshold (design.md "Words").

    >>> strictness(0.8), strictness(0.95), strictness(0.5)
    ('strict', 'very strict', 'lenient')
    """
    return band(threshold).label.lower()


# -- retention ------------------------------------------------------------------------------------
RETENTION_CHOICES = (7, 30, 90, 180)
"""How many days captures and results may be kept (or ``None``: forever)."""
RETENTION_TEXT = ", ".join(map(str, RETENTION_CHOICES)) + " days or forever"


OptionsKey = tuple[tuple[str, Any], ...]


def options_key(options: dict[str, Any]) -> OptionsKey:
    """Options as a hashable key that keeps each value's type (what scorers are cached by):
    ``0`` and ``False`` (equal, and of one hash, in Python) are other options, so a cached
    scorer built for one is never handed out for the other, whose check would refuse it.
    Lists (synonym groups, required terms: lists of lists from JSON) become tuples, paths
    their text. ``from_key`` gives the options back."""
    return tuple((k, _typed(v)) for k, v in sorted(options.items()))


def from_key(key: OptionsKey) -> dict[str, Any]:
    """The options an ``options_key`` was made of (lists as tuples, paths as text)."""
    return {k: _untyped(v) for k, v in key}


def _typed(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return ("tuple", tuple(map(_typed, value)))
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    return (type(value).__name__, value)


def _untyped(value: Any) -> Any:
    kind, inner = value
    return tuple(map(_untyped, inner)) if kind == "tuple" else inner
