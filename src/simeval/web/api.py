"""The JSON API under ``/api``: the endpoint engines post their outputs to, and eval management.

Every route is a thin call into ``simeval.service.Service`` (the same functions the CLI and the
pages use). User mistakes come back as ``{"error": "..."}`` with 400/404/409 (from the
service's ``SimevalError``), 422 for a malformed request body, 413 for an oversized one.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import PurePath
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError, field_validator
from starlette.requests import ClientDisconnect

from simeval import __version__
from simeval.checks import (
    MAX_ID,
    MAX_KEY_CHARS,
    MAX_OFFSET,
    KeyedCapture,
    check_capture,
    check_capture_key,
)
from simeval.errors import NotFound, SimevalError
from simeval.scoring.options import DEFAULT_THRESHOLD, RETENTION_CHOICES, RETENTION_TEXT
from simeval.service import RESULT_ID_PATTERN, ResultFilter, Service
from simeval.service.models import (
    BacktestReport,
    CaptureOut,
    CleanupOut,
    CompareReport,
    ConversationDetail,
    EvalOut,
    EvalVersionOut,
    RescoreReport,
    ResultOut,
    RunOut,
    SettingsOut,
    TestOut,
    TrendOut,
)
from simeval.web import schema as declared
from simeval.web.api_review import ReviewIn
from simeval.web.idf_files import idf_option, shown_idf
from simeval.web.otlp_export import follow_setting
from simeval.web.schema import (
    ERRORS,
    LONG,
    NAME,
    OTLP_URL,
    UNIT,
    Body,
    Integer,
    References,
    StrictBool,
    StrictFloat,
    as_list,
)

router = APIRouter(prefix="/api", responses=ERRORS)


async def get_service(request: Request) -> Service:
    """The app's service (one per database). ``async``: a sync dependency costs a thread hop."""
    service: Service = request.app.state.service
    return service


ServiceDep = Annotated[Service, Depends(get_service)]


ResultId = Annotated[
    str, Path(pattern=RESULT_ID_PATTERN, description='"<capture>-<eval>" or "r<row>"')
]


def _json(model: BaseModel | list[Any], status_code: int = 200) -> JSONResponse:
    # The service already returns validated models: dump them once instead of letting FastAPI
    # validate them a second time against the response model (the capture hot path).
    if isinstance(model, list):
        content: Any = [shown_idf(m.model_dump(mode="json")) for m in model]
    else:
        content = shown_idf(model.model_dump(mode="json"))
    return JSONResponse(content, status_code=status_code)


def _live(service: Service, name: str) -> EvalOut:
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
    options: dict[str, Any], required: list[str] | None, synonyms: list[list[str]] | None
) -> dict[str, Any]:
    """Scorer options with the body's top-level ``required``/``synonyms`` (which win)."""
    out = dict(options)
    if required is not None:
        out["required"] = required
    if synonyms is not None:
        out["synonyms"] = synonyms
    return out


class TestIn(Body):
    """A dry run of an eval: a sample input and the output to score."""

    input: str = Field("", json_schema_extra=LONG)
    output: str = Field(json_schema_extra=LONG)


class CaptureIn(Body):
    """One engine response to score against every active eval in scope."""

    input: str = Field(
        description="The prompt or request the engine answered.", json_schema_extra=LONG
    )
    output: str = Field(description="The engine's output.", json_schema_extra=LONG)
    conversation_id: str | None = Field(None, json_schema_extra=declared.SHORT)
    metadata: declared.Metadata | None = None
    captured_at: declared.Timestamp | None = Field(
        None,
        description="When the engine answered (ISO 8601, between the years 1000 and 8999; "
        "default: now).",
    )
    capture_key: str | None = Field(
        None,
        max_length=MAX_KEY_CHARS,
        json_schema_extra=declared.KEY,
        description="Makes the capture idempotent: when a capture with this key is stored "
        "already, nothing new is stored and the stored one is answered (200 instead of 201). "
        "A retry after a timeout is then safe. E.g. the engine's response id.",
    )

    @field_validator("captured_at", mode="before")
    @classmethod
    def _a_time_as_text(cls, value: Any) -> Any:
        # ISO 8601 text, as the schema says: a bare number is not taken for a Unix time
        if isinstance(value, int | float) and not isinstance(value, bool):
            raise ValueError("captured_at must be an ISO 8601 date/time string")
        return value

    def checked(self) -> KeyedCapture:
        return (
            *check_capture(
                self.input, self.output, self.conversation_id, self.metadata, self.captured_at
            ),
            check_capture_key(self.capture_key),
        )


