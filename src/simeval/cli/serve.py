"""``simeval serve``: Eval Studio and the HTTP API on one local server."""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING, Any

import click

from simeval.checks import check_url
from simeval.cli.common import UserError, db_option
from simeval.errors import InvalidInput

if TYPE_CHECKING:
    from fastapi import FastAPI

    from simeval.web.sso import UserHeader


def listen(host: str, port: int) -> socket.socket:
    """A bound listening socket, so a busy port is a one-line error instead of a log trace."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        infos = socket.getaddrinfo(host, port, family, socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UserError(f"cannot listen on {host}: {exc.strerror}") from None
    # The protocol must be given: asyncio only sets TCP_NODELAY on the accepted connections of
    # a socket whose proto is IPPROTO_TCP, and without it every response written in two parts
    # (headers, body) waits ~40 ms for the client's delayed ACK.
    sock = socket.socket(infos[0][0], socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(infos[0][4])
    except OSError as exc:
        sock.close()
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def db_label(url: str) -> str:
    """A SQLite file as its path; any other URL without its password."""
    from simeval.service.store_names import describe_url, sqlite_file

    path = sqlite_file(url)
    if path is not None:
        return path or "in memory"
    return describe_url(url)


def check_upstream(upstream: str) -> str:
    """An upstream base URL (http or https, with a host), else a one-line ``UserError``."""
    try:
        upstream = check_url(upstream, "--upstream", "https://api.openai.com/v1")
    except InvalidInput as exc:
        raise UserError(str(exc)) from None
    try:
        import httpx  # noqa: F401 - the proxy extra
    except ImportError:  # pragma: no cover - a bare install
        raise UserError("the proxy needs httpx: pip install 'simeval[proxy]'") from None
    return upstream


def announce(app: FastAPI, url: str, token: str | None, upstream: str | None) -> None:
    """What a single server prints as it starts: where the studio, the API, OTLP and the
    proxy answer, how it is guarded, where scores go, and the database."""
    users = app.state.user_header is not None or app.state.identities.users_exist()
    guarded = " (sign-in required)" if users else " (token required)" if token else ""
    click.echo(f"Eval Studio: {url}{guarded}")
    click.echo(f"API docs:    {url}/docs   engines post to {url}/api/capture")
    service = app.state.service
    click.echo(f"OpenTelemetry: OTLP/HTTP traces to {url}/v1/traces")
    if upstream:
        click.echo(f"Proxy:       {url}/v1 -> {upstream}")
    exporter = app.state.otlp_export
    if exporter is not None:
        click.echo(f"Scores out:  {exporter.url} (OTLP {exporter.encoding})")
    click.echo(f"Database:    {db_label(service.url)}")
    if not service.list_evals(include_archived=True):
        click.echo("No evals yet: open the studio and click 'Create an example eval'.")
    click.echo("Press Ctrl+C to stop.")


def _user_header(header: str | None, create: str, allow_ips: str | None) -> UserHeader | None:
    """The SSO header of ``--user-header`` (None without it), else a one-line error."""
    if create not in ("yes", "no"):
        raise UserError(f"--user-header-create must be yes or no, not {create[:40]!r}")
    if header is None:
        return None
    from simeval.web.sso import UserHeader

    return UserHeader(header, allow_ips or "", create == "yes")


def _has_users(db: str | None) -> bool:
    """Whether the database has users (then every request needs one, any address is safe)."""
    from simeval.service import Service

    with Service(db) as svc:
        return svc.users.has_users()


def server_url(host: str, port: int) -> str:
    """The address a browser opens for a server on ``host``:``port`` (an IPv6 host bracketed)."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


