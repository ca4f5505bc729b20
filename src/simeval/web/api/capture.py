"""The capture routes: one capture (with its fast path), a batch, and the server's health."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError, field_validator
from starlette.requests import ClientDisconnect

from simeval import __version__
from simeval.checks import (
    MAX_KEY_CHARS,
    KeyedCapture,
    check_capture,
    check_capture_key,
)
from simeval.errors import SimevalError
from simeval.service.models import (
    CaptureOut,
)
from simeval.web import schema as declared
from simeval.web.health import OUTAGE_RETRY_S
from simeval.web.schema import (
    LONG,
    Body,
)

router = APIRouter(prefix="/api", responses=declared.ERRORS)
# the server's health, a router of its own: the standalone proxy serves it too (web.proxy)
health_router = APIRouter(prefix="/api", responses=declared.ERRORS)


class CaptureIn(Body):
    """One engine response to score against every active eval in scope."""

    input: str = Field(
        "",
        description="The prompt or request the engine answered (default: none, as a capture "
        "file's line may omit it).",
        json_schema_extra=LONG,
    )
    output: str = Field(description="The engine's output.", json_schema_extra=LONG)
    conversation_id: str | None = Field(None, json_schema_extra=declared.CONVERSATION)
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
    def _a_time_as_text(cls, value: object) -> object:
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


class OtlpHealth(BaseModel):
    waiting: int = Field(description="model calls waiting for their other half")
    waiting_bytes: int = Field(description="the memory they hold (texts and attributes)")
    max_bytes: int = Field(description="the bound (serve --otlp-join-mb)")
    settled_early: int = Field(
        description="calls stored (or dropped, with no content) before their wait was over: "
        "the table was full"
    )
    dropped_without_content: int = Field(
        description="calls dropped for want of content: no span or log record brought their "
        "messages (``dropped`` by reason has it too)"
    )
    dropped: dict[str, int] = Field(
        default_factory=dict, description="calls that became no capture, by reason"
    )
    rejected: dict[str, int] = Field(
        default_factory=dict,
        description="spans and log records refused on their own (their batch's others kept)",
    )
    unscored: dict[str, int] = Field(
        default_factory=dict,
        description="calls stored unscored, by reason: cut (by the sender, or past the "
        "store's limit), no input text",
    )


class Health(BaseModel):
    status: str = Field(description="ok, or degraded while the proxy fails to capture")
    version: str
    proxy: ProxyHealth | None = None
    otlp_export: dict[str, object] | None = Field(None, description="scores-out counters")
    otlp: OtlpHealth | None = Field(
        None, description="OTLP ingest, once a call waited for its other half: the join table"
    )
    worker: dict[str, object] | None = Field(
        None,
        description="serve --workers N only: the answering worker's pid, N, and whether it "
        "runs the alert watcher",
    )


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
    # gathers the captures arriving together into one transaction (simeval.web.capture_writer)
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


@health_router.get("/health", response_model=Health, tags=["meta"])
async def health(request: Request) -> JSONResponse | dict[str, object]:
    """The server is up and its database answers (and, when it proxies an upstream, its
    capture queue's counters); 503 naming the database while it cannot be reached."""
    check = getattr(request.app.state, "database_check", None)
    problem = None if check is None else await check.problem()
    if problem is not None:
        return JSONResponse(
            {"status": "unavailable", "database": "unreachable", "error": problem},
            status_code=503,
            headers={"Retry-After": str(OUTAGE_RETRY_S)},
        )
    out: dict[str, object] = {"status": "ok", "version": __version__}
    proxy = getattr(request.app.state, "proxy", None)
    if proxy is not None:
        proxy_stats = proxy.stats()
        out["proxy"] = proxy_stats
        if proxy_stats["problem"]:
            out["status"] = "degraded"
    if (exporter := getattr(request.app.state, "otlp_export", None)) is not None:
        out["otlp_export"] = exporter.stats()  # its troubles never degrade the captures
    if (joiner := getattr(request.app.state, "otlp_joiner", None)) is not None:
        out["otlp"] = {**joiner.stats(), **joiner.tally.stats()}
    if (worker := getattr(request.app.state, "worker", None)) is not None:
        out["worker"] = worker.health()  # which of the workers answered (simeval.web.workers)
    return out