MAX_BATCH_CAPTURES = 1000


class CaptureBatchIn(Body):
    """Up to 1,000 captures, stored in one transaction (all or none), idempotent by key."""

    captures: list[CaptureIn] = Field(max_length=MAX_BATCH_CAPTURES)


class CaptureBatchItem(BaseModel):
    id: int
    capture_key: str | None
    stored: bool = Field(description="False: the key was stored before; nothing new stored")
    results: int = Field(description="Results of the active evals")
    passed: int


class CaptureBatchOut(BaseModel):
    """What a batch stored, item by item in the order sent."""

    stored: int
    replayed: int
    captures: list[CaptureBatchItem]


class SettingsIn(Body):
    """Settings to change; fields left out stay as they are."""

    auto_evaluate: StrictBool | None = None
    retention_days: Integer | None = Field(
        None,
        description=f"Days to keep: {RETENTION_TEXT} (null).",
        json_schema_extra={"enum": [*RETENTION_CHOICES, None]},
    )
    otlp_export: str | None = Field(
        None,
        max_length=2000,
        # declared only: the service's check names the problem (400)
        json_schema_extra={"pattern": OTLP_URL},
        description="Scores-out OTLP URL ('' for none).",
    )


class ResultPage(BaseModel):
    """A page of results, newest first."""

    total: int
    limit: int
    offset: int
    results: list[ResultOut]


class ProxyHealth(BaseModel):
    """The proxy's capture queue (when the server proxies an upstream)."""

    upstream: str
    captured: int = Field(description="Replies captured and stored")
    dropped: int = Field(description="Replies not stored: the queue was full or unstorable")
    failed: int = Field(
        0, description="Replies that could not become captures (malformed, too large; logged)"
    )
    queued: int = Field(description="Replies waiting to be stored")
    restarts: int = Field(0, description="Times the watchdog restarted the capture thread")
    problem: str | None = Field(
        None, description="Why the status is degraded (failures in the last 5 minutes)"
    )


class Health(BaseModel):
    status: str = Field(description="ok, or degraded while the proxy fails to capture")
    version: str
    proxy: ProxyHealth | None = None
    otlp_export: dict[str, Any] | None = Field(None, description="scores-out counters")


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


_REPLAYED = {
    200: {
        "model": CaptureOut,
        "description": "The capture_key was stored before: the stored capture, nothing new stored",
    }
}


@router.post(
    "/capture",
    response_model=CaptureOut,
    status_code=201,
    tags=["captures"],
    responses=_REPLAYED,  # type: ignore[arg-type]
)
async def capture(body: CaptureIn, request: Request) -> Response:
    """Store an engine output and score it with every active eval in scope.

    With a ``capture_key`` already stored, nothing is stored and the stored capture (with its
    results) is answered with 200 instead of 201.

    Example:

        curl -X POST http://127.0.0.1:8000/api/capture -H 'Content-Type: application/json' \\
             -d '{"input": "Capital of France?", "output": "Paris is the capital."}'
    """
    return await _captured(request, body)


async def _captured(request: Request, body: CaptureIn) -> Response:
    # checked here (a mistake answers at once), stored by the app's one capture writer, which
    # gathers the captures arriving together into one transaction (simeval.web.writer)
    out = await request.app.state.writer.capture(body.checked())
    status = 200 if out.replayed else 201
    return Response(out.dump_json(), status_code=status, media_type="application/json")


