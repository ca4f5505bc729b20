"""``simeval serve --workers N``: the parent process of N workers on one port.

It binds the port, opens the database once (migrating it before any worker opens it), prints
the banner, and runs uvicorn's multi-process supervisor on the bound socket: the workers are
``simeval.web.workers.worker_app`` (see there for what each runs and what they share).
SIGINT or SIGTERM stops every worker, each flushing what it holds, then the parent.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from simeval.service import Service


@dataclass(frozen=True)
class WorkerSettings:
    """The app's options every worker of ``serve --workers N`` is built with."""

    token: str | None
    max_body: int
    lock_wait: float
    idf_dir: str | None
    upstream: str | None
    otlp_export: str | None
    alert_interval: float | None
    otlp_join_bytes: int
    otlp_score_cut: bool = False
    user_header: str | None = None
    user_header_create: bool = True
    forwarded_allow_ips: str | None = None


def serve_workers(
    sock: socket.socket,
    url: str,
    db_url: str,
    db_text: str,
    workers: int,
    settings: WorkerSettings,
    uvicorn_options: dict[str, Any],
) -> None:
    """Serve ``db_url`` (shown as ``db_text``) with ``workers`` processes on the bound ``sock``
    (reached at ``url``) until SIGINT/SIGTERM."""
    import uvicorn
    from uvicorn.config import STARTUP_FAILURE
    from uvicorn.supervisors import Multiprocess

    from simeval.service import Service
    from simeval.web.workers import (
        RUN_DIR_ENV,
        WorkerConfig,
        new_run_dir,
        new_secret,
        remove_run_dir,
    )

    try:
        with Service(db_url) as service:  # migrated here, once, before the workers open it
            _banner(service, url, db_text, workers, settings)
    except BaseException:
        sock.close()
        raise
    config = WorkerConfig(
        db=db_url,
        workers=workers,
        csrf_secret=new_secret(),
        token=settings.token,
        max_body=settings.max_body,
        lock_wait=settings.lock_wait,
        idf_dir=settings.idf_dir,
        upstream=settings.upstream,
        otlp_export=settings.otlp_export,
        alert_interval=settings.alert_interval,
        otlp_join_bytes=settings.otlp_join_bytes,
        otlp_score_cut=settings.otlp_score_cut,
        user_header=settings.user_header,
        user_header_create=settings.user_header_create,
        forwarded_allow_ips=settings.forwarded_allow_ips,
        parent_pid=os.getpid(),
    )
    run = new_run_dir(config)
    os.environ[RUN_DIR_ENV] = str(run)  # the spawned workers inherit it
    try:
        uconfig = uvicorn.Config(
            "simeval.web.workers:worker_app", factory=True, workers=workers, **uvicorn_options
        )
        supervisor = Multiprocess(uconfig, sockets=[sock])
        supervisor.run()  # SIGINT/SIGTERM: every worker stopped and joined
    finally:
        os.environ.pop(RUN_DIR_ENV, None)
        remove_run_dir(run)
        sock.close()
    if any(p.exitcode == STARTUP_FAILURE for p in supervisor.processes):
        raise click.ClickException("a worker failed to start (see its error above)")
    click.echo("Stopped.")


def _banner(
    service: Service, url: str, db_text: str, workers: int, settings: WorkerSettings
) -> None:
    from simeval.web.otlp_export import check_export_url

    click.echo(f"Eval Studio: {url}" + (" (token required)" if settings.token else ""))
    click.echo(f"API docs:    {url}/docs   engines post to {url}/api/capture")
    click.echo(f"OpenTelemetry: OTLP/HTTP traces to {url}/v1/traces")
    if settings.upstream:
        click.echo(f"Proxy:       {url}/v1 -> {settings.upstream}")
    export = settings.otlp_export or service.get_settings().otlp_export
    if export:
        click.echo(f"Scores out:  {check_export_url(export)} (from every worker)")
    click.echo(f"Database:    {db_text}")
    watch = "one of them watches the alert rules" if settings.alert_interval else "no alerts"
    click.echo(f"Workers:     {workers} processes on one port ({watch})")
    if not service.list_evals(include_archived=True):
        click.echo("No evals yet: open the studio and click 'Create an example eval'.")
    click.echo("Press Ctrl+C to stop.")
