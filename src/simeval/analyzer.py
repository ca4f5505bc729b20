"""Text analysis: normalisation, tokens, stop words, stemming, term truncation.

The analyzer turns text into the terms a vector is made of. It is configured per eval and its
configuration is part of every score's fingerprint. Defaults were chosen by the quality
benchmark (`simeval bench quality`, pooled STS Pearson), see README "How the score works".
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass

import Stemmer

from simeval.errors import InvalidOption

# A number with its separators ("1,650", "0.32") is one token; otherwise runs of word
# characters. One-character tokens are kept: digits and initials carry meaning in short answers.
TOKEN_PATTERN = re.compile(r"\d+(?:[.,]\d+)*|\w+")

# language name -> (Snowball algorithm in PyStemmer, wordfreq language code). Only languages
# that both a stemmer and a word-frequency list cover: the background IDF needs both.
LANGUAGES: dict[str, tuple[str, str]] = {
    "english": ("english", "en"),
    "german": ("german", "de"),
    "french": ("french", "fr"),
    "spanish": ("spanish", "es"),
    "italian": ("italian", "it"),
    "portuguese": ("portuguese", "pt"),
    "dutch": ("dutch", "nl"),
    "swedish": ("swedish", "sv"),
    "danish": ("danish", "da"),
    "norwegian": ("norwegian", "nb"),
    "finnish": ("finnish", "fi"),
    "russian": ("russian", "ru"),
    "hungarian": ("hungarian", "hu"),
    "romanian": ("romanian", "ro"),
    "turkish": ("turkish", "tr"),
    "catalan": ("catalan", "ca"),
    "czech": ("czech", "cs"),
    "polish": ("polish", "pl"),
    "greek": ("greek", "el"),
    "lithuanian": ("lithuanian", "lt"),
    "indonesian": ("indonesian", "id"),
    "arabic": ("arabic", "ar"),
}
_CODES = {code: name for name, (_, code) in LANGUAGES.items()}


def language_name(language: str) -> str:
    """The canonical language name for a name or an ISO code ("en" -> "english")."""
    if not isinstance(language, str):
        raise InvalidOption(f"option 'language' must be a string, not {type(language).__name__}")
    key = language.strip().lower()
    if key in LANGUAGES:
        return key
    if key in _CODES:
        return _CODES[key]
    raise InvalidOption(
        f"unsupported language {language!r}; supported: {', '.join(sorted(LANGUAGES))}"
    )


def normalize(text: str) -> str:
    """Unicode NFKC, then case folding: the form every comparison is made on."""
    if text.isascii():  # NFKC is the identity on ASCII, and casefold is lower
        return text.lower()
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


def scope_key(text: str) -> str:
    """The form in which inputs are compared with an eval's input scope (captures and data-set
    rows alike): NFKC, case folding, runs of whitespace as one space, trimmed.

    >>> scope_key("  What is\\n the  CAPITAL of France? ")
    'what is the capital of france?'
    """
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


@functools.lru_cache(maxsize=32)
def stop_word_set(language: str, count: int) -> frozenset[str]:
    """The ``count`` most frequent words of the language, by the wordfreq lists.

    Frequency is a language-independent definition of a stop word, so every supported language
    has a list without shipping one.
    """
    code = LANGUAGES[language][1]
    import wordfreq  # on first use: importing it takes ~0.1 s, and the cache avoids it

    return frozenset(normalize(w) for w in wordfreq.top_n_list(code, count))


@dataclass(frozen=True)
class Analyzer:
    """Configuration of the text -> terms step.

    - ``language``: Snowball stemmer and background word list (see ``LANGUAGES``).
    - ``stemming``: reduce words to their Snowball stem ("running" -> "run").
    - ``prefix``: keep only the first N characters of a non-numeric term after stemming
      (0 = whole term). Truncation merges the morphological variants the stemmer leaves apart
      ("organization"/"organize"); 4 scored best on the benchmark.
    - ``stop_words``: drop the N most frequent words of the language (0 = keep all). Off by
      default: IDF already gives frequent words little weight.
    - ``ngram``: largest word n-gram used as a term (1 = single words).
    """

    language: str = "english"
    stemming: bool = True
    prefix: int = 4
    stop_words: int = 0
    ngram: int = 1

    def config(self) -> dict[str, object]:
        return {
            "language": self.language,
            "stemming": self.stemming,
            "prefix": self.prefix,
            "stop_words": self.stop_words,
            "ngram": self.ngram,
            "tokens": TOKEN_PATTERN.pattern,
        }

    @functools.cached_property
    def _stemmer(self) -> Stemmer.Stemmer:
        return Stemmer.Stemmer(LANGUAGES[self.language][0])

    @functools.cached_property
    def _stops(self) -> frozenset[str]:
        return stop_word_set(self.language, self.stop_words) if self.stop_words else frozenset()

    def tokens(self, text: str) -> list[str]:
        """The normalised tokens of a text, stop words included."""
        return TOKEN_PATTERN.findall(normalize(text))

    def term(self, token: str) -> str | None:
        """The term a token counts as, or None for a stop word."""
        if token in self._stops:
            return None
        if token[0].isdigit():
            return token
        term = self._stemmer.stemWord(token) if self.stemming else token
        return term[: self.prefix] if self.prefix else term

    def terms(self, text: str) -> list[str]:
        """The terms of a text in order, n-grams (joined by a space) after the single words."""
        words = [t for t in map(self.term, self.tokens(text)) if t is not None]
        out = list(words)
        for n in range(2, self.ngram + 1):
            out.extend(" ".join(words[i : i + n]) for i in range(len(words) - n + 1))
        return out