@router.post(
    "/captures/batch",
    response_model=CaptureBatchOut,
    status_code=201,
    tags=["captures"],
    responses={200: {"model": CaptureBatchOut, "description": "Every key was stored before"}},
)
async def capture_batch(body: CaptureBatchIn, request: Request) -> Response:
    """Store up to 1,000 captures in one transaction, each scored as ``POST /api/capture``.

    Every capture is checked before any is stored (an error names ``captures[i]``); keys make
    a retried batch safe: a capture whose key is stored (or repeats an earlier one of the
    batch) is not stored again. 201 when something was stored, 200 when nothing new was.
    ``simeval.Client`` sends its captures here.
    """
    items: list[KeyedCapture] = []
    for i, one in enumerate(body.captures):
        try:
            items.append(one.checked())
        except SimevalError as exc:
            raise type(exc)(f"captures[{i}]: {exc}") from None
    outs = await request.app.state.writer.capture_batch(items) if items else []
    rows = [
        CaptureBatchItem(
            id=o.id,
            capture_key=o.capture_key,
            stored=not o.replayed,
            results=counts[0],
            passed=counts[1],
        )
        for o in outs
        for counts in (o.result_counts(),)
    ]
    stored = sum(r.stored for r in rows)
    answer = CaptureBatchOut(stored=stored, replayed=len(rows) - stored, captures=rows)
    return Response(
        answer.model_dump_json(),
        status_code=201 if stored else 200,
        media_type="application/json",
    )


async def capture_fast(request: Request) -> Response:
    """``POST /api/capture`` as a plain route, placed before the router's: the same body model
    (``CaptureIn``), the same answers and errors, without the framework's per-request
    dependency and body machinery, which cost more than the capture itself
    (benchmarks/bench_serve.py). The route above documents it in the OpenAPI schema."""
    media = ""
    for key, value in request.scope["headers"]:  # read once, without building a Headers map
        if key == b"content-type":
            media = value.decode("latin-1").split(";")[0].strip().lower()
            break
    raw = await _body(request)
    if media != "application/json" and not (
        media.startswith("application/") and media.endswith("+json")
    ):
        # as the framework answers a body it will not read as JSON
        raise RequestValidationError(
            [
                {
                    "type": "model_attributes_type",
                    "loc": ("body",),
                    "msg": "Input should be a valid dictionary or object to extract fields from "
                    "(send Content-Type: application/json)",
                    "input": None,
                }
            ]
        )
    try:
        body = CaptureIn.model_validate_json(raw)
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", *e.get("loc", ()))} for e in exc.errors()]
        raise RequestValidationError(errors) from None
    return await _captured(request, body)


async def _body(request: Request) -> bytes:
    """The request's body, read straight from its ASGI messages (what ``Request.body`` does,
    without its stream machinery)."""
    chunks = []
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


@router.get("/health", response_model=Health, tags=["meta"])
async def health(request: Request) -> dict[str, Any]:
    """The server is up (and, when it proxies an upstream, its capture queue's counters)."""
    out: dict[str, Any] = {"status": "ok", "version": __version__}
    proxy = getattr(request.app.state, "proxy", None)
    if proxy is not None:
        out["proxy"] = proxy.stats()
        if out["proxy"]["problem"]:
            out["status"] = "degraded"
    if (exporter := getattr(request.app.state, "otlp_export", None)) is not None:
        out["otlp_export"] = exporter.stats()  # its troubles never degrade the captures
    return out


# -- evals ---------------------------------------------------------------------------------
@router.get("/evals", response_model=list[EvalOut], tags=["evals"])
def list_evals(
    service: ServiceDep,
    status: Literal["draft", "active", "archived"] | None = None,
    include_archived: bool = False,
) -> JSONResponse:
    """All evals (archived ones only when asked)."""
    return _json(service.list_evals(status=status, include_archived=include_archived))


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
    return _json(out, 201)


