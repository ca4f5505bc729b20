"""An explanation as the pages show it: the output and the reference with matched (green) and
missing (red) terms marked, for an eval's test and a result's page."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from markupsafe import Markup, escape

from simeval.errors import SimevalError
from simeval.jsontypes import JSONObject
from simeval.scoring.analyzer import TOKEN_PATTERN, Analyzer, normalize
from simeval.scoring.options import analyzer_from_options

HIGHLIGHT_CHARS = 20_000  # of a long output, the part highlighted and shown by default


def _analyzer(options: JSONObject) -> Analyzer | None:
    try:
        return analyzer_from_options(options)
    except (SimevalError, OSError):
        return None


def _keys(analyzer: Analyzer, terms: Iterable[Mapping[str, object]]) -> set[str]:
    keys: set[str] = set()
    for item in terms:
        for token in str(item.get("term", "")).split():
            term = analyzer.term(token)
            if term:
                keys.add(term)
    return keys


def highlight(
    text: str, marks: Sequence[tuple[set[str], str]], analyzer: Analyzer | None
) -> Markup:
    """``text`` escaped, with the words whose term is in a set wrapped in ``<mark class=...>``."""
    if analyzer is None or not any(keys for keys, _ in marks):
        return escape(text)
    out: list[Markup] = []
    pos = 0
    for match in TOKEN_PATTERN.finditer(text):
        token = normalize(match.group())
        term = analyzer.term(token) if token else None
        for keys, cls in marks:
            if term in keys:
                out.append(escape(text[pos : match.start()]))
                out.append(Markup('<mark class="{}">{}</mark>').format(cls, match.group()))
                pos = match.end()
                break
    out.append(escape(text[pos:]))
    return Markup("").join(out)


def explained(
    explanation: dict[str, Any] | None,
    output: str,
    reference: str | None,
    options: JSONObject,
    full: bool = False,
) -> dict[str, object]:
    """The output and reference with matched (green) and missing (red) terms highlighted.

    Of a long output only the first ``HIGHLIGHT_CHARS`` are highlighted and shown unless
    ``full``; then the whole text is shown, highlighted no further than that: a 1 MB output
    would otherwise make a page of several megabytes of marks."""
    explanation = explanation or {}
    cut = len(output) > HIGHLIGHT_CHARS
    head, rest = (output[:HIGHLIGHT_CHARS], output[HIGHLIGHT_CHARS:]) if cut else (output, "")
    analyzer = _analyzer(options)
    shared = _keys(analyzer, explanation.get("shared", [])) if analyzer else set()
    missing = _keys(analyzer, explanation.get("missing", [])) if analyzer else set()
    ref = reference if reference is not None else explanation.get("reference", "")
    shown = highlight(head, [(shared, "hit")], analyzer)
    if cut and full:
        shown = shown + escape(rest)
    return {
        "output": shown,
        "output_cut": cut and not full,
        "output_chars": len(output),
        "reference": highlight(ref or "", [(shared, "hit"), (missing, "miss")], analyzer),
        "shared": explanation.get("shared", []),
        "missing": explanation.get("missing", []),
        "extra": explanation.get("extra", []),
        "reason": explanation.get("reason"),
        "veto": explanation.get("veto"),
        "coverage": explanation.get("coverage"),
        "missing_required": explanation.get("missing_required") or [],
        # both numbers under the bands scale (a stored explanation from before it has neither)
        "cosine": (
            explanation.get("cosine") if explanation.get("scale") in ("bands", "bands-1") else None
        ),
        "score": explanation.get("score"),
    }
