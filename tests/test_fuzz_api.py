"""Schemathesis over ``/openapi.json``: generated requests to every operation (a bounded,
seeded number of examples each) on a real app with a real SQLite file; no 5xx, every response
as the schema documents it (status codes, bodies, content types)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from simeval.service import Service
from simeval.web.app import create_app

REF = "The capital of France is Paris."
_DB = Path(tempfile.mkdtemp(prefix="simeval-fuzz-")) / "fuzz.db"


def _seeded_app() -> Any:
    with Service(_DB) as svc:
        svc.create_eval("capital", REF)
        svc.test_eval("capital", "q", REF)
        svc.activate_eval("capital")
        svc.capture("q", REF)
    # the test client's host name is "testserver"
    return create_app(db=str(_DB), allowed_hosts=["testserver", "127.0.0.1"])


schema = schemathesis.openapi.from_asgi("/openapi.json", _seeded_app())
CHECKS = (
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
)


@pytest.mark.slow
@schema.parametrize()
@settings(
    max_examples=15,
    derandomize=True,  # seeded: the same examples every run
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_schema(case: Any) -> None:
    case.call_and_validate(checks=CHECKS)


def test_the_schema_documents_the_error_responses() -> None:
    doc = create_app(db=str(_DB)).openapi()
    for path, ops in doc["paths"].items():
        if not path.startswith("/api/"):
            continue
        for op in ops.values():
            for status in ("400", "404", "409", "413", "422"):
                assert status in op["responses"], (path, status)
