"""The JSON API of run groups (``/api/run-groups…``): the runs made together on one data set,
one per engine, and their cases side by side. Thin calls into ``Service`` (``simeval.service.
run_groups``); errors are ``{"error": ...}`` as in the rest of the API.

A group's name may hold a slash: it is the path's rest (``{name:path}``), so the routes that
end in ``/cases`` are declared first.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.responses import JSONResponse

from simeval.checks import MAX_NAME_CHARS, MAX_OFFSET
from simeval.service.run_groups import (
    MAX_CASES_PAGE,
    MAX_KEY_CHARS,
    MAX_SEARCH_CHARS,
    GroupCaseDetail,
    GroupCasesPage,
    RunGroupOut,
)
from simeval.web.api.common import ServiceDep
from simeval.web.idf_files import shown_idf
from simeval.web.schema import ERRORS, NO_NUL, NOT_BLANK, bounds

router = APIRouter(prefix="/api", responses=ERRORS)

# declared, not checked here: the service checks each (a 400 naming the value, on every
# backend: PostgreSQL's text holds no NUL)
_KEY = "^-?[0-9]{1,18}(:[^\\x00]+)?$"
_AFTER = "^(-?[0-9]{1,18}(:[^\\x00]+)?)?$"  # empty: from the first case
GroupName = Annotated[
    str,
    Path(
        description="The group's name",
        json_schema_extra=bounds(minLength=1, maxLength=MAX_NAME_CHARS, pattern=NOT_BLANK),
    ),
]
_KEY_TEXT = 'a case\'s key: "<ordinal>" or "<ordinal>:<eval>"'
CaseKey = Annotated[
    str,
    Path(
        description=_KEY_TEXT[0].upper() + _KEY_TEXT[1:],
        json_schema_extra=bounds(maxLength=MAX_KEY_CHARS, pattern=_KEY),
    ),
]


@router.get("/run-groups", tags=["runs"])
def list_run_groups(
    service: ServiceDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> JSONResponse:
    """Groups of runs (one run per engine on one data set), newest first, with each
    engine's run, pass rate and mean score."""
    groups = service.list_run_groups(limit=limit, offset=offset)
    return JSONResponse(
        {
            "total": service.count_run_groups(),
            "limit": limit,
            "offset": offset,
            "groups": [g.model_dump(mode="json") for g in groups],
        }
    )


@router.get("/run-groups/{name:path}/cases", response_model=GroupCasesPage, tags=["runs"])
def run_group_cases(
    name: GroupName,
    service: ServiceDep,
    differ: Annotated[
        bool, Query(description="Only cases where the engines disagree on pass/fail")
    ] = False,
    failing: Annotated[bool, Query(description="Only cases an engine fails")] = False,
    q: Annotated[
        str | None,
        Query(
            description="Text in the case's id, input or outputs (case-insensitive)",
            json_schema_extra=bounds(maxLength=MAX_SEARCH_CHARS, pattern=NO_NUL),
        ),
    ] = None,
    after: Annotated[
        str | None,
        Query(
            description="The previous page's ``next``: " + _KEY_TEXT,
            json_schema_extra=bounds(maxLength=MAX_KEY_CHARS, pattern=_AFTER),
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_CASES_PAGE)] = 50,
) -> JSONResponse:
    """A page of the group's cases in data-set order, one cell per engine: output, score,
    pass/fail and the missing terms of a failing one. Page on with ``after=<next>``."""
    page = service.run_group_cases(
        name, differ=differ, failing=failing, search=q, after=after, limit=limit
    )
    return JSONResponse(page.model_dump(mode="json"))


@router.get("/run-groups/{name:path}/cases/{key}", response_model=GroupCaseDetail, tags=["runs"])
def run_group_case(name: GroupName, key: CaseKey, service: ServiceDep) -> JSONResponse:
    """One case of the group: each engine's full result with its explanation."""
    detail = service.run_group_case(name, key)
    return JSONResponse(shown_idf(detail.model_dump(mode="json")))


@router.get("/run-groups/{name:path}", response_model=RunGroupOut, tags=["runs"])
def get_run_group(name: GroupName, service: ServiceDep) -> JSONResponse:
    """A group: its engines in the order their runs were stored, with each run's figures and
    the data set it ran on."""
    return JSONResponse(service.get_run_group(name).model_dump(mode="json"))
