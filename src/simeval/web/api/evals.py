"""Eval management: create, edit, version, test, activate, trend, backtest and rescore."""

from __future__ import annotations

from pathlib import PurePath
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import Field, field_validator

from simeval.scoring.options import DEFAULT_THRESHOLD, required_words, synonym_groups
from simeval.service.models import (
    BacktestReport,
    EvalOut,
    EvalVersionOut,
    RescoreReport,
    TestOut,
    TrendOut,
)
from simeval.web import schema as declared
from simeval.web.api.common import ServiceDep, json_reply, live_eval
from simeval.web.idf_files import idf_option
from simeval.web.schema import (
    LONG,
    NAME,
    UNIT,
    Body,
    Integer,
    References,
    StrictFloat,
    as_list,
)

router = APIRouter(prefix="/api", responses=declared.ERRORS)


class EvalIn(Body):
    """A new similarity eval."""

    name: str = Field(examples=["capital-answer"], json_schema_extra=NAME)
    references: References = Field(examples=[["Paris is the capital of France."]])
    threshold: StrictFloat = Field(
        DEFAULT_THRESHOLD,
        description="Minimum score that passes, in [0, 1].",
        json_schema_extra=UNIT,
    )
    input_scope: str | None = Field(
        None,
        description="Score only captures whose input is this text (case and spacing aside).",
        json_schema_extra=LONG,
    )
    options: declared.ScorerOptions = Field(default_factory=dict)
    required: declared.Terms = Field(
        None,
        description="Terms an output must contain to pass (options.required).",
        examples=[["paris"]],
    )
    synonyms: declared.Groups = Field(
        None,
        description="Groups of words counted as one term (options.synonyms).",
        examples=[[["begin", "commence", "start"]]],
    )
    type: Literal["similarity"] = "similarity"

    _refs = field_validator("references", mode="before")(as_list)


class EvalPatch(Body):
    """Changes to an eval; each one that changes something makes a new version."""

    name: str | None = Field(None, description="A new name.", json_schema_extra=NAME)
    references: References | None = None
    threshold: StrictFloat | None = Field(None, json_schema_extra=UNIT)
    input_scope: str | None = Field(
        None, description="null removes the scope.", json_schema_extra=LONG
    )
    options: declared.ScorerOptions | None = None
    required: declared.Terms = Field(None, description="New required terms ([] = none).")
    synonyms: declared.Groups = Field(None, description="New synonym groups ([] = none).")

    _refs = field_validator("references", mode="before")(as_list)


def _with_terms(
    options: dict[str, Any], required: list[str] | None, synonyms: list[list[str | int]] | None
) -> dict[str, Any]:
    """Scorer options with the body's top-level ``required``/``synonyms`` (which win); the
    options' own are still checked (``InvalidOption`` naming the problem): a body is refused
    for what it holds, whichever part wins."""
    out = dict(options)
    if required is not None:
        if "required" in out:
            required_words(out["required"])
        out["required"] = required
    if synonyms is not None:
        if "synonyms" in out:
            synonym_groups(out["synonyms"])
        out["synonyms"] = synonyms
    return out


class TestIn(Body):
    """A dry run of an eval: a sample input and the output to score."""

    input: str = Field("", json_schema_extra=LONG)
    output: str = Field(json_schema_extra=LONG)


@router.get("/evals", response_model=list[EvalOut], tags=["evals"])
def list_evals(
    service: ServiceDep,
    status: Literal["draft", "active", "archived"] | None = None,
    include_archived: bool = False,
) -> JSONResponse:
    """All evals (archived ones only when asked)."""
    return json_reply(service.list_evals(status=status, include_archived=include_archived))


@router.post("/evals", response_model=EvalOut, status_code=201, tags=["evals"])
def create_eval(body: EvalIn, service: ServiceDep, request: Request) -> JSONResponse:
    """Create a similarity eval (as a draft: test it, then activate it).

    A corpus IDF table (``options.idf``) is named, not given by path: a file in the server's
    IDF directory (``simeval serve --idf-dir``)."""
    out = service.create_eval(
        body.name,
        body.references,
        threshold=body.threshold,
        input_scope=body.input_scope,
        options=idf_option(
            request.app.state.idf_dir, _with_terms(body.options, body.required, body.synonyms)
        ),
    )
    return json_reply(out, 201)


@router.patch("/evals/{name:path}", response_model=EvalOut, tags=["evals"])
def edit_eval(name: str, body: EvalPatch, service: ServiceDep, request: Request) -> JSONResponse:
    """Change an eval; a change makes a new version (it then needs a new passing test)."""
    kwargs: dict[str, Any] = {
        "new_name": body.name,
        "references": body.references,
        "threshold": body.threshold,
        "options": body.options,
    }
    stored = live_eval(service, name).options.get("idf")
    given = body.options.get("idf") if body.options else None
    if body.options and isinstance(stored, str) and given == PurePath(stored).name:
        # the table as the API shows it (by name): the one the eval has
        kwargs["options"] = {**body.options, "idf": stored}
    elif body.options and given != stored:
        kwargs["options"] = idf_option(request.app.state.idf_dir, body.options)
    if "input_scope" in body.model_fields_set:
        kwargs["input_scope"] = body.input_scope
    if body.required is not None or body.synonyms is not None:
        base = (
            kwargs["options"] if kwargs["options"] is not None else live_eval(service, name).options
        )
        kwargs["options"] = _with_terms(base, body.required, body.synonyms)
    return json_reply(service.edit_eval(name, **kwargs))


