"""What the API's request bodies declare in the OpenAPI schema: the base of every body, the
strict number and boolean types, and the bounds the service checks itself.

The service is the one place that checks a value (``simeval.checks``); these declarations
say the same limits in the schema, so that a client (or a fuzzer) reading it knows what is
refused: ``bounds`` adds JSON Schema keywords without a second check, whose error would
differ from the service's.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from simeval.checks import MAX_NAME_CHARS, MAX_TEXT_CHARS


class Body(BaseModel):
    """A request body: a key it does not know is refused (422)."""

    model_config = ConfigDict(extra="forbid")


# a value of another JSON type is refused (422) as the schema says, not coerced ("0.8" for a
# number, 1 for true); integers stay lax, as JSON Schema's integer holds 42.0
StrictFloat = Annotated[float, Field(strict=True)]
StrictBool = Annotated[bool, Field(strict=True)]


def _not_a_boolean(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("Input should be a valid integer, not a boolean")
    return value


Integer = Annotated[int, BeforeValidator(_not_a_boolean)]
"""An integer as JSON Schema's: 42 or 42.0, not ``true`` (which pydantic would take as 1)."""


def as_list(value: Any) -> Any:
    """One string as a list of one (the short form of ``references``)."""
    return [value] if isinstance(value, str) else value


def bounds(**limits: Any) -> Any:
    """JSON Schema keywords for a bound the service checks itself (with its own 400 naming
    the value), so that the schema declares every limit the code enforces."""
    return {key: value for key, value in limits.items() if value is not None}


_TEXT = {"type": "string", "maxLength": MAX_TEXT_CHARS}
# references: a list of answers, or one answer as a string (declared: the schema says so)
References = Annotated[
    list[str],
    WithJsonSchema(
        {
            "anyOf": [{"type": "array", "items": _TEXT, "minItems": 1}, _TEXT],
            "description": "One or more reference answers (a single string is one answer).",
        }
    ),
]
UNIT = bounds(minimum=0, maximum=1)  # a score or a threshold
NAME = bounds(minLength=1, maxLength=MAX_NAME_CHARS)  # an eval's name
LONG = bounds(maxLength=MAX_TEXT_CHARS)  # an input, an output, a reference, a scope


class ErrorOut(BaseModel):
    """Every error: one line naming the problem (``details`` for a malformed body: 422)."""

    error: str
    details: list[dict[str, Any]] | None = None


def _error(description: str) -> dict[str, Any]:
    return {"model": ErrorOut, "description": description}


# documented on every route (the OpenAPI schema says what a client may get back)
ERRORS: dict[int | str, dict[str, Any]] = {
    400: _error("Bad input: a value out of range, a bad option, a bad file"),
    404: _error("No such eval, result or run"),
    409: _error("Contradicts what is stored (a duplicate name, an activation not allowed)"),
    413: _error("Request body over the server's limit"),
    422: _error("Malformed request, or text the store cannot hold (lone surrogate, NUL, NaN)"),
    503: _error("The database is busy (see Retry-After), damaged or read-only"),
}