@router.patch("/evals/{name:path}", response_model=EvalOut, tags=["evals"])
def edit_eval(name: str, body: EvalPatch, service: ServiceDep, request: Request) -> JSONResponse:
    """Change an eval; a change makes a new version (it then needs a new passing test)."""
    kwargs: dict[str, Any] = {
        "new_name": body.name,
        "references": body.references,
        "threshold": body.threshold,
        "options": body.options,
    }
    stored = _live(service, name).options.get("idf")
    given = body.options.get("idf") if body.options else None
    if body.options and isinstance(stored, str) and given == PurePath(stored).name:
        # the table as the API shows it (by name): the one the eval has
        kwargs["options"] = {**body.options, "idf": stored}
    elif body.options and given != stored:
        kwargs["options"] = idf_option(request.app.state.idf_dir, body.options)
    if "input_scope" in body.model_fields_set:
        kwargs["input_scope"] = body.input_scope
    if body.required is not None or body.synonyms is not None:
        base = kwargs["options"] if kwargs["options"] is not None else _live(service, name).options
        kwargs["options"] = _with_terms(base, body.required, body.synonyms)
    return _json(service.edit_eval(name, **kwargs))


@router.delete("/evals/{name:path}", response_model=EvalOut, tags=["evals"])
def delete_eval(name: str, service: ServiceDep) -> JSONResponse:
    """Archive an eval: it stops scoring and is hidden; its results are kept."""
    return _json(service.archive_eval(name))


@router.get("/evals/{name:path}/versions", response_model=list[EvalVersionOut], tags=["evals"])
def eval_versions(name: str, service: ServiceDep) -> JSONResponse:
    """The versions of an eval, oldest first, with what changed."""
    _live(service, name)
    return _json(service.eval_versions(name))


@router.post("/evals/{name:path}/test", response_model=TestOut, tags=["evals"])
def test_eval(name: str, body: TestIn, service: ServiceDep) -> JSONResponse:
    """Run the eval on a sample input and output (recorded; a pass allows activation)."""
    return _json(service.test_eval(name, body.input, body.output))


@router.post("/evals/{name:path}/activate", response_model=EvalOut, tags=["evals"])
def activate_eval(name: str, service: ServiceDep) -> JSONResponse:
    """Start scoring captures (409 unless a test of the current version passed)."""
    return _json(service.activate_eval(name))


@router.post("/evals/{name:path}/deactivate", response_model=EvalOut, tags=["evals"])
def deactivate_eval(name: str, service: ServiceDep) -> JSONResponse:
    """Stop scoring captures (back to draft); 404 for an archived (deleted) eval, which the
    API does not bring back (``simeval evals deactivate`` does)."""
    _live(service, name)
    return _json(service.deactivate_eval(name))


@router.post("/evals/{name:path}/archive", response_model=EvalOut, tags=["evals"])
def archive_eval(name: str, service: ServiceDep) -> JSONResponse:
    """Archive an eval (hidden, not scoring, results kept)."""
    return _json(service.archive_eval(name))


@router.get("/evals/{name:path}/trend", response_model=TrendOut, tags=["evals"])
def eval_trend(
    name: str,
    service: ServiceDep,
    bucket: Literal["hour", "day", "week"] = "day",
    since: Annotated[str | None, declared.when("ISO time or an age like 30d.")] = None,
    until: Annotated[str | None, declared.when("ISO time or an age.")] = None,
) -> JSONResponse:
    """Mean score and pass rate per time bucket, with version and scorer changes marked."""
    _live(service, name)
    return _json(service.trend(name, bucket=bucket, since=since, until=until))


# -- captures and results ------------------------------------------------------------------


# after the routes under an eval: a name may hold '/' (made before names were limited)
@router.get("/evals/{name:path}", response_model=EvalOut, tags=["evals"])
def get_eval(name: str, service: ServiceDep) -> JSONResponse:
    """One eval, by name or id (404 once archived: ``DELETE``)."""
    return _json(_live(service, name))