@router.delete("/evals/{name:path}", response_model=EvalOut, tags=["evals"])
def delete_eval(name: str, service: ServiceDep) -> JSONResponse:
    """Archive an eval: it stops scoring and is hidden; its results are kept."""
    return json_reply(service.archive_eval(name))


@router.get("/evals/{name:path}/versions", response_model=list[EvalVersionOut], tags=["evals"])
def eval_versions(name: str, service: ServiceDep) -> JSONResponse:
    """The versions of an eval, oldest first, with what changed."""
    live_eval(service, name)
    return json_reply(service.eval_versions(name))


@router.post("/evals/{name:path}/test", response_model=TestOut, tags=["evals"])
def test_eval(name: str, body: TestIn, service: ServiceDep) -> JSONResponse:
    """Run the eval on a sample input and output (recorded; a pass allows activation)."""
    return json_reply(service.test_eval(name, body.input, body.output))


@router.post("/evals/{name:path}/activate", response_model=EvalOut, tags=["evals"])
def activate_eval(name: str, service: ServiceDep) -> JSONResponse:
    """Start scoring captures (409 unless a test of the current version passed)."""
    return json_reply(service.activate_eval(name))


@router.post("/evals/{name:path}/deactivate", response_model=EvalOut, tags=["evals"])
def deactivate_eval(name: str, service: ServiceDep) -> JSONResponse:
    """Stop scoring captures (back to draft); 404 for an archived (deleted) eval, which the
    API does not bring back (``simeval evals deactivate`` does)."""
    live_eval(service, name)
    return json_reply(service.deactivate_eval(name))


@router.post("/evals/{name:path}/archive", response_model=EvalOut, tags=["evals"])
def archive_eval(name: str, service: ServiceDep) -> JSONResponse:
    """Archive an eval (hidden, not scoring, results kept)."""
    return json_reply(service.archive_eval(name))


@router.get("/evals/{name:path}/trend", response_model=TrendOut, tags=["evals"])
def eval_trend(
    name: str,
    service: ServiceDep,
    bucket: Literal["hour", "day", "week"] = "day",
    since: Annotated[str | None, declared.when("ISO time or an age like 30d.")] = None,
    until: Annotated[str | None, declared.when("ISO time or an age.")] = None,
) -> JSONResponse:
    """Mean score and pass rate per time bucket, with version and scorer changes marked."""
    live_eval(service, name)
    return json_reply(service.trend(name, bucket=bucket, since=since, until=until))


# after the routes under an eval: a name may hold '/' (made before names were limited)
@router.get("/evals/{name:path}", response_model=EvalOut, tags=["evals"])
def get_eval(name: str, service: ServiceDep) -> JSONResponse:
    """One eval, by name or id (404 once archived: ``DELETE``)."""
    return json_reply(live_eval(service, name))


class BacktestIn(Body):
    """How far back a backtest looks."""

    limit: Integer = Field(
        default=500, ge=1, le=10_000, description="The most recent captures in scope."
    )
    days: Integer = Field(default=30, ge=1, le=365, description="At most this many days back.")


class RescoreIn(Body):
    """Which past captures to score with an eval."""

    eval: str = Field(description="Eval name or id.")
    since: str = Field(
        "7d", description="ISO time or an age like 7d.", json_schema_extra=declared.WHEN
    )
    until: str | None = Field(None, json_schema_extra=declared.WHEN_OR_NULL)
    refresh: bool = Field(
        False, description="Also replace its stored results of another scorer fingerprint."
    )


@router.post("/evals/{name}/backtest", response_model=BacktestReport, tags=["evals"])
def backtest_eval(name: str, service: ServiceDep, body: BacktestIn | None = None) -> JSONResponse:
    """Score the eval's current version (a draft or a pending version) on recent captures in
    its scope, storing nothing: pass rate, distribution, worst and borderline cases."""
    body = body or BacktestIn()
    return json_reply(service.backtest_eval(name, limit=body.limit, days=body.days))


@router.post("/rescore", response_model=RescoreReport, tags=["evals"])
def rescore(body: RescoreIn, service: ServiceDep) -> JSONResponse:
    """Store an eval's results for past captures it has not scored (once per capture and
    eval), with the version in force."""
    return json_reply(
        service.rescore(body.eval, since=body.since, until=body.until, refresh=body.refresh)
    )
