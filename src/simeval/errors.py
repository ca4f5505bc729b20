"""The exceptions simeval raises for a user's mistake.

Every one of them carries a one-line message that names the problem; the CLI prints it and
exits 2, the HTTP API answers 4xx with it. Anything else escaping is a bug.
"""

from __future__ import annotations


class SimevalError(Exception):
    """Base class of the errors caused by bad input, bad options or a missing object."""

    status_code = 400


class InvalidInput(SimevalError, ValueError):
    """A value is out of range, empty, or malformed."""


class Unstorable(InvalidInput):
    """Text or JSON the store cannot hold and give back (a lone surrogate, a NUL, NaN in
    metadata, nesting too deep): refused before anything is written (HTTP 422)."""

    status_code = 422


class InvalidType(SimevalError, TypeError):
    """A value has the wrong type (e.g. ``None`` where text was expected)."""


class InvalidOption(SimevalError, ValueError):
    """An unknown scorer option, or a known one with a bad value."""


class TooLarge(InvalidInput):
    """A body that inflates past its limit (a gzip bomb, say): refused unread (HTTP 413)."""

    status_code = 413


class NotFound(SimevalError, LookupError):
    """A named object (an eval, a result, a file) does not exist."""

    status_code = 404


class Conflict(SimevalError):
    """The request contradicts what is stored (a duplicate name, an activation not allowed)."""

    status_code = 409


class Unavailable(SimevalError):
    """The database cannot serve now: its server is down or restarting, or its disk is full.
    Nothing was written; the same request may succeed later (HTTP 503 with Retry-After)."""

    status_code = 503
