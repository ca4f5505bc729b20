"""What the API declares in the OpenAPI schema: the base of every body, the strict number and
boolean types, the bounds and patterns of what the service checks itself (so that what the
schema calls valid is accepted, and what it calls invalid refused), integers in query and path
values as digits, and the links from an answer's ids to the operations taking them.

The service is the one place that checks a value (``simeval.checks``); these declarations
say the same limits in the schema, so that a client (or a fuzzer) reading it knows what is
refused: ``bounds`` adds JSON Schema keywords without a second check, whose error would
differ from the service's.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any

from fastapi import FastAPI, Query
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, WithJsonSchema
from pydantic.json_schema import GetJsonSchemaHandler, JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError
from typing_extensions import TypeAliasType

from simeval.checks import MAX_KEY_CHARS, MAX_NAME_CHARS, MAX_TEXT_CHARS, URL_PATTERN
from simeval.jsontypes import JSONObject, JSONValue
from simeval.scoring.analyzer import LANGUAGES, TOKENIZERS
from simeval.scoring.options import SCALES


class Body(BaseModel):
    """A request body: a key it does not know is refused (422)."""

    model_config = ConfigDict(extra="forbid")


# a value of another JSON type is refused (422) as the schema says, not coerced ("0.8" for a
# number, 1 for true); integers stay lax, as JSON Schema's integer holds 42.0
StrictFloat = Annotated[float, Field(strict=True)]
StrictBool = Annotated[bool, Field(strict=True)]


def _a_json_integer(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError("Input should be a valid integer, not a boolean")
    if isinstance(value, str):  # pydantic would read "42" (and " 42", "4_2") as 42
        raise ValueError("Input should be a valid integer, not a string")
    return value


Integer = Annotated[int, BeforeValidator(_a_json_integer)]
"""An integer in a JSON body as JSON Schema's: 42 or 42.0, not ``true`` (which pydantic would
take as 1) nor ``"42"``."""


def bounded_integer(minimum: int, maximum: int) -> object:
    """``Integer`` from ``minimum`` to ``maximum``, the bounds stated in the schema (given
    after ``Integer``'s validator, pydantic would write them as its own ``ge``/``le``)."""
    return Annotated[int, Field(ge=minimum, le=maximum), BeforeValidator(_a_json_integer)]


_DIGITS = re.compile(r"-?[0-9]+")


def _digits(value: object) -> object:
    # pydantic's int parsing of text also takes surrounding whitespace (Unicode's too: NEL,
    # U+3000), "+2", "2_0" and "2.0": a query or path integer is decimal digits as written
    if isinstance(value, str) and not _DIGITS.fullmatch(value):
        # pydantic's own error for text that is no integer (no "Value error, " before it)
        raise PydanticCustomError(
            "int_parsing", "Input should be a valid integer, unable to parse string as an integer"
        )
    return value


DIGITS = BeforeValidator(_digits)
"""For an integer in a query or a path (the API's and the studio's): digits, an optional minus
and nothing else, so ``run_id=2%C2%85`` is a 422 as the schema's ``integer`` says. After the
``Query``/``Path`` in ``Annotated`` (before it, FastAPI writes its bounds as ``ge``/``le``
instead of ``minimum``/``maximum``): ``Annotated[int, Query(ge=1), DIGITS]``."""
IntParam = Annotated[int, DIGITS]
"""``DIGITS`` on an integer without bounds (a studio page number)."""


def as_list(value: object) -> object:
    """One string as a list of one (the short form of ``references``)."""
    return [value] if isinstance(value, str) else value


def bounds(**limits: JSONValue) -> JSONObject:
    """JSON Schema keywords for a bound the service checks itself (with its own 400 naming
    the value), so that the schema declares every limit the code enforces."""
    return {key: value for key, value in limits.items() if value is not None}


# PostgreSQL's text holds no NUL: every text the store keeps declares so (lone surrogates, not
# Unicode text, are refused too; JSON Schema's strings are Unicode text already)
NO_NUL = "^[^\\x00]*$"
# what Python's str.strip takes away: its whitespace, "\x1c"-"\x1f" among it, not U+FEFF (which
# a JSON Schema "\s" holds, and which no name may hold)
PY_SPACE = "[\\t-\\r\\x1c-\\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
# text with something besides what str.strip takes away, and no NUL (JSON Schema's "\s" is
# not Python's: it holds U+FEFF, which strip keeps, and not U+0085, which strip takes)
NOT_BLANK = "^[^\\x00]*[^\\x00" + PY_SPACE[1:-1] + "][^\\x00]*$"
# a reference answer: not blank either
_ANSWER = {"type": "string", "maxLength": MAX_TEXT_CHARS, "pattern": NOT_BLANK}
# references: a list of answers, or one answer as a string (declared: the schema says so)
References = Annotated[
    list[str],
    WithJsonSchema(
        {
            "anyOf": [{"type": "array", "items": _ANSWER, "minItems": 1}, _ANSWER],
            "description": "One or more reference answers (a single string is one answer).",
        }
    ),
]
UNIT = bounds(minimum=0, maximum=1)  # a score or a threshold
# an eval's name (``check_name``): letters, digits, '-', '_', '.' and spaces once the
# whitespace around it is stripped, not only dots (a space between dots is not only dots)
_NAME_CHAR = r"[\p{L}\p{N}_. -]"
NAME = bounds(
    minLength=1,
    maxLength=MAX_NAME_CHARS,
    pattern=(
        rf"^{PY_SPACE}*(?:{_NAME_CHAR}*[\p{{L}}\p{{N}}_-]{_NAME_CHAR}*|\.[. ]* [. ]*\.)"
        rf"{PY_SPACE}*$"
    ),
)
LONG = bounds(maxLength=MAX_TEXT_CHARS, pattern=NO_NUL)  # an input, an output, a scope
SHORT = bounds(maxLength=200, pattern=NO_NUL)  # a reviewer's name
# a conversation id (``check_capture``): no '.' or '..' between slashes, which no URL can name
_SEGMENT = r"(?:[^/.\x00][^/\x00]*|\.[^/.\x00][^/\x00]*|\.\.[^/\x00]+)?"
CONVERSATION = bounds(maxLength=200, pattern=rf"^{_SEGMENT}(?:/{_SEGMENT})*$")
# the scores-out URL as service.settings.check_otlp_url takes it (``checks.URL_PATTERN`` once
# str.strip took the whitespace around it), or blank: none
OTLP_URL = f"^{PY_SPACE}*(?:{URL_PATTERN})?{PY_SPACE}*$"
NOTE = bounds(maxLength=10_000, pattern=NO_NUL)  # a reviewer's note
# a capture key (``check_capture_key``): 1-200 characters, no control character, not blank
_KEY_CHAR = r"[^\x00-\x1f\x7f-\x9f]"
KEY = bounds(
    minLength=1,
    maxLength=MAX_KEY_CHARS,
    pattern=rf"^{_KEY_CHAR}*[^\s\x00-\x1f\x7f-\x9f]{_KEY_CHAR}*$",
)


# -- times: ``simeval.checks.parse_time`` ---------------------------------------------------------
# a time is taken with its year as written between 1000 and 8999 (``TIME_RANGE``)
_YEAR = "^[1-8][0-9]{3}-"
DATE_TIME: JSONObject = {"type": "string", "format": "date-time", "pattern": _YEAR}
# an age back from now, within the same calendar: up to 9,999,999 minutes (19 years), 999,999
# hours, 99,999 days or 9,999 weeks
_AGE = "^({})$".format(
    "|".join(
        f"[0-9]{{1,{n}}}(\\.[0-9]+)?[{unit}]"
        for n, unit in ((7, "mM"), (6, "hH"), (5, "dD"), (4, "wW"))
    )
)
_WHEN: list[JSONValue] = [
    DATE_TIME,
    {"type": "string", "format": "date", "pattern": _YEAR},
    {"type": "string", "pattern": _AGE},
    {"type": "string", "maxLength": 0},  # empty: no bound, as left out
]
WHEN: JSONObject = {"anyOf": _WHEN}
"""A time filter: an RFC 3339 time, a date or an age such as ``7d``."""
WHEN_OR_NULL: JSONObject = {"anyOf": [*_WHEN, {"type": "null"}]}

# -- query filters: ``simeval.service.filters.parse_meta``, ``compare.parse_side`` -----------------
# KEY=VALUE or KEY:VALUE, split at the first '=' or ':' after the first character; a key not blank
META = {
    "anyOf": [
        {
            "type": "array",
            "items": {"type": "string", "pattern": "^([^=:]*[^=:\\s][^=:]*[=:]|=[^:]*:|:[^=]*=)"},
        },
        {"type": "null"},
    ]
}
# run:ID, run:latest, captures or captures:KEY=VALUE,... (eval=, since=, until= among them)
_PART = "\\s*[^,=\\s][^,=]*=[^,]*"
SIDE = {
    "type": "string",
    "pattern": (
        "^\\s*([Rr][Uu][Nn]:\\s*([0-9]+|latest)|[Cc][Aa][Pp][Tt][Uu][Rr][Ee][Ss]"
        f"(:(\\s*|{_PART})(,(\\s*|{_PART}))*)?)\\s*$"
    ),
}

# -- JSON values: ``simeval.checks.check_json_value`` ---------------------------------------------
_Text = Annotated[str, WithJsonSchema({"type": "string", "pattern": NO_NUL})]
# mypy cannot follow a recursive TypeAliasType made at run time; pydantic can
JsonValue = TypeAliasType(  # type: ignore[misc]
    "JsonValue",
    _Text | int | float | bool | list["JsonValue"] | dict[str, "JsonValue"] | None,  # type: ignore[misc]
)
"""A JSON value as the schema declares it (for ``Metadata``'s schema, not to validate)."""
_JSON_CORE = TypeAdapter[object](JsonValue).core_schema


class _JsonObject:
    """The JSON Schema of a JSON object the store keeps (metadata): texts without NUL, keys
    too (at most 32 levels deep: the service's own check, which JSON Schema cannot say)."""

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        value = handler(_JSON_CORE)  # a reference to the JsonValue component
        for alternative in handler.resolve_ref_schema(value).get("anyOf", []):
            if alternative.get("type") == "object":
                alternative["propertyNames"] = {"pattern": NO_NUL}
        return {
            "type": "object",
            "propertyNames": {"pattern": NO_NUL},
            "additionalProperties": value,
            "description": "Any JSON object: texts and keys without NUL, nested at most 32 levels.",
        }


# validated as any value (a JSON body holds JSON), and so typed for the service to take
# as its JSON
Metadata = Annotated[dict[str, Any], _JsonObject()]

# -- scorer options: ``simeval.scoring.options.resolve_options`` ---------------------------------
# a term holds a scorable word (a letter or a digit). A synonym is one word of letters and
# digits (``synonym_groups``), the whitespace around it aside; that it is no stop word and one
# token depends on the options (the tokenizer, ``stop_words``): a 400 names it.
TERM = {"type": "string", "pattern": f"^({PY_SPACE}*|[^\\x00]*[\\p{{L}}\\p{{N}}][^\\x00]*)$"}
TERMS = {"anyOf": [{"type": "array", "items": TERM}, {"type": "null"}]}
# in the options, the terms may also be one comma-separated string
_TERM_TEXT = f"({PY_SPACE}*|[^,\\x00]*[\\p{{L}}\\p{{N}}][^,\\x00]*)"
_TERMS_TEXT = {"type": "string", "pattern": f"^{_TERM_TEXT}(,{_TERM_TEXT})*$"}
_SYNONYM = {"type": "string", "pattern": f"^{PY_SPACE}*[\\p{{L}}\\p{{N}}]+{PY_SPACE}*$"}
# a whole number among them is its digits (YAML reads "9" in [nine, 9] as a number)
_GROUP = {
    "type": "array",
    "items": {"anyOf": [_SYNONYM, {"type": "integer", "minimum": 0}]},
    "minItems": 2,
    "uniqueItems": True,
}
GROUPS = {"anyOf": [{"type": "array", "items": _GROUP}, {"type": "null"}]}


def _maybe(schema: JSONObject) -> JSONObject:
    return {"anyOf": [schema, {"type": "null"}]}  # null: the default


OPTIONS = {
    "type": "object",
    "additionalProperties": False,
    "description": 'Scorer options (docs/scores.md "Options"); null or left out: the default.',
    "properties": {
        "language": _maybe({"enum": [*sorted(LANGUAGES)]}),
        "stemming": _maybe({"type": "boolean"}),
        "prefix": _maybe({"type": "integer", "minimum": 0, "maximum": 64}),
        "stop_words": _maybe(
            {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 5000}, {"type": "boolean"}]}
        ),
        "ngram": _maybe({"type": "integer", "minimum": 1, "maximum": 3}),
        "sublinear_tf": _maybe({"type": "boolean"}),
        # or the name of a corpus table in the server's IDF directory
        "idf": _maybe({"enum": ["background", "pair"]}),
        "tokenizer": _maybe({"enum": list(TOKENIZERS)}),
        "input_weight": _maybe({"type": "number", "minimum": 0, "maximum": 1}),
        "negation": _maybe({"type": "number", "minimum": 0, "maximum": 1}),
        "scale": _maybe({"enum": list(SCALES)}),
        "answer": _maybe({"type": "boolean"}),
        "contradiction": _maybe({"type": "boolean"}),
        "synonyms": GROUPS,
        # a number among them is its digits (YAML reads "9" in [nine, 9] as a number)
        "required": {
            "anyOf": [
                {"type": "array", "items": {"anyOf": [TERM, {"type": "number"}]}},
                {"type": "null"},
                _TERMS_TEXT,
            ]
        },
    },
}

