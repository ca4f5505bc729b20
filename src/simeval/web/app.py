"""The ASGI app behind ``simeval serve``: JSON API under ``/api``, Eval Studio pages, docs.

``create_app`` wires one ``Service`` (one database) to the API router and the page router,
puts the security middleware in front, and serves every script and style itself (the chart
library from the installed ``plotly`` package, the API docs' assets from ``fastapi-offline``),
so the studio works with no internet.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable, Iterable
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from starlette.exceptions import HTTPException
from starlette.routing import Route
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from simeval import __version__
from simeval.checks import DEEP_OFFSET_HINT
from simeval.errors import SimevalError
from simeval.service import Service
from simeval.service.store_names import DRIVER_ERRORS, DatabaseBusyError, database_problem
from simeval.web import api, otlp, pages, schema
from simeval.web.api import ALERT_INTERVAL_S, start_alerts, stop_alerts
from simeval.web.capture_writer import LOCK_WAIT_S, CaptureWriter
from simeval.web.health import OUTAGE_RETRY_S, DatabaseCheck
from simeval.web.identity import Identities, SignInThrottle
from simeval.web.idf_files import resolve_idf_dir
from simeval.web.methods import MethodMiddleware
from simeval.web.otlp import MAX_INFLATED, OTLP_JOIN_BYTES
from simeval.web.otlp_export import close_exporter, open_exporter
from simeval.web.security import (
    BodyLimitMiddleware,
    DocsHeadersMiddleware,
    GuardMiddleware,
    SessionStore,
    is_api_path,
)
from simeval.web.sso import PeerMiddleware, UserHeader

if TYPE_CHECKING:
    from simeval.web.proxy import Proxy

HERE = Path(__file__).parent
DEFAULT_MAX_BODY = 1_048_576  # 1 MiB


def plotly_js_path() -> Path:
    """The plotly.js bundle shipped inside the installed ``plotly`` Python package."""
    return Path(str(files("plotly") / "package_data" / "plotly.min.js"))


def _validation_message(exc: RequestValidationError) -> str:
    """One line naming the first problem, e.g. ``body.output: Field required``."""
    errors = exc.errors()
    if not errors:
        return "invalid request"
    first = errors[0]
    where = ".".join(str(p) for p in first.get("loc", ()))
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    hint = (
        f": {DEEP_OFFSET_HINT}"
        if first.get("type") == "less_than_equal" and where == "query.offset"
        else ""
    )
    return f"{where}: {first.get('msg', 'invalid')}{hint}{more}"


def create_app(
    db: str | None = None,
    token: str | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    *,
    service: Service | None = None,
    allowed_hosts: Iterable[str] | None = None,
    upstream: str | None = None,
    proxy_queue: int = 10_000,
    lock_wait: float = LOCK_WAIT_S,
    idf_dir: str | os.PathLike[str] | None = None,
    otlp_export: str | None = None,
    alert_interval: float | None = ALERT_INTERVAL_S,
    sessions: SessionStore | None = None,
    otlp_join_bytes: int = OTLP_JOIN_BYTES,
    otlp_score_cut: bool = False,
    identity_ttl: float = 1.0,
    user_header: UserHeader | None = None,
) -> FastAPI:
    """Build the studio + API app for one database.

    ``db``: a file path or SQLAlchemy URL (None: ``SIMEVAL_DATABASE_URL`` or the default file).
    ``token``: when set, every API call and page needs it (see ``simeval.web.security``).
    ``max_body``: request bodies above this many bytes get 413 (OTLP's ``/v1/*`` take up to
    ``MAX_INFLATED``, 64 MiB, as the exporters send their batches whole).
    ``lock_wait``: seconds a capture waits for the database's write lock before a 503 with
    ``Retry-After``. ``idf_dir``: where corpus IDF tables named over the API are looked up
    (by name; default: the directory of the SQLite file, else the user data directory).
    ``service``: an open ``Service`` to use instead of opening ``db`` (it is then not closed
    by the app). ``allowed_hosts``: host names served when no token is set (default: the
    loopback names; ``["*"]`` turns the check off). ``upstream``: an OpenAI-compatible base
    URL; requests under ``/v1`` are then proxied to it and its replies captured
    (``simeval.web.proxy``; ``proxy_queue`` replies wait for the store at most).
    ``otlp_export``: an OTLP/HTTP URL the results of every stored capture are sent to as
    ``gen_ai.evaluation.result`` events (``simeval.web.otlp_export``; default: the stored
    setting ``otlp_export``, else none). ``alert_interval``: seconds between evaluations of
    the alert rules on a timer (they also run as results arrive; None: the server watches no
    rules, ``simeval.web.api.alerts``). ``sessions``: where the studio's logins are kept
    (default: this process's memory; ``simeval.web.workers`` shares them between workers).
    ``otlp_join_bytes``: how much the OTLP calls waiting for their other half may hold (their
    texts and attributes, ``simeval.web.otlp.Joiner``); past it the oldest are settled early.
    ``otlp_score_cut``: OTLP calls whose text was cut (by the sender, or past the store's
    limit) are scored on the text kept (by default they are stored unscored).

    Example::

        import uvicorn
        from simeval.web import create_app
        uvicorn.run(create_app("evals.db"), host="127.0.0.1", port=8000)
    """
    own = service is None
    svc = Service(db) if service is None else service
    proxy = _open_proxy(svc, upstream, proxy_queue, token)
    app = FastAPIOffline(
        title="simeval",
        version=__version__,
        description=(
            "Similarity evals for engine output: TF-IDF cosine, computed locally. "
            "Engines post outputs to `POST /api/capture` (or batches to "
            "`POST /api/captures/batch`, or OpenTelemetry spans to `POST /v1/traces`); "
            "every active eval scores them."
        ),
        static_url="/vendor/docs",
        lifespan=_lifespan(proxy, close_service=own),
    )
    app.state.service = svc
    app.state.database_check = DatabaseCheck(svc)
    app.state.writer = CaptureWriter(svc, lock_wait)
    app.state.idf_dir = resolve_idf_dir(svc.url, idf_dir)
    app.state.token = token or None
    # the studio's logins (simeval.web.security)
    app.state.sessions = SessionStore() if sessions is None else sessions
    # the users and their roles, once any exist (simeval.web.identity, simeval.web.access)
    app.state.identities = Identities(svc, identity_ttl)
    app.state.sign_ins = SignInThrottle()
    app.state.user_header = user_header
    app.state.proxy = proxy.captures if proxy is not None else None
    open_exporter(app.state, svc, otlp_export)  # app.state.otlp_export
    app.state.alert_interval = alert_interval
    app.state.otlp_join_bytes = otlp_join_bytes
    app.state.otlp_score_cut = otlp_score_cut
    _add_error_handlers(app, lock_wait)
    _add_routes(app, proxy)
    app.openapi = schema.with_links(app)  # type: ignore[method-assign]
    _add_middleware(app, token, allowed_hosts, max_body, user_header)
    return app


def _open_proxy(
    svc: Service, upstream: str | None, proxy_queue: int, token: str | None = None
) -> Proxy | None:
    """The ``/v1`` proxy to ``upstream`` with its capture queue (None without an upstream);
    ``token``, simeval's own, is never forwarded."""
    if not upstream:
        return None
    # imported only when proxying: most servers never need it
    from simeval.web.proxy import CaptureQueue, Proxy, proxy_store

    captures = CaptureQueue(proxy_store(svc), proxy_queue, upstream)
    return Proxy(upstream, captures, token=token)


def _lifespan(
    proxy: Proxy | None, *, close_service: bool
) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    """On shutdown: the proxy's connections and queue, the capture writer, then the service
    (only when the app opened it)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        start_alerts(app)  # the alert watcher's threads (off the capture path)
        # one of several workers (simeval.web.workers): the watcher if it wins the lock
        worker = getattr(app.state, "worker", None)
        if worker is not None:
            worker.start(app)
        yield
        if worker is not None:
            worker.stop(app)
        stop_alerts(app)
        if proxy is not None:
            await proxy.aclose()
            proxy.captures.close()
        await otlp.close(app)  # the log records' joins still waiting, settled and stored
        app.state.writer.close()
        close_exporter(app.state, app.state.service)
        if close_service:
            app.state.service.close()

    return lifespan


def _add_error_handlers(app: FastAPI, lock_wait: float) -> None:
    """Errors as JSON under the API, as pages elsewhere; never a traceback."""

    @app.exception_handler(SimevalError)
    async def simeval_error(request: Request, exc: SimevalError) -> Response:
        if exc.status_code == 503:  # busy or unavailable: worth trying again shortly
            wait = lock_wait if isinstance(exc, DatabaseBusyError) else OUTAGE_RETRY_S
            retry = {"Retry-After": str(max(1, round(wait)))}
            if is_api_path(request.url.path):
                return JSONResponse({"error": str(exc)}, status_code=503, headers=retry)
            page = pages.error_page(request, 503, str(exc))
            page.headers.update(retry)
            return page
        if is_api_path(request.url.path):
            return JSONResponse({"error": str(exc)}, status_code=exc.status_code)
        return pages.error_page(request, exc.status_code, str(exc))

    for driver_error in DRIVER_ERRORS:
        app.exception_handler(driver_error)(_database_error)
    app.exception_handler(HTTPException)(_http_error)
    app.exception_handler(RequestValidationError)(_validation_error)


async def _database_error(request: Request, exc: Exception) -> Response:
    # the file itself is damaged or read-only: say so (503), not a bare 500
    problem = database_problem(exc)
    if problem is None:
        raise exc
    message = f"the database {problem}"
    retry = {"Retry-After": str(OUTAGE_RETRY_S)}
    if is_api_path(request.url.path):
        return JSONResponse({"error": message}, status_code=503, headers=retry)
    page = pages.error_page(request, 503, message)
    page.headers.update(retry)
    return page


async def _http_error(request: Request, exc: HTTPException) -> Response:
    headers = getattr(exc, "headers", None)
    if is_api_path(request.url.path) or exc.status_code == 413:
        detail = exc.detail if exc.status_code != 404 else f"not found: {request.url.path}"
        return JSONResponse({"error": detail}, status_code=exc.status_code, headers=headers)
    return pages.error_page(request, exc.status_code, str(exc.detail))


async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
    message = _validation_message(exc)
    if is_api_path(request.url.path):
        details: list[dict[str, object]] = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", "")} for e in exc.errors()
        ]
        return JSONResponse({"error": message, "details": details}, status_code=422)
    return pages.error_page(request, 400, message)


def _plotly_js() -> FileResponse:
    return FileResponse(
        plotly_js_path(),
        media_type="text/javascript",
        headers={"Cache-Control": "public, max-age=86400"},
    )


def _add_routes(app: FastAPI, proxy: Proxy | None) -> None:
    """Static files, the API (the capture hot path first), OTLP, the proxy, then the pages."""
    app.add_api_route("/vendor/plotly.min.js", _plotly_js, include_in_schema=False)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    for router in api.ROUTERS:
        app.include_router(router)
    # the capture hot path, matched before every other route (see api.capture_fast)
    app.router.routes[:0] = api.fast_routes()
    app.include_router(otlp.router)
    if proxy is not None:
        # after the OTLP routes (never forwarded): the OpenAI API's paths under /v1 go to
        # the upstream, any method; the proxy answers 404 for the rest (web.proxy.PROXIED)
        app.router.routes.append(Route("/v1/{path:path}", proxy, include_in_schema=False))
    for router in pages.ROUTERS:
        app.include_router(router)


def _add_middleware(
    app: FastAPI,
    token: str | None,
    allowed_hosts: Iterable[str] | None,
    max_body: int,
    user_header: UserHeader | None = None,
) -> None:
    # Added last = runs first: the size limit, then host/origin/token checks, then the
    # API's 405s (simeval.web.methods) right before the routes.
    # the API router's own routes: the app lists an included router as one opaque entry
    app.add_middleware(
        MethodMiddleware,
        routes=lambda: [*app.routes, *(r for router in api.ROUTERS for r in router.routes)],
    )
    app.add_middleware(DocsHeadersMiddleware, page_csp=pages.CSP)
    app.add_middleware(
        GuardMiddleware,
        token=token or None,
        allowed_hosts=allowed_hosts,
        sessions=app.state.sessions,
        identities=app.state.identities,
        refuse_page=pages.error_page,
        user_header=user_header,
    )
    # OTLP exporters send their batches whole, as large as they come: those paths are bounded
    # by what the OTLP reader takes (``MAX_INFLATED``), not by the API's limit
    otlp_limit = max(max_body, MAX_INFLATED)
    app.add_middleware(BodyLimitMiddleware, max_body=max_body, limits={"/v1/": otlp_limit})
    if user_header is not None:
        # X-Forwarded-For/Proto from the proxy, as uvicorn would apply them, but inside the
        # record of the connection's own address: only that one may name a user
        trusted = "*" if user_header.everyone else [str(n) for n in user_header.networks]
        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=trusted)
        app.add_middleware(PeerMiddleware)
