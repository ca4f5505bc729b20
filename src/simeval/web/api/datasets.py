"""The JSON API of datasets under ``/api/datasets``: list, create (from cases, a file or
captures), read a version, edit its cases, export.

Every change answers the dataset with its new version. Thin calls into the service, as in
``simeval.web.api``; mistakes come back as ``{"error": "..."}`` with 400/404/409.
"""

from __future__ import annotations

import os
import tempfile
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import quote

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field, field_validator
from starlette.concurrency import run_in_threadpool

from simeval.checks import MAX_ID, MAX_NAME_CHARS, MAX_OFFSET, UNSET
from simeval.service import Service
from simeval.service.dataset_models import (
    DatasetChangeOut,
    DatasetOut,
    DatasetVersionOut,
)
from simeval.web.schema import (
    ERRORS,
    LONG,
    NAME,
    NOT_BLANK,
    Body,
    Metadata,
    References,
    StrictBool,
    as_list,
    bounded_integer,
    bounds,
)

router = APIRouter(prefix="/api/datasets", responses=ERRORS, tags=["datasets"])

_Model = TypeVar("_Model", bound=BaseModel)

MAX_CASES = 100_000  # cases in one JSON body (a larger set comes as a file)


async def get_service(request: Request) -> Service:
    """The app's service (one per database)."""
    service: Service = request.app.state.service
    return service


ServiceDep = Annotated[Service, Depends(get_service)]
# a case id (``check_case_id``): 1-200 characters once stripped, not blank, no NUL
CASE_ID = bounds(minLength=1, maxLength=MAX_NAME_CHARS, pattern=NOT_BLANK)
DatasetName = Annotated[
    str, Path(description="The dataset's name", max_length=MAX_NAME_CHARS, json_schema_extra=NAME)
]
CaseId = Annotated[str, Path(description="A case id", json_schema_extra=CASE_ID)]
Version = Annotated[
    int | None, Query(ge=1, le=MAX_ID, description="A version (default: the newest)")
]


def _json(model: BaseModel | list[_Model], status_code: int = 200) -> JSONResponse:
    if isinstance(model, list):
        return JSONResponse([m.model_dump(mode="json") for m in model], status_code=status_code)
    return JSONResponse(model.model_dump(mode="json"), status_code=status_code)


class CaseIn(Body):
    """One case: an id, the input, one or more reference answers, metadata."""

    id: str | None = Field(
        None,
        description="Unique within the dataset (default: its number)",
        json_schema_extra=CASE_ID,
    )
    input: str = Field(description="What an engine answers.", json_schema_extra=LONG)
    references: References = Field(examples=[["Paris is the capital of France."]])
    metadata: Metadata | None = None
    draft: StrictBool = Field(False, description="The reference still needs a person's check.")

    _refs = field_validator("references", mode="before")(as_list)

    def case(self) -> dict[str, Any]:
        """The case as the service takes it."""
        return self.model_dump(exclude_none=True)


class NewCaseIn(CaseIn):
    """A case added to a dataset: its id is needed (no number to default to)."""

    id: str = Field(description="Unique within the dataset", json_schema_extra=CASE_ID)


class DatasetIn(Body):
    """A new dataset (version 1) from cases."""

    name: str = Field(examples=["golden"], json_schema_extra=NAME)
    cases: list[CaseIn] = Field(min_length=1, max_length=MAX_CASES)


class CasePatch(Body):
    """Changes to a case; new references are a person's (the case stops being a draft)."""

    input: str | None = Field(None, json_schema_extra=LONG)
    references: References | None = None
    metadata: Metadata | None = Field(None, description="Replaces the metadata.")

    _refs = field_validator("references", mode="before")(as_list)


class AcceptIn(Body):
    """The draft case whose reference a person accepts as it is."""

    id: str = Field(json_schema_extra=CASE_ID)


class CapturesIn(Body):
    """Captures to add as draft cases (the dataset is made when it does not exist)."""

    # a JSON integer: not true (which pydantic would read as 1), not "1"
    capture_ids: list[bounded_integer(1, MAX_ID)] = Field(  # type: ignore[valid-type]
        min_length=1, max_length=1000
    )


@router.get("", response_model=list[DatasetOut])
def list_datasets(service: ServiceDep) -> JSONResponse:
    """Every dataset, with its newest version and case counts."""
    return _json(service.list_datasets())


@router.post("", response_model=DatasetOut, status_code=201)
def create_dataset(body: DatasetIn, service: ServiceDep) -> JSONResponse:
    """A new dataset from cases (409 when the name is taken)."""
    return _json(service.create_dataset(body.name, [c.case() for c in body.cases]), 201)


