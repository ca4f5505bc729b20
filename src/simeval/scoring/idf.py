"""IDF sources: the built-in background table, corpus tables fitted by the user, and ``pair``.

Every source gives a weight to a term; the weight of a term occurrence in a vector is
``tf_weight(count) * idf(term)`` (see ``simeval.scoring.scorer``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from simeval.errors import InvalidInput, InvalidType, NotFound
from simeval.scoring.analyzer import LANGUAGES, Analyzer, is_cjk, normalize

# The "document length" L of the background weighting below. Chosen on the benchmark: the
# pooled STS Pearson moves by less than 0.002 between L = 3 and L = 10, and falls off beyond.
BACKGROUND_DOC_LEN = 5.0


# Bump when the way the table is derived changes (the analyzer's source is hashed as well).
_CACHE_FORMAT = 1


def cache_dir() -> Path:
    """Where derived tables are cached: ``SIMEVAL_CACHE_DIR``, else the per-user cache dir
    (``~/.cache/simeval`` on Linux). Deleting it is always safe."""
    env = os.environ.get("SIMEVAL_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("simeval", appauthor=False))


def _derive_frequencies(analyzer: Analyzer) -> tuple[dict[str, float], float]:
    """``analyzer``: words only (no stop words, no n-grams), as ``BackgroundIdf`` builds it."""
    import wordfreq  # on first use: importing it takes ~0.1 s, and the cache avoids it

    freq = wordfreq.get_frequency_dict(LANGUAGES[analyzer.language][1], wordlist="best")
    acc: dict[str, float] = {}
    cjk = analyzer.tokenizer == "unicode"
    for word, f in freq.items():
        toks = analyzer.tokens(word)
        if len(toks) == 1:
            term = analyzer.term(toks[0])
            if term is not None and not (cjk and len(term) == 1 and is_cjk(term)):
                acc[term] = acc.get(term, 0.0) + f
    return acc, min(freq.values()) / 2


# The languages whose word lists give the frequencies of Han, kana and Hangul characters.
CJK_LISTS = ("zh", "ja", "ko")


def _derive_cjk_frequencies() -> tuple[dict[str, float], float]:
    """The frequency of each Han, kana and Hangul character: its occurrences per running word,
    summed over the Chinese, Japanese and Korean lists (a character used in two of the
    languages, like most Han characters in Chinese and Japanese, counts in both)."""
    import wordfreq

    acc: dict[str, float] = {}
    for code in CJK_LISTS:
        for word, f in wordfreq.get_frequency_dict(code, wordlist="best").items():
            for char in normalize(word):
                if is_cjk(char):
                    acc[char] = acc.get(char, 0.0) + f
    return acc, min(acc.values()) / 2


def _cache_path(analyzer: Analyzer | None) -> Path:
    """The cache file of a language's table (``analyzer``) or of the CJK table (None)."""
    from importlib.metadata import version

    from simeval.scoring import analyzer as analyzer_module

    parts: list[object] = ["cjk", ",".join(CJK_LISTS)]
    if analyzer is not None:
        parts = [analyzer.language, analyzer.stemming, analyzer.prefix, analyzer.tokenizer]
    key = hashlib.sha256(
        json.dumps(
            [
                _CACHE_FORMAT,
                *parts,
                version("wordfreq"),
                version("PyStemmer"),
                hashlib.sha256(Path(analyzer_module.__file__).read_bytes()).hexdigest(),
            ]
        ).encode()
    ).hexdigest()[:16]
    name = "cjk" if analyzer is None else analyzer.language
    return cache_dir() / f"background-{name}-{key}.json"


# The tables of the default scorer (and the CJK one), derived when the package is built and
# shipped in it (``make tables`` writes them): a first run reads them instead of deriving
# them (~3 s and 180 MB). Named as the cache files are, keys and all, so a shipped table is
# used only where it is the one the installed analyzer, wordfreq and PyStemmer would derive.
SHIPPED_TABLES = Path(__file__).with_name("tables")


def _read_table(path: Path) -> tuple[dict[str, float], float] | None:
    """A table file (JSON, or gzipped JSON for a ``.gz`` name); None when it cannot be read."""
    try:
        if path.suffix == ".gz":
            import gzip

            data = json.loads(gzip.decompress(path.read_bytes()))
        else:
            data = json.loads(path.read_text(encoding="utf-8"))
        freq, floor = data["freq"], data["floor"]
    except (OSError, ValueError, KeyError, TypeError, EOFError):
        return None
    if isinstance(freq, dict) and isinstance(floor, float) and freq:
        return freq, floor
    return None


