"""Scorer options checked by building the scorer (``check_options``): what the service
stores with an eval is valid, canonical, and has its fingerprint. The checks that need no
scorer (texts, names, times, capture payloads, ids, paging) are in ``simeval.checks``."""

from __future__ import annotations

from pathlib import Path

from simeval.errors import InvalidOption
from simeval.jsontypes import JSONObject
from simeval.scoring.options import required_words, synonym_groups
from simeval.scoring.required import required_of
from simeval.scoring.scorer import get_scorer


def check_options(options: object) -> tuple[JSONObject, str]:
    """Validated scorer options (as given, None values dropped) and their fingerprint.

    >>> check_options({"stemming": True, "ngram": None})[0]
    {'stemming': True}
    """
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise InvalidOption(f"scorer options must be a mapping, not {type(options).__name__}")
    opts = {k: v for k, v in options.items() if v is not None}
    # the two list options, stored in their canonical form (lists, for JSON); none: left out
    if "synonyms" in opts:
        opts["synonyms"] = [list(g) for g in synonym_groups(opts["synonyms"])]
    if "required" in opts:
        opts["required"] = list(required_words(opts["required"]))
    # an empty list of words is none; for another option it is no plain value (refused below)
    opts = {k: v for k, v in opts.items() if not (k in ("synonyms", "required") and v == [])}
    for key, value in opts.items():
        if key in ("synonyms", "required"):
            continue
        if not isinstance(value, str | int | float | bool):
            raise InvalidOption(f"scorer option {key!r} must be a plain value, not {value!r}")
    idf = opts.get("idf")
    if isinstance(idf, str) and idf not in ("background", "pair") and idf.strip():
        # a corpus table file: store where it is, so captures from another directory find it
        opts["idf"] = str(Path(idf).expanduser().resolve())
    scorer = get_scorer(**opts)
    required_of(scorer)  # a required term without a scorable word is refused here
    return opts, scorer.fingerprint