@router.post(
    "/{name}/import",
    response_model=DatasetOut,
    status_code=201,
    responses={200: {"model": DatasetOut, "description": "A new version (replace=true)"}},
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "The file: JSONL, CSV/TSV or Parquet (as ``format`` says)",
            "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
                "text/csv": {"schema": {"type": "string"}},
            },
        }
    },
)
async def import_dataset(
    name: DatasetName,
    request: Request,
    service: ServiceDep,
    format: Literal["jsonl", "csv", "tsv", "parquet"] = "jsonl",
    replace: bool = False,
) -> JSONResponse:
    """A dataset from a file sent as the body (JSONL, CSV/TSV or Parquet, the columns
    ``simeval run`` reads). With ``replace=true`` an existing dataset gets a new version
    holding exactly the file's cases."""
    data = await request.body()
    fd, path = tempfile.mkstemp(suffix="." + format)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        out = await run_in_threadpool(
            service.import_dataset, name, path, format, True, replace, "the uploaded file"
        )
    finally:
        os.unlink(path)
    return _json(out, 200 if out.version > 1 else 201)


@router.get("/{name}", response_model=DatasetVersionOut)
def get_dataset(
    name: DatasetName,
    service: ServiceDep,
    version: Version = None,
    limit: Annotated[int, Query(ge=1, le=100_000)] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> JSONResponse:
    """A version of the dataset with a page of its cases and the list of its versions."""
    return _json(service.show_dataset(name, version, limit=limit, offset=offset))


@router.get(
    "/{name}/export",
    responses={200: {"content": {"application/x-ndjson": {}, "text/csv": {}}}},
)
def export_dataset(
    name: DatasetName,
    service: ServiceDep,
    version: Version = None,
    format: Literal["jsonl", "csv"] = "jsonl",
) -> Response:
    """Download a version as JSONL or CSV (the columns the import reads)."""
    used, lines = service.export_dataset(name, version, format)
    media = "text/csv; charset=utf-8" if format == "csv" else "application/x-ndjson"
    filename = f"{name.strip()}-v{used}.{format}"
    # a header is Latin-1: a name in other letters goes in RFC 5987's filename*, with an
    # ASCII fallback for clients that read only filename
    plain = filename.encode("ascii", "replace").decode("ascii").replace("?", "_")
    disposition = f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(filename)}"
    return StreamingResponse(
        (line.encode("utf-8") for line in lines),
        media_type=media,
        headers={"Content-Disposition": disposition},
    )


@router.post("/{name}/cases", response_model=DatasetOut)
def add_case(name: DatasetName, body: NewCaseIn, service: ServiceDep) -> JSONResponse:
    """Add a case at the end: a new version (409 when its id is taken)."""
    return _json(service.add_dataset_case(name, body.case()))


@router.patch("/{name}/cases/{case_id:path}", response_model=DatasetOut)
def edit_case(
    name: DatasetName, case_id: CaseId, body: CasePatch, service: ServiceDep
) -> JSONResponse:
    """Change a case: a new version (none when nothing changes)."""
    given = body.model_fields_set
    return _json(
        service.edit_dataset_case(
            name,
            case_id,
            input=body.input if "input" in given and body.input is not None else UNSET,
            # [] is refused by the service (a case needs an answer), not taken as "no change"
            references=body.references
            if "references" in given and body.references is not None
            else UNSET,
            metadata=body.metadata if "metadata" in given else UNSET,
        )
    )


@router.delete("/{name}/cases/{case_id:path}", response_model=DatasetOut)
def delete_case(name: DatasetName, case_id: CaseId, service: ServiceDep) -> JSONResponse:
    """Remove a case: a new version (older versions keep it)."""
    return _json(service.delete_dataset_case(name, case_id))


@router.post("/{name}/accept", response_model=DatasetOut)
def accept_draft(name: DatasetName, body: AcceptIn, service: ServiceDep) -> JSONResponse:
    """Accept a draft case's reference as it is: a new version (409 when not a draft)."""
    return _json(service.accept_dataset_draft(name, body.id))


@router.post(
    "/{name}/captures",
    response_model=DatasetChangeOut,
    status_code=201,
    responses={200: {"model": DatasetChangeOut, "description": "Added to an existing dataset"}},
)
def add_captures(name: DatasetName, body: CapturesIn, service: ServiceDep) -> JSONResponse:
    """Add captures as draft cases (their output the draft reference); the dataset is made
    when there is none of this name. Captures already in it are skipped (``skipped``)."""
    out = service.dataset_from_captures(name, body.capture_ids)
    return _json(out, 201 if out.version == 1 else 200)