@router.get("/results", response_model=ResultPage, tags=["results"])
def list_results(
    service: ServiceDep,
    where: FilterDep,
    limit: Annotated[int, Query(ge=1, le=1000), declared.DIGITS] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET), declared.DIGITS] = 0,
) -> JSONResponse:
    """Results, newest first, filtered by eval, pass/fail, time range, review or run."""
    items = service.list_results(where, limit=limit, offset=offset)
    total = service.count_results(where)
    return JSONResponse(
        {
            "total": total,
            "limit": limit,
            "offset": offset,
            "results": [r.model_dump(mode="json") for r in items],
        }
    )


@router.get(
    "/results/export",
    tags=["results"],
    responses={200: {"content": {"text/csv": {}, "application/json": {}}}},
)
def export_results(
    service: ServiceDep,
    where: FilterDep,
    format: Literal["csv", "json"] = "csv",
) -> Response:
    """Download the filtered results as CSV or JSON."""
    text = service.export_results(fmt=format, where=where)
    media = "text/csv; charset=utf-8" if format == "csv" else "application/json"
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    name = f"simeval-results-{stamp}.{format}"
    return Response(
        text, media_type=media, headers={"Content-Disposition": f'attachment; filename="{name}"'}
    )


@router.get("/results/{result_id}", response_model=ResultOut, tags=["results"])
def get_result(result_id: ResultId, service: ServiceDep) -> JSONResponse:
    """One result with its explanation and review."""
    return _json(service.get_result(result_id))


@router.post("/results/{result_id}/review", response_model=ResultOut, tags=["results"])
def review_result(result_id: ResultId, body: ReviewIn, service: ServiceDep) -> JSONResponse:
    """Override a result's score; the review decides pass/fail from now on."""
    return _json(service.review_result(result_id, body.score, body.note, body.reviewer))


# -- settings ------------------------------------------------------------------------------
RunId = Annotated[int, Path(ge=1, le=MAX_ID, description="A run's id"), declared.DIGITS]


@router.delete("/runs/{run_id}", response_model=RunOut, tags=["runs"])
def delete_run(run_id: RunId, service: ServiceDep) -> JSONResponse:
    """Delete a run and its rows (409 while it is still being stored)."""
    return _json(service.delete_run(run_id))


@router.get("/settings", response_model=SettingsOut, tags=["settings"])
def get_settings(service: ServiceDep) -> JSONResponse:
    """Automatic evaluation and retention."""
    return _json(service.get_settings())


@router.patch("/settings", response_model=SettingsOut, tags=["settings"])
def update_settings(body: SettingsIn, service: ServiceDep, request: Request) -> JSONResponse:
    """Change settings; ``retention_days: null`` keeps everything forever."""
    kwargs: dict[str, Any] = {"auto_evaluate": body.auto_evaluate}
    for name in {"retention_days", "otlp_export"} & body.model_fields_set:
        kwargs[name] = getattr(body, name)
    out = service.update_settings(**kwargs)
    follow_setting(request.app.state, service)  # the exporter follows the setting now
    return _json(out)


@router.post("/cleanup", response_model=CleanupOut, tags=["settings"])
def cleanup(service: ServiceDep) -> JSONResponse:
    """Delete what is older than the retention period now (also done by `simeval cleanup`)."""
    return _json(service.cleanup())


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
    return _json(service.backtest_eval(name, limit=body.limit, days=body.days))


@router.post("/rescore", response_model=RescoreReport, tags=["evals"])
def rescore(body: RescoreIn, service: ServiceDep) -> JSONResponse:
    """Store an eval's results for past captures it has not scored (once per capture and
    eval), with the version in force."""
    return _json(
        service.rescore(body.eval, since=body.since, until=body.until, refresh=body.refresh)
    )


