"""``simeval proxy``: an OpenAI-compatible proxy that captures what passes through it."""

from __future__ import annotations

import os

import click

from simeval.cli.common import db_option


@click.command()
@click.option(
    "--upstream",
    required=True,
    help="The OpenAI-compatible base URL to forward to, e.g. https://api.openai.com/v1.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    default=8001,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port (0 = any free port).",
)
@db_option(purpose="the captures go to")
@click.option(
    "--queue",
    "queue_size",
    default=10_000,
    show_default=True,
    type=click.IntRange(1),
    help="Replies waiting for the store at most; more are dropped (and counted).",
)
@click.option(
    "--max-body",
    default=32 * 1024 * 1024,
    show_default=True,
    type=click.IntRange(1),
    help="Largest request body in bytes; larger ones get 413.",
)
@click.option(
    "--log-level",
    default="warning",
    show_default=True,
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    help="Server log level (info logs every request line, never its headers).",
)
def proxy(
    upstream: str,
    host: str,
    port: int,
    db: str | None,
    queue_size: int,
    max_body: int,
    log_level: str,
) -> None:
    """Forward an OpenAI-compatible API and capture every reply it passes on.

    Point the engine's base URL at the proxy: each request to an OpenAI API path under /v1
    (chat/completions, responses, embeddings, models, files...) goes to the upstream
    unchanged (its Authorization header too, never stored or logged) and the reply comes back
    unchanged, streamed as it arrives; other paths get 404. Completed replies of
    /v1/chat/completions, /v1/completions and /v1/responses are stored as captures and scored
    by the active evals, off the client's path. The header X-Simeval-Conversation sets the
    conversation id. OTLP exporters may send /v1/traces, /v1/logs and /v1/metrics here too:
    captured, never forwarded. Listening on anything but loopback needs SIMEVAL_TOKEN, which
    clients then send in X-Simeval-Token; it is never forwarded. `simeval serve --upstream
    URL` serves the same proxy beside the studio.

    \b
    Examples:
        simeval proxy --upstream https://api.openai.com/v1
        simeval proxy --upstream http://127.0.0.1:11434/v1 --port 8001 --db evals.db
        # then: OpenAI(base_url="http://127.0.0.1:8001/v1")
    """
    import uvicorn

    from simeval.cli.serve import check_upstream, db_label, listen, server_url
    from simeval.web.proxy import create_proxy_app
    from simeval.web.security import check_bind

    upstream = check_upstream(upstream)
    token = os.environ.get("SIMEVAL_TOKEN") or None
    check_bind(host, token)
    sock = listen(host, port)
    app = create_proxy_app(upstream, db, token, queue_size=queue_size, max_body=max_body)
    url = server_url(host, sock.getsockname()[1])
    click.echo(f"Proxy: {url}/v1 -> {upstream}" + (" (X-Simeval-Token required)" if token else ""))
    click.echo(f"Database: {db_label(app.state.service.url)}")
    click.echo("Press Ctrl+C to stop.")
    config = uvicorn.Config(
        app, log_level=log_level, access_log=log_level in ("info", "debug"), server_header=False
    )
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