@functools.lru_cache(maxsize=16)
def _background_frequencies(analyzer: Analyzer | None) -> tuple[dict[str, float], float]:
    """The term frequencies of the background table: shipped in the package for the default
    scorer, else derived from wordfreq's list once (a few seconds) and then read back from a
    cache file keyed by everything that shapes them (the analyzer's settings and source, the
    wordfreq and PyStemmer versions). JSON keeps floats exact, so a shipped or cached table
    gives bit-identical scores. A cache that cannot be read or written is ignored: the table
    is derived again. ``None``: the CJK character table."""
    path = _cache_path(analyzer)
    for known in (SHIPPED_TABLES / f"{path.name}.gz", path):
        table = _read_table(known)
        if table is not None:
            return table
    freq, floor = _derive_cjk_frequencies() if analyzer is None else _derive_frequencies(analyzer)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"floor": floor, "freq": freq}), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home or full disk: scoring works, only slower to start
    return freq, floor


def ship_background_tables(folder: Path = SHIPPED_TABLES) -> list[Path]:
    """Derive the default scorer's background table and the CJK one into ``folder`` (gzipped,
    named by their cache keys), removing the tables of other keys; returns the files written.
    ``make tables`` runs it: again whenever ``analyzer.py``, wordfreq or PyStemmer change
    (``tests/scoring/test_shipped_tables.py`` fails until then)."""
    import gzip

    from simeval.scoring.options import DEFAULTS

    language, stemming, prefix = DEFAULTS["language"], DEFAULTS["stemming"], DEFAULTS["prefix"]
    default = Analyzer(language, stemming, prefix, tokenizer=DEFAULTS["tokenizer"])
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("background-*.json.gz"):
        old.unlink()
    written = []
    for analyzer in (default, None):
        freq, floor = (
            _derive_cjk_frequencies() if analyzer is None else _derive_frequencies(analyzer)
        )
        out = folder / f"{_cache_path(analyzer).name}.gz"
        body = json.dumps({"floor": floor, "freq": freq}, sort_keys=True).encode("utf-8")
        # mtime 0: the same table gives the same bytes (no change for git to see)
        out.write_bytes(gzip.compress(body, compresslevel=9, mtime=0))
        written.append(out)
    return written


class BackgroundIdf:
    """Term weights from the word frequencies of the ``wordfreq`` package (read at run time).

    The frequency ``f(t)`` of a term is the summed frequency (share of all running words) of
    every listed word the analyzer maps to that term ("run", "runs", "running" -> "run"). A
    frequency becomes a weight as the IDF of a document of ``L`` words that contains the term
    with probability about ``L * f(t)``::

        idf(t) = ln(1 + 1 / (L * f(t)))        L = BACKGROUND_DOC_LEN = 5

    so very common words weigh little ("the": 1.55) and specific ones a lot ("capital": 7.2).
    A term not in the list (a name, a code, a typo) gets the frequency of half the
    rarest listed word, i.e. the highest weight: it is at least as specific as anything known.
    Multi-word terms (n-grams) get the mean weight of their words.

    A Han, kana or Hangul character (``unicode`` tokenizer) takes its frequency from one table
    for the three languages, whatever the ``language``: its occurrences per running word in
    wordfreq's Chinese, Japanese and Korean lists, summed ("的": 2.0, "首": 6.8), with the same
    rule for a character none of them has.
    """

    name = "background"

    def __init__(self, analyzer: Analyzer):
        self.analyzer = analyzer
        self._freq, self._floor = _background_frequencies(
            Analyzer(
                analyzer.language, analyzer.stemming, analyzer.prefix, tokenizer=analyzer.tokenizer
            )
        )
        self._cjk = analyzer.tokenizer == "unicode"
        if self._cjk:
            self._cjk_freq, self._cjk_floor = _background_frequencies(None)
        from importlib.metadata import version

        self.version = f"wordfreq-{version('wordfreq')}-L{BACKGROUND_DOC_LEN:g}"
        if self._cjk:
            self.version += "-cjk"

    def idf(self, term: str) -> float:
        if " " in term:
            parts = term.split(" ")
            return sum(self.idf(p) for p in parts) / len(parts)
        if self._cjk and len(term) == 1 and is_cjk(term):
            f = self._cjk_freq.get(term, self._cjk_floor)
        else:
            f = self._freq.get(term, self._floor)
        return math.log(1.0 + 1.0 / (BACKGROUND_DOC_LEN * f))

    def identity(self) -> dict[str, object]:
        return {"idf": self.name, "idf_version": self.version}


