"""What every API module shares: the service dependency, the result filter read from the query
string, the id path parameters, and the reply of a service model."""

from __future__ import annotations

from typing import Annotated, TypeVar

from fastapi import Depends, Path, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from simeval.checks import (
    MAX_ID,
)
from simeval.errors import NotFound
from simeval.service import RESULT_ID_PATTERN, ResultFilter, Service
from simeval.service.cursor import MAX_CURSOR
from simeval.service.models import (
    EvalOut,
)
from simeval.web import schema as declared
from simeval.web.idf_files import shown_idf


async def get_service(request: Request) -> Service:
    """The app's service (one per database). ``async``: a sync dependency costs a thread hop."""
    service: Service = request.app.state.service
    return service


ServiceDep = Annotated[Service, Depends(get_service)]


ResultId = Annotated[
    str, Path(pattern=RESULT_ID_PATTERN, description='"<capture>-<eval>" or "r<row>"')
]


_Model = TypeVar("_Model", bound=BaseModel)


def json_reply(model: BaseModel | list[_Model], status_code: int = 200) -> JSONResponse:
    """A service model (or list) as the JSON reply."""
    # The service already returns validated models: dump them once instead of letting FastAPI
    # validate them a second time against the response model (the capture hot path).
    if isinstance(model, list):
        content: list[dict[str, object]] | dict[str, object] = [
            shown_idf(m.model_dump(mode="json")) for m in model
        ]
    else:
        content = shown_idf(model.model_dump(mode="json"))
    return JSONResponse(content, status_code=status_code)


def live_eval(service: Service, name: str) -> EvalOut:
    """The eval ``name`` unless it is archived: ``DELETE`` archives an eval, which is then
    gone from the API's reads and edits of one eval (404); ``GET /api/evals?include_archived=
    true`` still lists it, and its results are kept."""
    found = service.get_eval(name)
    if found.status == "archived":
        raise NotFound(
            f"eval {found.name!r} is archived (deleted); GET /api/evals?include_archived=true "
            "lists it"
        )
    return found


def result_filter(
    eval: Annotated[str | None, Query(description="Eval name or id.")] = None,
    passed: Annotated[bool | None, Query(description="true = passed, false = failed.")] = None,
    since: Annotated[str | None, declared.when("ISO time or an age like 30d, inclusive.")] = None,
    until: Annotated[str | None, declared.when("ISO time or an age, exclusive.")] = None,
    reviewed: Annotated[bool | None, Query()] = None,
    run_id: Annotated[int | None, Query(ge=1, le=MAX_ID), declared.DIGITS] = None,
    meta: Annotated[
        list[str] | None,
        declared.meta("Capture metadata KEY:VALUE (or KEY=VALUE); repeat for more."),
    ] = None,
) -> ResultFilter:
    """The service's ``ResultFilter`` from the query string shared by listing, counting and
    export (a bad time or metadata filter is a 400, as from the service)."""
    return ResultFilter.parse(
        eval_name=eval,
        passed=passed,
        since=since,
        until=until,
        reviewed=reviewed,
        run_id=run_id,
        meta=meta or None,
    )


FilterDep = Annotated[ResultFilter, Depends(result_filter)]

RunId = Annotated[int, Path(ge=1, le=MAX_ID, description="A run's id"), declared.DIGITS]

CursorParam = Annotated[
    str | None,
    Query(
        description="A page's next_cursor (or prev_cursor): the page after (before) it, "
        "read from the index; instead of offset. One another listing gave is a 400.",
        max_length=MAX_CURSOR,
        pattern="^[A-Za-z0-9_-]+$",
    ),
]
