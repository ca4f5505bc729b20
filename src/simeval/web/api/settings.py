"""Settings and the retention clean-up."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import Field

from simeval.scoring.options import RETENTION_CHOICES, RETENTION_TEXT
from simeval.service.models import (
    CleanupOut,
    SettingsOut,
)
from simeval.service.settings import MAX_DECLARED_KEYS, MAX_INDEXED_KEY
from simeval.web import schema as declared
from simeval.web.api.common import ServiceDep, json_reply
from simeval.web.otlp_export import follow_setting
from simeval.web.schema import (
    OTLP_URL,
    Body,
    Integer,
    StrictBool,
)

router = APIRouter(prefix="/api", responses=declared.ERRORS)


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
    indexed_meta: list[str] | None = Field(
        None,
        # declared as the service checks it (``check_indexed_meta``, whose 400 names the
        # problem): 1-64 printable characters (str.isprintable: no \p{C}, no \p{Z} but the
        # space), not only spaces
        json_schema_extra={
            "maxItems": MAX_DECLARED_KEYS,
            "items": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_INDEXED_KEY,
                "pattern": r"^(?:[^\p{C}\p{Z}]| )*[^\p{C}\p{Z}](?:[^\p{C}\p{Z}]| )*$",
            },
        },
        description="Metadata keys to index beside the defaults (engine, model, ...): filters "
        "on them are answered by the database; [] or null declares none. Stored captures' "
        "values are indexed before the answer.",
    )


@router.get("/settings", response_model=SettingsOut, tags=["settings"])
def get_settings(service: ServiceDep) -> JSONResponse:
    """Automatic evaluation and retention."""
    return json_reply(service.get_settings())


@router.patch("/settings", response_model=SettingsOut, tags=["settings"])
def update_settings(body: SettingsIn, service: ServiceDep, request: Request) -> JSONResponse:
    """Change settings; ``retention_days: null`` keeps everything forever."""
    kwargs: dict[str, Any] = {"auto_evaluate": body.auto_evaluate}
    for name in {"retention_days", "otlp_export"} & body.model_fields_set:
        kwargs[name] = getattr(body, name)
    if "indexed_meta" in body.model_fields_set:
        kwargs["indexed_meta"] = body.indexed_meta or []
    out = service.update_settings(**kwargs)
    follow_setting(request.app.state, service)  # the exporter follows the setting now
    return json_reply(out)


@router.post("/cleanup", response_model=CleanupOut, tags=["settings"])
def cleanup(service: ServiceDep) -> JSONResponse:
    """Delete what is older than the retention period now (also done by `simeval cleanup`)."""
    return json_reply(service.cleanup())