class PairIdf:
    """The naive baseline: IDF from the two compared texts alone.

    scikit-learn's smoothed formula with n = 2 documents: ``ln((1 + 2) / (1 + df)) + 1``, so a
    term in both texts weighs 1.0 and a term in one of them 1.405. Kept for comparison only.
    """

    name = "pair"
    version = "sklearn-smooth"

    def idf(self, term: str) -> float:
        return 1.0  # not used: pair weights come from the two texts (see _vector.py)

    def identity(self) -> dict[str, object]:
        return {"idf": self.name, "idf_version": self.version}


@dataclass
class IdfTable:
    """A corpus IDF table fitted on the user's own texts (``fit_idf``), saved as JSON.

    ``idf(t) = ln((1 + n) / (1 + df(t))) + 1`` (scikit-learn's smoothed IDF) over ``n``
    documents; an unseen term gets ``df = 0``, the highest weight. ``version`` is a hash of the
    table's content, so results scored with different tables are never mixed up.
    """

    analyzer: dict[str, object]
    n_docs: int
    df: dict[str, int]
    version: str = field(default="")
    name = "corpus"

    def __post_init__(self) -> None:
        digest = hashlib.sha256(
            json.dumps([self.analyzer, self.n_docs, self.df], sort_keys=True).encode()
        ).hexdigest()[:12]
        if self.version and self.version != digest:
            raise InvalidInput(f"IDF table is corrupt: version {self.version} != content {digest}")
        self.version = digest

    def idf(self, term: str) -> float:
        return math.log((1 + self.n_docs) / (1 + self.df.get(term, 0))) + 1.0

    def identity(self) -> dict[str, object]:
        return {"idf": self.name, "idf_version": self.version}

    def __hash__(self) -> int:
        return hash(self.version)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IdfTable) and other.version == self.version

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the table as JSON (atomically: a temporary file, then a rename)."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        doc = {
            "format": "simeval-idf",
            "format_version": 1,
            "version": self.version,
            "analyzer": self.analyzer,
            "n_docs": self.n_docs,
            "df": self.df,
        }
        tmp.write_text(json.dumps(doc, ensure_ascii=False, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> IdfTable:
        """Read a table written by ``save``; the content must match its version hash."""
        resolved = Path(path).resolve()
        try:
            mtime = resolved.stat().st_mtime_ns
        except FileNotFoundError:
            raise NotFound(f"IDF table file not found: {path}") from None
        return _load_table(str(resolved), mtime)


@functools.lru_cache(maxsize=8)
def _load_table(path: str, mtime: int) -> IdfTable:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NotFound(f"IDF table file not found: {path}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"{path} is not an IDF table (invalid JSON: {exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != "simeval-idf":
        raise InvalidInput(f"{path} is not a simeval IDF table")
    analyzer, n_docs, df = doc.get("analyzer"), doc.get("n_docs"), doc.get("df")
    if not isinstance(analyzer, dict) or not isinstance(n_docs, int) or not isinstance(df, dict):
        raise InvalidInput("IDF table is missing 'analyzer', 'n_docs' or 'df'")
    return IdfTable(analyzer, n_docs, df, str(doc.get("version", "")))


def fit_idf(texts: Iterable[str], **options: object) -> IdfTable:
    """Fit a corpus IDF table on your own texts (e.g. all reference answers).

    The analyzer options (``language``, ``stemming``, ``prefix``, ``stop_words``, ``ngram``)
    must be those you will score with; the table records them and the scorer checks.

    >>> table = fit_idf(["The cat sat.", "The dog ran."])
    >>> table.n_docs
    2
    """
    from simeval.scoring.options import analyzer_from_options

    analyzer = analyzer_from_options(options)
    df: Counter[str] = Counter()
    n = 0
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InvalidType(f"text {i} is {type(text).__name__}, not a string")
        n += 1
        df.update(set(analyzer.terms(text)))
    if n == 0:
        raise InvalidInput("cannot fit an IDF table on no texts")
    return IdfTable(analyzer.config(), n, dict(df))


__all__ = ["BackgroundIdf", "IdfTable", "PairIdf", "fit_idf"]