ScorerOptions = Annotated[dict[str, Any], WithJsonSchema(OPTIONS)]
Terms = Annotated[list[str] | None, WithJsonSchema(TERMS)]
Groups = Annotated[list[list[str | Integer]] | None, WithJsonSchema(GROUPS)]


def _iso_text(value: object) -> object:
    """A JSON body's time as its schema has it: text starting with a four-digit year (pydantic
    would read ``"1"`` or ``1`` as seconds since 1970)."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not re.match(_YEAR, value):
        raise PydanticCustomError(
            "datetime_from_date_parsing",
            "Input should be an ISO 8601 date/time with a year from 1000 to 8999",
        )
    return value


Timestamp = Annotated[datetime, BeforeValidator(_iso_text), WithJsonSchema(DATE_TIME)]


def when(description: str) -> Any:
    """A query parameter holding a time filter (``WHEN``)."""
    return Query(description=description, json_schema_extra=WHEN_OR_NULL)


def text() -> Any:
    """A query parameter holding text compared with stored text (no NUL: ``NO_NUL``)."""
    return Query(json_schema_extra={"pattern": NO_NUL})


def meta(description: str) -> Any:
    """A query parameter holding metadata filters (``META``)."""
    return Query(description=description, json_schema_extra=META)


def side(description: str) -> Any:
    """A query parameter holding a compare side (``SIDE``)."""
    return Query(description=description, json_schema_extra=SIDE)


# -- links: how one answer's ids reach the next request (OpenAPI links, for a client or a
# stateful fuzzer: the ids are declared, not guessed from field names) -----------------------
_EVAL_OPS = (
    ("get", "/api/evals/{name}"),
    ("patch", "/api/evals/{name}"),
    ("delete", "/api/evals/{name}"),
    ("get", "/api/evals/{name}/versions"),
    ("post", "/api/evals/{name}/test"),
    ("post", "/api/evals/{name}/activate"),
    ("post", "/api/evals/{name}/deactivate"),
    ("post", "/api/evals/{name}/archive"),
    ("get", "/api/evals/{name}/trend"),
    ("post", "/api/evals/{name}/backtest"),
)
_CAPTURE = (("get", "/api/captures/{capture_id}"),)
_RESULT = (("get", "/api/results/{result_id}"), ("post", "/api/results/{result_id}/review"))
_RUN = (("get", "/api/runs/{run_id}"), ("delete", "/api/runs/{run_id}"))
_CONVERSATION = (("get", "/api/conversations/{conversation_id}"),)
# (method, path) answering with an id -> (the operations taking it, parameter, where it is)
LINKS: dict[tuple[str, str], tuple[tuple[tuple[str, str], ...], str, str]] = {
    ("post", "/api/capture"): (_CAPTURE, "capture_id", "$response.body#/id"),
    ("post", "/api/captures/batch"): (_CAPTURE, "capture_id", "$response.body#/captures/0/id"),
    ("get", "/api/captures"): (_CAPTURE, "capture_id", "$response.body#/captures/0/id"),
    ("post", "/api/evals"): (_EVAL_OPS, "name", "$response.body#/name"),
    ("get", "/api/evals"): (_EVAL_OPS, "name", "$response.body#/0/name"),
    ("get", "/api/results"): (_RESULT, "result_id", "$response.body#/results/0/id"),
    ("get", "/api/runs"): (_RUN, "run_id", "$response.body#/runs/0/id"),
    ("get", "/api/conversations"): (
        _CONVERSATION,
        "conversation_id",
        "$response.body#/conversations/0/id",
    ),
}


def add_links(doc: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI document ``doc`` with ``LINKS`` on the success answers of its operations
    (an operation it does not hold is left out)."""
    paths = doc.get("paths", {})
    for (method, path), (targets, parameter, where) in LINKS.items():
        source = paths.get(path, {}).get(method)
        if source is None:
            continue
        links = {
            op["operationId"]: {
                "operationId": op["operationId"],
                "parameters": {parameter: where},
            }
            for op in (paths.get(p, {}).get(m) for m, p in targets)
            if op is not None and "operationId" in op
        }
        for status, answer in source["responses"].items():
            if status.startswith("2"):
                answer["links"] = links
    return doc


def with_links(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """``app.openapi`` (FastAPI's, cached) with ``add_links`` applied once."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            add_links(generate())
        schema = app.openapi_schema
        assert schema is not None  # FastAPI's generate() keeps what it made
        return schema

    return openapi


class ErrorOut(BaseModel):
    """Every error: one line naming the problem (``details`` for a malformed body: 422)."""

    error: str
    details: list[dict[str, object]] | None = None


def _error(description: str) -> dict[str, object]:
    return {"model": ErrorOut, "description": description}


# documented on every route (the OpenAPI schema says what a client may get back)
ERRORS: dict[int | str, dict[str, object]] = {
    400: _error("Bad input: a value out of range, a bad option, a bad file"),
    404: _error("No such eval, result or run"),
    409: _error("Contradicts what is stored (a duplicate name, an activation not allowed)"),
    413: _error("Request body over the server's limit"),
    422: _error("Malformed request, or text the store cannot hold (lone surrogate, NUL, NaN)"),
    503: _error("The database is busy or unreachable (see Retry-After), damaged or read-only"),
}
