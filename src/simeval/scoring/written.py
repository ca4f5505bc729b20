"""How models write answers, read the way a person reads them (on with option ``answer``).

- ``unglue(text)``: words a model (or its citation markup) ran together are read apart: a
  lower-case letter before a capital ("wasBuddhism", "byThe", and so "DiClemente" meets "Di
  Clemente"), a word glued to a number ("of27", "episodes1"), a number glued to a word
  ("1978to"), a citation mark glued to a year ("in 19731." is "in 1973 1."). Ordinal and
  plural endings stay on their number ("4th", "1930s"). A span of years written short is read
  whole ("1979-80" is "1979-1980", "1999-00" is "1999-2000"). Both texts of a pair are read
  alike, so "YouTube" still meets "YouTube".
- ``NUMBER_WORDS``: English number words and the digits they stand for ("seven" -> "7",
  "third" -> "3"), for the terms of a score and for the vetoes. "one", "first" and "second"
  are left out: they are far more often a pronoun, an order or a unit ("one of the", "first
  performed", "per second") than a count.

>>> unglue("It came to China wasBuddhism, a total of27 episodes1. Signed in1978to protect")
'It came to China was Buddhism, a total of 27 episodes 1. Signed in 1978 to protect'
>>> unglue("in1996inAtlanta, Carlo DiClemente, the 1990s, the 4th of July")
'in 1996 in Atlanta, Carlo Di Clemente, the 1990s, the 4th of July'
>>> unglue("It opened in 19861. The 1979–80 season, 1999-00, 12345 and 0.19731")
'It opened in 1986 1. The 1979–1980 season, 1999-2000, 12345 and 0.19731'

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
_ORDINALS = [
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "eleventh",
    "twelfth",
    "thirteenth",
    "fourteenth",
    "fifteenth",
    "sixteenth",
    "seventeenth",
    "eighteenth",
    "nineteenth",
    "twentieth",
]
NUMBER_WORDS: dict[str, str] = (
    {w: str(i) for i, w in enumerate(_UNITS) if w != "_"}
    | {w: str(10 * i) for i, w in enumerate(_TENS, 3)}
    | {w: str(i) for i, w in enumerate(_ORDINALS, 3)}
)

# a glue point (each alternative takes the characters before it, so a scan is linear): after
# a digit before a word of 2+ letters that is not an ordinal or plural ending; between a
# lower-case and an upper-case letter; after two lower-case letters before a digit; after a
# year (1500-2099, not within a longer number or a decimal) before one digit 1-9 that ends
# the word (Bing's citation marks: "in 19731.")
_GLUED = re.compile(
    r"[0-9](?=(?!(?:st|nd|rd|th)(?![a-z]))[a-z]{2})|[a-z](?=[A-Z])|(?<=[a-z])[a-z](?=[0-9])"
    r"|(?<![0-9.,])(?:1[5-9]|20)[0-9]{2}(?=[1-9](?![0-9A-Za-z]))"
)
# a span of years written short: a year (1000-2099, not within a longer number or a decimal),
# a hyphen or an en dash, two digits that end the number
_SPAN = re.compile(r"(?<![0-9.,])(1[0-9]|20)([0-9]{2})([-\u2013])(?=[0-9]{2}(?![0-9]))")


def _apart(match: re.Match[str]) -> str:
    return match.group(0) + " "


def _century(match: re.Match[str]) -> str:
    # "1979-80" -> "1979-1980"; "1999-00" -> "1999-2000": the end is never before the start
    century, start, end = int(match.group(1)), match.group(2), match.string[match.end() :][:2]
    return match.group(0) + str(century + (end < start))


def unglue_py(text: str) -> str:
    """``text`` with the words a model ran together read apart and spans of years read whole
    (see the module docstring): the Python reference of the C core's ``unglue``."""
    return _SPAN.sub(_century, _GLUED.sub(_apart, text))


try:
    from simeval.scoring._fast import unglue as unglue
except ImportError:  # pragma: no cover - only without a C compiler at install time
    unglue = unglue_py
