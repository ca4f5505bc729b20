"""How models write answers, read the way a person reads them (on with option ``answer``).

- ``unglue(text)``: words a model (or its citation markup) ran together are read apart: a
  lower-case letter before a capital ("wasBuddhism", "byThe", and so "DiClemente" meets "Di
  Clemente"), a word glued to a number ("of27", "episodes1"), a number glued to a word
  ("1978to"). Ordinal and plural endings stay on their number ("4th", "1930s"). Both texts
  of a pair are read alike, so "YouTube" still meets "YouTube".
- ``NUMBER_WORDS``: English number words and the digits they stand for ("seven" -> "7"), for
  the terms of a score and for the vetoes. "one" is left out: it is far more often a pronoun
  ("one of the") than a count.

>>> unglue("It came to China wasBuddhism, a total of27 episodes1. Signed in1978to protect")
'It came to China was Buddhism, a total of 27 episodes 1. Signed in 1978 to protect'
>>> unglue("in1996inAtlanta, Carlo DiClemente, the 1990s, the 4th of July")
'in 1996 in Atlanta, Carlo Di Clemente, the 1990s, the 4th of July'

"""

from __future__ import annotations

import re

_UNITS = [
    "zero",
    "_",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
]
_TENS = ["thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
NUMBER_WORDS: dict[str, str] = {w: str(i) for i, w in enumerate(_UNITS) if w != "_"} | {
    w: str(10 * i) for i, w in enumerate(_TENS, 3)
}

# a glue point (each alternative takes the one character before it, so a scan is linear):
# after a digit before a word of 2+ letters that is not an ordinal or plural ending; between
# a lower-case and an upper-case letter; after two lower-case letters before a digit
_GLUED = re.compile(
    r"[0-9](?=(?!(?:st|nd|rd|th)(?![a-z]))[a-z]{2})|[a-z](?=[A-Z])|(?<=[a-z])[a-z](?=[0-9])"
)


def _apart(match: re.Match[str]) -> str:
    return match.group(0) + " "


def unglue_py(text: str) -> str:
    """``text`` with the words a model ran together read apart (see the module docstring):
    the Python reference of the C core's ``unglue``."""
    return _GLUED.sub(_apart, text)


try:
    from simeval.scoring._fast import unglue as unglue
except ImportError:  # pragma: no cover - only without a C compiler at install time
    unglue = unglue_py