@click.command()
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on. Anything but loopback needs users (simeval users) or "
    "SIMEVAL_TOKEN.",
)
@click.option(
    "--port",
    default=8000,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port (0 = any free port).",
)
@db_option
@click.option(
    "--max-body",
    default=1_048_576,
    show_default=True,
    type=click.IntRange(1),
    help="Largest request body in bytes; larger ones get 413 (OTLP's /v1/* take up to "
    "64 MiB, or this if larger).",
)
@click.option(
    "--log-level",
    default="warning",
    show_default=True,
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    help="Server log level (info logs every request).",
)
@click.option(
    "--upstream",
    default=None,
    help="Also proxy an OpenAI-compatible API under /v1 and capture its replies "
    "(as `simeval proxy`), e.g. https://api.openai.com/v1.",
)
@click.option(
    "--lock-wait",
    default=5.0,
    show_default=True,
    type=click.FloatRange(0.05, 600),
    help="Seconds a capture waits for the database's write lock before a 503 with Retry-After.",
)
@click.option(
    "--idf-dir",
    default=None,
    type=click.Path(file_okay=False),
    help="Directory of the corpus IDF tables the API may name in options.idf "
    "(default: the database file's directory).",
)
@click.option(
    "--forwarded-allow-ips",
    default=None,
    help="Addresses of a TLS proxy trusted for X-Forwarded-Proto/For (e.g. 127.0.0.1): "
    "behind it, cookies are marked Secure.",
)
@click.option(
    "--otlp-export",
    default=None,
    metavar="URL",
    help="Send each result as an OpenTelemetry gen_ai.evaluation.result event to this OTLP/HTTP "
    "endpoint (e.g. a collector's http://127.0.0.1:4318; /v1/logs is appended), in the "
    "background. Default: the stored setting (simeval settings --otlp-export).",
)
@click.option(
    "--otlp-join-mb",
    type=click.IntRange(1, 65_536),
    default=64,
    show_default=True,
    metavar="MB",
    help="Memory the OTLP calls waiting for their other half (a span for its log records, or "
    "records for their span) may hold; past it the oldest are stored early, as their wait "
    "was over, and counted on /api/health (otlp.settled_early).",
)
@click.option(
    "--otlp-score-cut",
    is_flag=True,
    help="Score OTLP calls whose text was cut (by the sender, or past the store's 1,000,000 "
    "characters) on the text kept; by default they are stored unscored, with why in their "
    "metadata (cut).",
)
@click.option(
    "--alert-interval",
    type=click.FloatRange(0, 86_400),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="Evaluate the alert rules (simeval alerts) this often, besides after each stored "
    "capture; 0 watches no rules.",
)
@click.option(
    "--workers",
    default="1",
    show_default=True,
    metavar="N",
    help="Server processes sharing the port (1-64), for a team's server (PostgreSQL, or "
    "SQLite on one machine): requests run in parallel on spare cores, one process runs the "
    "alert watcher, /api/health names the worker that answered.",
)
@click.option(
    "--user-header",
    default=None,
    metavar="HEADER",
    help="Sign people in through the team's SSO proxy (oauth2-proxy, Authelia, a cloud access "
    "proxy): this header (e.g. X-Forwarded-User) names the user on requests from the "
    "--forwarded-allow-ips addresses, and is ignored from any other. Every request then needs "
    "a user.",
)
@click.option(
    "--user-header-create",
    default="yes",
    show_default=True,
    metavar="yes|no",
    help="Make a name the --user-header gives that is not yet a user a viewer (no: refuse it).",
)
def serve(
    host: str,
    port: int,
    db: str | None,
    max_body: int,
    log_level: str,
    lock_wait: float,
    idf_dir: str | None,
    forwarded_allow_ips: str | None,
    upstream: str | None,
    otlp_export: str | None,
    otlp_join_mb: int,
    otlp_score_cut: bool,
    alert_interval: float,
    workers: str,
    user_header: str | None,
    user_header_create: str,
) -> None:
    """Start Eval Studio and the HTTP API (JSON under /api, docs at /docs).

    Listens on 127.0.0.1 by default: only this machine can connect. To listen on another
    address set a token in SIMEVAL_TOKEN; the API then needs 'Authorization: Bearer TOKEN'
    and the studio asks for it once.

    \b
    Examples:
        simeval serve
        simeval serve --port 8080 --db evals.db
        SIMEVAL_TOKEN=$(openssl rand -hex 16) simeval serve --host 0.0.0.0
        simeval serve --upstream https://api.openai.com/v1
        simeval serve --otlp-export http://127.0.0.1:4318
        simeval serve --db postgresql+psycopg://simeval@db/evals --forwarded-allow-ips 127.0.0.1
        simeval serve --db postgresql+psycopg://simeval@db/evals --workers 4
        simeval serve --user-header X-Forwarded-User --forwarded-allow-ips 127.0.0.1
    """
    import uvicorn

    from simeval.web.app import create_app
    from simeval.web.security import check_bind
    from simeval.web.workers import check_shared_db, check_workers

    processes = check_workers(workers)  # a SimevalError: one line, exit 2

    if upstream is not None:
        upstream = check_upstream(upstream)
    if otlp_export is not None:
        from simeval.web.otlp_export import check_export_url

        check_export_url(otlp_export)  # a SimevalError: one line, exit 2
    token = os.environ.get("SIMEVAL_TOKEN") or None
    sso = _user_header(user_header, user_header_create, forwarded_allow_ips)
    # a SimevalError: "error: ...", exit 2; with SSO every request needs a user
    check_bind(host, token, sso is not None or _has_users(db))
    uvicorn_options: dict[str, Any] = {
        "log_level": log_level,
        "access_log": log_level in ("info", "debug"),
        "server_header": False,
        # with SSO the app applies the proxy headers itself, after noting the connection's
        # own address (simeval.web.sso): uvicorn must not rewrite the client first
        "proxy_headers": sso is None,
        "forwarded_allow_ips": forwarded_allow_ips,
    }
    if processes > 1:
        from simeval.cli.serve_workers import WorkerSettings, serve_workers
        from simeval.service.store_names import resolve_db_url

        resolved = resolve_db_url(db)  # every worker opens this one database
        check_shared_db(resolved)  # a SimevalError: one line, exit 2
        settings = WorkerSettings(
            token=token,
            max_body=max_body,
            lock_wait=lock_wait,
            idf_dir=idf_dir,
            upstream=upstream,
            otlp_export=otlp_export,
            alert_interval=alert_interval or None,
            otlp_join_bytes=otlp_join_mb * 1024 * 1024,
            otlp_score_cut=otlp_score_cut,
            user_header=user_header if sso is not None else None,
            user_header_create=user_header_create == "yes",
            forwarded_allow_ips=forwarded_allow_ips,
        )
        sock = listen(host, port)
        url = server_url(host, sock.getsockname()[1])
        serve_workers(sock, url, resolved, db_label(resolved), processes, settings, uvicorn_options)
        return
    sock = listen(host, port)
    app = create_app(
        db,
        token=token,
        max_body=max_body,
        lock_wait=lock_wait,
        idf_dir=idf_dir,
        upstream=upstream,
        otlp_export=otlp_export,
        alert_interval=alert_interval or None,
        otlp_join_bytes=otlp_join_mb * 1024 * 1024,
        otlp_score_cut=otlp_score_cut,
        user_header=sso,
    )
    announce(app, server_url(host, sock.getsockname()[1]), token, upstream)
    config = uvicorn.Config(app, **uvicorn_options)
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        # uvicorn shuts down on Ctrl+C, then raises it again: a stop asked for is a clean
        # exit (code 0, no "Aborted!"), so `make run` ends without an error either
        pass
    finally:
        sock.close()
    click.echo("Stopped.")
