"""Text analysis: normalisation, tokens, stop words, stemming, term truncation.

The analyzer turns text into the terms a vector is made of. It is configured per eval and its
configuration is part of every score's fingerprint. Defaults were chosen by the quality
benchmark (`simeval bench quality`, pooled STS Pearson), see docs/benchmarks.md.

Tokens (the default ``unicode`` tokenizer), on the normalised text:

- a number with its separators ("1,650", "0.32");
- one Han, Hiragana, Katakana or Hangul character: scripts written without spaces between
  words are compared character by character (docs/scores.md "Languages");
- a run of other word characters; the "n't" of an English contraction is read as "not"
  ("isn't" -> "isn", "not"; "can't" -> "can", "not"), so the negation is seen;
- one symbol character outside ASCII (an emoji, "°", "€", "→"): a term like a word.

The ``words`` tokenizer is the one before these rules (runs of word characters only), kept so
results scored before them can be reproduced.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass

import Stemmer

from simeval.errors import InvalidOption

# Character ranges of the scripts written without spaces (only their word characters count):
# Hangul Jamo, CJK symbols (々, 〇), Hiragana, Katakana, Hangul compatibility jamo, Katakana
# extensions, CJK Ext. A, CJK unified, Hangul Jamo Ext. A, Hangul syllables and Jamo Ext. B,
# CJK compatibility, halfwidth Katakana, Kana supplement, CJK Ext. B-G.
CJK_RANGES: tuple[tuple[int, int], ...] = (
    (0x1100, 0x11FF),
    (0x3000, 0x30FF),
    (0x3130, 0x318F),
    (0x31F0, 0x31FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xA960, 0xA97F),
    (0xAC00, 0xD7FF),
    (0xF900, 0xFAFF),
    (0xFF66, 0xFF9F),
    (0x1B000, 0x1B16F),
    (0x20000, 0x3134F),
)
_CJK_CLASS = "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in CJK_RANGES)

# The ``words`` tokenizer: a number with its separators ("1,650", "0.32") is one token;
# otherwise runs of word characters. One-character tokens are kept: digits and initials carry
# meaning in short answers.
WORDS_PATTERN = re.compile(r"\d+(?:[.,]\d+)*|\w+")
# The ``unicode`` tokenizer: a number; one CJK character; a run of other word characters (with
# a trailing "n't" kept on it, split off by ``Analyzer.tokens``); any other non-ASCII
# character that is neither a word character nor a space (kept only when it is a symbol).
TOKEN_PATTERN = re.compile(
    rf"\d+(?:[.,]\d+)*|(?=\w)[{_CJK_CLASS}]|[^\W{_CJK_CLASS}]+(?:(?<=n)['’]t(?!\w))?"
    r"|[^\w\s\x00-\x7f]"
)
TOKENIZERS = ("unicode", "words")

NOT = "not"
# Symbols that stand for no symbol: the replacement characters of broken or missing data.
NOT_SYMBOLS = frozenset("\ufffc\ufffd")


def is_cjk(char: str) -> bool:
    """True for a Han, Hiragana, Katakana or Hangul word character (one term each)."""
    cp = ord(char)
    return any(a <= cp <= b for a, b in CJK_RANGES) and (char.isalnum() or char == "_")


def is_symbol(char: str) -> bool:
    """True for a non-ASCII symbol (Unicode category S*) that is not a word character."""
    return (
        ord(char) > 127
        and unicodedata.category(char)[0] == "S"
        and not (char.isalnum() or char == "_")
        and char not in NOT_SYMBOLS
    )


# language name -> (Snowball algorithm in PyStemmer or None, wordfreq language code): every
# language wordfreq has a 'best' word list for. A language without a Snowball stemmer is scored
# without stemming (the ``stemming`` option is then off, and says so in the fingerprint).
LANGUAGES: dict[str, tuple[str | None, str]] = {
    "arabic": ("arabic", "ar"),
    "bengali": (None, "bn"),
    "bulgarian": (None, "bg"),
    "catalan": ("catalan", "ca"),
    "chinese": (None, "zh"),
    "czech": ("czech", "cs"),
    "danish": ("danish", "da"),
    "dutch": ("dutch", "nl"),
    "english": ("english", "en"),
    "filipino": (None, "fil"),
    "finnish": ("finnish", "fi"),
    "french": ("french", "fr"),
    "german": ("german", "de"),
    "greek": ("greek", "el"),
    "hebrew": (None, "he"),
    "hindi": ("hindi", "hi"),
    "hungarian": ("hungarian", "hu"),
    "icelandic": (None, "is"),
    "indonesian": ("indonesian", "id"),
    "italian": ("italian", "it"),
    "japanese": (None, "ja"),
    "korean": (None, "ko"),
    "latvian": (None, "lv"),
    "lithuanian": ("lithuanian", "lt"),
    "macedonian": (None, "mk"),
    "malay": (None, "ms"),
    "norwegian": ("norwegian", "nb"),
    "persian": ("persian", "fa"),
    "polish": ("polish", "pl"),
    "portuguese": ("portuguese", "pt"),
    "romanian": ("romanian", "ro"),
    "russian": ("russian", "ru"),
    "serbo-croatian": ("serbian", "sh"),
    "slovak": (None, "sk"),
    "slovenian": (None, "sl"),
    "spanish": ("spanish", "es"),
    "swedish": ("swedish", "sv"),
    "tamil": ("tamil", "ta"),
    "turkish": ("turkish", "tr"),
    "ukrainian": (None, "uk"),
    "urdu": (None, "ur"),
    "vietnamese": (None, "vi"),
}
_CODES = {code: name for name, (_, code) in LANGUAGES.items()}
_ALIASES = {"no": "nb", "sr": "sh", "hr": "sh", "bs": "sh", "tl": "fil", "in": "id"}

# Words that negate a statement, per language, in normalised form (the "n't" of English
# contractions becomes "not"). Han and Hangul negators count in every language, as CJK
# characters are terms in every language. Languages not listed have no negation check.
NEGATORS: dict[str, tuple[str, ...]] = {
    "english": (
        "not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "nowhere", "cannot",
    ),
    "german": (
        "nicht", "kein", "keine", "keinen", "keinem", "keiner", "keines", "nie", "niemals",
        "nichts", "niemand", "weder",
    ),
    "french": ("ne", "pas", "non", "jamais", "aucun", "aucune", "rien", "ni"),
    "spanish": ("no", "nunca", "jamás", "nada", "nadie", "ningún", "ninguno", "ninguna", "ni"),
    "italian": ("non", "mai", "niente", "nulla", "nessuno", "nessuna", "né"),
    "portuguese": ("não", "nunca", "nada", "ninguém", "nenhum", "nenhuma", "nem", "jamais"),
    "dutch": ("niet", "geen", "nooit", "niets", "niemand", "noch"),
}  # fmt: skip
CJK_NEGATORS = ("不", "没", "沒", "无", "無", "未", "非", "别", "別", "莫", "勿", "않", "없", "못")


def language_name(language: str) -> str:
    """The canonical language name for a name or an ISO code ("en" -> "english")."""
    if not isinstance(language, str):
        raise InvalidOption(f"option 'language' must be a string, not {type(language).__name__}")
    key = language.strip().lower()
    if key in LANGUAGES:
        return key
    key = _ALIASES.get(key, key)
    if key in _CODES:
        return _CODES[key]
    raise InvalidOption(
        f"unsupported language {language!r}; supported: {', '.join(sorted(LANGUAGES))} "
        f"(or their ISO codes: {', '.join(sorted(_CODES))})"
    )


@functools.cache
def has_stemmer(language: str) -> bool:
    """Whether the installed PyStemmer has a Snowball stemmer for the language."""
    algorithm = LANGUAGES[language][0]
    return algorithm is not None and algorithm in Stemmer.algorithms()


def normalize(text: str) -> str:
    """Unicode NFKC, then case folding, then NFKC again: the form every comparison is made on.

    (The C core computes the same string a piece at a time: only the characters that NFKC or
    case folding change go through ``unicodedata``; see ``char_info``.)
    """
    if text.isascii():  # NFKC is the identity on ASCII, and casefold is lower
        return text.lower()
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


# Flags of ``char_info``, read by the C core (`_fast.c` has the same values).
CI_SIMPLE = 1 << 21  # normalises on its own to the one character in the low 21 bits
CI_WORD = 1 << 22  # \w
CI_DEC = 1 << 23  # \d
CI_CJK = 1 << 24  # one term per character
CI_SYM = 1 << 25  # a symbol term


def _stable(char: str) -> bool:
    # A text may be cut before such a character without changing its NFKC form: a starter
    # that no normalisation changes and that nothing composes with (every second character of
    # a canonical composition is a combining mark or a conjoining Hangul jamo; a test checks
    # this on the Unicode data of the running Python).
    cp = ord(char)
    return (
        unicodedata.combining(char) == 0
        and unicodedata.category(char)[0] != "M"
        and not (0x1100 <= cp <= 0x11FF or 0xA960 <= cp <= 0xA97F or 0xD7B0 <= cp <= 0xD7FF)
        and unicodedata.normalize("NFKC", char) == char
    )


def char_info(cp: int) -> int:
    """What the C core needs to know of one code point: the flags above, and for a "simple"
    character (CI_SIMPLE) the one character it normalises to. A text normalises piecewise:
    simple characters alone, every run of other characters together with the character before
    it (``normalize`` of that piece); this equals ``normalize`` of the whole text because a
    simple character is a stable starter (UAX #15 "stable code points") before and after case
    folding."""
    char = chr(cp)
    info = 0
    folded = char.casefold()
    if len(folded) == 1 and _stable(char) and _stable(folded):
        info |= CI_SIMPLE | ord(folded)
    if char.isalnum() or char == "_":
        info |= CI_WORD
        if is_cjk(char):
            info |= CI_CJK
    if char.isdecimal():
        info |= CI_DEC
    if is_symbol(char):
        info |= CI_SYM
    return info


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


def split_tokens(text: str, tokenizer: str = "unicode") -> list[str]:
    """The tokens of an already normalised text (the C core's ``tokenize``)."""
    if tokenizer == "words":
        return WORDS_PATTERN.findall(text)
    out: list[str] = []
    for tok in TOKEN_PATTERN.findall(text):
        if len(tok) == 1 and not (tok.isalnum() or tok == "_"):
            if is_symbol(tok):
                out.append(tok)
        elif tok.endswith(("n't", "n’t")):
            out.append(tok[:-2])
            out.append(NOT)
        else:
            out.append(tok)
    return out


@dataclass(frozen=True)
class Analyzer:
    """Configuration of the text -> terms step.

    - ``language``: Snowball stemmer and background word list (see ``LANGUAGES``).
    - ``stemming``: reduce words to their Snowball stem ("running" -> "run"); off for a
      language without a Snowball stemmer.
    - ``prefix``: keep only the first N characters of a non-numeric term after stemming
      (0 = whole term). Truncation merges the morphological variants the stemmer leaves apart
      ("organization"/"organize"); 4 scored best on the benchmark.
    - ``stop_words``: drop the N most frequent words of the language (0 = keep all). Off by
      default: IDF already gives frequent words little weight. Negators are never dropped
      (``unicode`` tokenizer).
    - ``ngram``: largest word n-gram used as a term (1 = single words).
    - ``tokenizer``: ``unicode`` (see the module docstring) or ``words`` (runs of word
      characters only, the tokenizer before CJK, symbols and contractions were handled).
    - ``synonyms``: groups of words that count as one term: each word is analysed as above
      (so "commencing" meets "commence" after stemming) and its term replaced by the group's
      canonical term (the smallest of the group's terms). Not in ``config()``: an IDF table
      fitted without synonyms still applies; the scorer's fingerprint names them.
    """

    language: str = "english"
    stemming: bool = True
    prefix: int = 4
    stop_words: int = 0
    ngram: int = 1
    tokenizer: str = "unicode"
    synonyms: tuple[tuple[str, ...], ...] = ()

    def config(self) -> dict[str, object]:
        if self.tokenizer == "words":
            tokens = WORDS_PATTERN.pattern
        else:
            tokens = "unicode-1: " + TOKEN_PATTERN.pattern
        return {
            "language": self.language,
            "stemming": self.stemming and has_stemmer(self.language),
            "prefix": self.prefix,
            "stop_words": self.stop_words,
            "ngram": self.ngram,
            "tokens": tokens,
        }

    @functools.cached_property
    def _stemmer(self) -> Stemmer.Stemmer | None:
        if not (self.stemming and has_stemmer(self.language)):
            return None
        return Stemmer.Stemmer(LANGUAGES[self.language][0])

    @functools.cached_property
    def _stops(self) -> frozenset[str]:
        if not self.stop_words:
            return frozenset()
        stops = stop_word_set(self.language, self.stop_words)
        return stops - self.negators if self.tokenizer == "unicode" else stops

    @functools.cached_property
    def negators(self) -> frozenset[str]:
        """The negator tokens of the language (and the CJK ones), normalised."""
        if self.tokenizer != "unicode":
            return frozenset(normalize(w) for w in NEGATORS.get(self.language, ()))
        return frozenset(normalize(w) for w in NEGATORS.get(self.language, ()) + CJK_NEGATORS)

    def tokens(self, text: str) -> list[str]:
        """The normalised tokens of a text, stop words included."""
        return split_tokens(normalize(text), self.tokenizer)

    @functools.cached_property
    def synonym_terms(self) -> dict[str, str]:
        """Each synonym's term -> its group's canonical term (terms that are already canonical
        left out); groups that share a term are one group. ``InvalidOption`` for a synonym
        that is not one scorable word."""
        merged: list[set[str]] = []
        for group in self.synonyms:
            terms: set[str] = set()
            for word in group:
                tokens = self.tokens(word)
                term = self.base_term(tokens[0]) if len(tokens) == 1 else None
                if term is None:
                    raise InvalidOption(
                        f"synonym {word!r} must be one word that is not a stop word"
                    )
                terms.add(term)
            for other in [m for m in merged if m & terms]:
                terms |= other
                merged.remove(other)
            merged.append(terms)
        out: dict[str, str] = {}
        for terms in merged:
            canonical = min(terms)
            out.update((t, canonical) for t in terms if t != canonical)
        return out

    def term(self, token: str) -> str | None:
        """The term a token counts as, or None for a stop word (a synonym: its group's)."""
        term = self.base_term(token)
        if self.synonyms and term is not None:
            return self.synonym_terms.get(term, term)
        return term

    def base_term(self, token: str) -> str | None:
        """The term a token counts as before synonyms, or None for a stop word."""
        if token in self._stops:
            return None
        if token[0].isdigit():
            return token
        if len(token) == 1 and self.tokenizer == "unicode" and (is_cjk(token) or is_symbol(token)):
            return token  # a character term: no stemming, nothing to cut
        stemmer = self._stemmer
        term = stemmer.stemWord(token) if stemmer is not None else token
        return term[: self.prefix] if self.prefix else term

    def terms(self, text: str) -> list[str]:
        """The terms of a text in order, n-grams (joined by a space) after the single words."""
        words = [t for t in map(self.term, self.tokens(text)) if t is not None]
        out = list(words)
        for n in range(2, self.ngram + 1):
            out.extend(" ".join(words[i : i + n]) for i in range(len(words) - n + 1))
        return out