@router.get("/compare", response_model=CompareReport, tags=["results"])
def compare(
    service: ServiceDep,
    a: Annotated[str, declared.side("run:ID, run:latest or captures:KEY=VALUE,...")],
    b: Annotated[str, declared.side("The side compared with A (same forms).")],
    eval: Annotated[str | None, Query(description="Only this eval.")] = None,
    seed: Annotated[int, Query(ge=0), declared.DIGITS] = 0,
    resamples: Annotated[int, Query(ge=100, le=20_000), declared.DIGITS] = 2000,
    top: Annotated[int, Query(ge=0, le=1000), declared.DIGITS] = 20,
) -> JSONResponse:
    """Compare side B with side A per eval: n, pass rate and mean score, B − A with 95%
    bootstrap intervals (paired on case id or input, McNemar on flips), a verdict, and the
    most regressed cases with their missing terms."""
    return _json(service.compare(a, b, eval_name=eval, seed=seed, resamples=resamples, keep=top))


@router.get("/captures", tags=["captures"])
def list_captures(
    service: ServiceDep,
    meta: Annotated[list[str] | None, declared.meta("Metadata KEY:VALUE; repeatable.")] = None,
    conversation_id: Annotated[str | None, declared.text()] = None,
    since: Annotated[str | None, declared.when("ISO time or an age like 7d.")] = None,
    until: Annotated[str | None, declared.when("ISO time or an age.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000), declared.DIGITS] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET), declared.DIGITS] = 0,
) -> JSONResponse:
    """Captures, newest first, with their metadata and results."""
    filters: dict[str, Any] = {
        "meta": meta,
        "conversation_id": conversation_id,
        "since": since,
        "until": until,
    }
    items = service.list_captures(limit=limit, offset=offset, **filters)
    return JSONResponse(
        {
            "total": service.count_captures(**filters),
            "limit": limit,
            "offset": offset,
            "captures": [c.model_dump(mode="json") for c in items],
        }
    )


@router.get("/captures/{capture_id}", response_model=CaptureOut, tags=["captures"])
def get_capture(
    capture_id: Annotated[
        int, Path(ge=1, le=MAX_ID, description="A capture's id"), declared.DIGITS
    ],
    service: ServiceDep,
) -> JSONResponse:
    """One capture with its metadata and results."""
    return _json(service.get_capture(capture_id))


@router.get("/conversations", tags=["captures"])
def list_conversations(
    service: ServiceDep,
    limit: Annotated[int, Query(ge=1, le=1000), declared.DIGITS] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET), declared.DIGITS] = 0,
) -> JSONResponse:
    """Conversations, most recently active first: turns, pass rate, last activity."""
    items = service.list_conversations(limit=limit, offset=offset)
    return JSONResponse(
        {
            "total": service.count_conversations(),
            "limit": limit,
            "offset": offset,
            "conversations": [c.model_dump(mode="json") for c in items],
        }
    )


@router.get(
    "/conversations/{conversation_id}", response_model=ConversationDetail, tags=["captures"]
)
def get_conversation(conversation_id: str, service: ServiceDep) -> JSONResponse:
    """A conversation's turns in order, each with its input, output and results."""
    return _json(service.get_conversation(conversation_id))


@router.get("/runs", tags=["runs"])
def list_runs(
    service: ServiceDep,
    limit: Annotated[int, Query(ge=1, le=1000), declared.DIGITS] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET), declared.DIGITS] = 0,
) -> JSONResponse:
    """Stored data-set runs, newest first: name, time, rows, pass rate, mean score, status."""
    items = service.list_runs(limit=limit, offset=offset)
    return JSONResponse(
        {
            "total": service.count_runs(),
            "limit": limit,
            "offset": offset,
            "runs": [r.model_dump(mode="json") for r in items],
        }
    )


@router.get("/runs/{run_id}", tags=["runs"])
def get_run(run_id: RunId, service: ServiceDep) -> JSONResponse:
    """A stored run: its summary, pass rate, mean score and its worst rows."""
    run = service.get_run(run_id)
    worst = service.run_worst(run_id, 10)
    return JSONResponse(
        {**run.model_dump(mode="json"), "worst": [r.model_dump(mode="json") for r in worst]}
    )
