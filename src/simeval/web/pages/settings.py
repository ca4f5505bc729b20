"""The settings page: automatic evaluation, retention, cleanup now, and where the store is."""

from __future__ import annotations

import re

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from simeval.errors import InvalidInput, SimevalError
from simeval.scoring.options import RETENTION_CHOICES
from simeval.service import UNSET
from simeval.service.models import CleanupOut
from simeval.service.settings import DEFAULT_META_KEYS, MAX_DECLARED_KEYS
from simeval.service.store_names import describe_url
from simeval.web.otlp_export import follow_setting
from simeval.web.pages._render import form_text, redirect, render, service_of
from simeval.web.security import checked_form

router = APIRouter(include_in_schema=False)

RETENTION_LABELS = [(None, "Keep forever")] + [(d, f"{d} days") for d in RETENTION_CHOICES]


def _settings_page(
    request: Request, error: str | None = None, status: int = 200, cleaned: CleanupOut | None = None
) -> Response:
    service = service_of(request)
    return render(
        request,
        "settings.html",
        {
            "settings": service.get_settings(),
            "choices": RETENTION_LABELS,
            "default_keys": DEFAULT_META_KEYS,
            "max_keys": MAX_DECLARED_KEYS,
            "error": error,
            "cleaned": cleaned,
            "db_url": describe_url(service.url),  # a server URL's password hidden
            # where engines connect: this server's address as the browser reached it
            "server_url": str(request.base_url).rstrip("/"),
            "upstream": getattr(getattr(request.app.state, "proxy", None), "upstream", None),
            # the scores-out exporter this server runs (the setting is taken at start)
            "exporter": getattr(request.app.state, "otlp_export", None),
        },
        status=status,
    )


@router.get("/settings")
def settings_page(request: Request) -> Response:
    """Automatic evaluation and retention."""
    return _settings_page(request)


@router.post("/settings")
async def save_settings(request: Request) -> Response:
    """Save the settings form."""
    form = await checked_form(request)
    raw = form_text(form, "retention_days")
    try:
        try:
            retention = int(raw) if raw else None
        except ValueError:
            raise InvalidInput(f"retention must be a number of days, not {raw!r}") from None
        keys = form.get("indexed_meta")
        # declaring a metadata key indexes every stored capture: off the event loop, so the
        # server's other requests (captures, health) do not wait for it
        await run_in_threadpool(
            service_of(request).update_settings,
            auto_evaluate=form.get("auto_evaluate") is not None,
            retention_days=retention,
            otlp_export=form_text(form, "otlp_export"),
            # one key a line or comma-separated; a form without the field keeps the setting
            indexed_meta=UNSET
            if keys is None
            else [k.strip() for k in re.split(r"[,\n]", str(keys)) if k.strip()],
        )
    except SimevalError as exc:
        return _settings_page(request, str(exc), exc.status_code)
    # the exporter follows the setting (it may wait a moment for the old one: off the loop)
    await run_in_threadpool(follow_setting, request.app.state, service_of(request))
    return redirect("/settings", "settings")


@router.post("/settings/cleanup")
async def run_cleanup(request: Request) -> Response:
    """Delete what is older than the retention period, now."""
    await checked_form(request)
    out = await run_in_threadpool(service_of(request).cleanup)  # a long delete: off the loop
    return _settings_page(request, cleaned=out)
