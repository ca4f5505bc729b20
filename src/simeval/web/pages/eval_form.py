"""The similarity eval's definition form: reading it (name, references, threshold, scope, the
advanced scorer options) and the values it is filled with (blank, from an eval, or as the user
sent it after an error)."""

from __future__ import annotations

from typing import Any, TypedDict

from starlette.datastructures import FormData

from simeval.errors import InvalidOption
from simeval.jsontypes import JSONObject, JSONValue
from simeval.scoring.analyzer import LANGUAGES
from simeval.scoring.options import (
    DEFAULT_THRESHOLD,
    DEFAULTS,
    OPTION_HELP,
    band,
    check_threshold,
    required_words,
    synonym_groups,
)
from simeval.service.models import EvalOut
from simeval.web.pages._render import form_text


class Definition(TypedDict):
    """The eval the form defines (``definition``)."""

    name: str
    references: list[str]
    threshold: float
    input_scope: str | None
    options: JSONObject | None


class FormValues(TypedDict):
    """What the definition form is filled with (``form_values``): texts as shown."""

    required: str
    synonyms: str
    name: str
    references: list[str]
    threshold: str
    input_scope: str
    options: dict[str, object]


def _int_option(form: FormData, key: str) -> int:
    raw = form_text(form, key).strip()
    try:
        return int(raw)
    except ValueError:
        raise InvalidOption(f"option {key!r} must be a whole number, not {raw!r}") from None


def _options(form: FormData) -> JSONObject | None:
    """Scorer options from the form's advanced section (only those that differ from defaults)."""
    if form_text(form, "advanced") != "1":
        return None
    given: JSONObject = {
        "language": form_text(form, "language") or DEFAULTS["language"],
        "stemming": form.get("stemming") is not None,
        "prefix": _int_option(form, "prefix"),
        "stop_words": _int_option(form, "stop_words"),
        "ngram": _int_option(form, "ngram"),
        "sublinear_tf": form.get("sublinear_tf") is not None,
        "idf": form_text(form, "idf").strip() or DEFAULTS["idf"],
    }
    out = {k: v for k, v in given.items() if v != DEFAULTS[k]}
    # required terms: comma-separated; synonyms: one group per line, its words by commas
    required = required_words(form_text(form, "required"))
    if required:
        out["required"] = list[JSONValue](required)
    lines = [line for line in form_text(form, "synonyms").splitlines() if line.strip()]
    if lines:
        out["synonyms"] = [list[JSONValue](g) for g in synonym_groups(lines)]
    return out


def terms_text(options: dict[str, Any]) -> tuple[str, str]:
    """An eval's required terms and synonym groups as the form shows them."""
    required = ", ".join(options.get("required") or ())
    synonyms = "\n".join(", ".join(g) for g in options.get("synonyms") or ())
    return required, synonyms


def definition(form: FormData) -> Definition:
    """The eval the form defines: name, references, threshold, input scope, options (checked;
    a bad threshold or option raises ``InvalidOption``)."""
    refs = [r for r in form.getlist("references") if isinstance(r, str) and r.strip()]
    return {
        "name": form_text(form, "name").strip(),
        "references": refs,
        "threshold": check_threshold(form_text(form, "threshold").strip()),
        "input_scope": form_text(form, "input_scope").strip() or None,
        "options": _options(form),
    }


def form_values(form: FormData | None, ev: EvalOut | None = None) -> FormValues:
    """Values to refill the definition form with (after an error, or from the eval)."""
    if form is not None:
        return _sent_values(form)
    if ev is not None:
        required, synonyms = terms_text(ev.options)
        return {
            "required": required,
            "synonyms": synonyms,
            "name": ev.name,
            "references": list(ev.references) or [""],
            "threshold": f"{ev.threshold:.2f}",
            "input_scope": ev.input_scope or "",
            "options": {**DEFAULTS, **{k: v for k, v in ev.options.items() if v is not None}},
        }
    return {
        "required": "",
        "synonyms": "",
        "name": "",
        "references": [""],
        "threshold": f"{DEFAULT_THRESHOLD:.2f}",
        "input_scope": "",
        "options": dict(DEFAULTS),
    }


def _sent_values(form: FormData) -> FormValues:
    # as the user typed them, unchecked: the form is shown again with its error
    options: dict[str, object] = dict(DEFAULTS)
    if form_text(form, "advanced") == "1":
        options.update(
            language=form_text(form, "language") or DEFAULTS["language"],
            stemming=form.get("stemming") is not None,
            prefix=form_text(form, "prefix"),
            stop_words=form_text(form, "stop_words"),
            ngram=form_text(form, "ngram"),
            sublinear_tf=form.get("sublinear_tf") is not None,
            idf=form_text(form, "idf") or DEFAULTS["idf"],
        )
    refs = [r for r in form.getlist("references") if isinstance(r, str)]
    return {
        "required": form_text(form, "required"),
        "synonyms": form_text(form, "synonyms"),
        "name": form_text(form, "name"),
        "references": [r for r in refs if r.strip()] or [""],
        "threshold": form_text(form, "threshold") or f"{DEFAULT_THRESHOLD:.2f}",
        "input_scope": form_text(form, "input_scope"),
        "options": options,
    }


def form_context(values: FormValues) -> dict[str, object]:
    """The template context of the definition form filled with ``values``."""
    return {
        "values": values,
        "languages": sorted(LANGUAGES),
        "option_help": OPTION_HELP,
        "band_now": band(_safe_float(values["threshold"], DEFAULT_THRESHOLD)),
    }


def _safe_float(value: str, default: float) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return default
    return out if 0.0 <= out <= 1.0 else default
