"""The body of ``POST /api/results/{id}/review``, kept beside the API module (``web.api``,
which is at its size limit) rather than in it; the route itself is in ``web.api``."""

from __future__ import annotations

from pydantic import Field

from simeval.web import schema as declared
from simeval.web.schema import UNIT, Body, StrictFloat


class ReviewIn(Body):
    """A human override of a result's score; it decides pass/fail from now on."""

    score: StrictFloat = Field(description="The reviewed score, in [0, 1].", json_schema_extra=UNIT)
    note: str = Field("", json_schema_extra=declared.NOTE)
    reviewer: str | None = Field(
        None,
        description="Who reviewed (kept with the review); left out or empty: not recorded.",
        json_schema_extra=declared.SHORT,
    )
