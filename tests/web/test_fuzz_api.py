"""Schemathesis over ``/openapi.json``: generated requests to every operation (a bounded,
seeded number of examples each) on a real app with a real SQLite file; no 5xx, every response
as the schema documents it (status codes, bodies, content types).

``test_every_phase_and_check_against_a_real_server`` runs Schemathesis's own runner (``st
run``) against a real ``simeval serve`` on SQLite and on PostgreSQL: every operation, every
phase (examples, coverage, fuzzing, stateful sequences along the links it infers), every
check but ``positive_data_acceptance`` (the service refuses on purpose what JSON Schema
cannot say: a NUL, a lone surrogate, a date that does not exist, an unknown eval), within a
bounded budget: ``SIMEVAL_FUZZ_SECONDS`` (default 45) per backend.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
from simeval.web.server_process import running_server

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


# a refusal for a body too large (413) or of the wrong media type (415) is a refusal too
ST_CONFIG = """
[checks.negative_data_rejection]
expected-statuses = [400, 404, 405, 409, 413, 415, 422]
"""


def _seed(db: str) -> None:
    with Service(db) as svc:
        svc.create_eval("capital", REF)
        svc.test_eval("capital", "q", REF)
        svc.activate_eval("capital")
        svc.capture("q", REF, conversation_id="c1")


def _outcome(ndjson: Path) -> tuple[int, list[str], int]:
    """Server errors seen, the failures found (check, method, path, status) and the cases."""
    errors, failures, cases = 0, [], 0
    for line in ndjson.read_text().splitlines():
        event = json.loads(line).get("ScenarioFinished")
        if not event:
            continue
        recorder = event.get("recorder") or {}
        cases += len(recorder.get("cases", {}))
        for case_id, interaction in recorder.get("interactions", {}).items():
            status = (interaction.get("response") or {}).get("status_code") or 0
            errors += status >= 500
            for check in recorder.get("checks", {}).get(case_id, []):
                if check.get("status") == "failure":
                    request = interaction.get("request", {})
                    failures.append(
                        f"{check['name']} {request.get('method')} "
                        f"{str(request.get('uri'))[:120]} -> {status}"
                    )
    return errors, failures, cases


@pytest.mark.slow
def test_every_phase_and_check_against_a_real_server(db: str, tmp_path: Path) -> None:
    _seed(db)
    config = tmp_path / "schemathesis.toml"
    config.write_text(ST_CONFIG)
    report = tmp_path / "run.ndjson"
    seconds = int(os.environ.get("SIMEVAL_FUZZ_SECONDS", "45"))
    with running_server(db) as (url, _proc):
        run = subprocess.run(
            [
                str(Path(sys.executable).with_name("st")),
                "--config-file",
                str(config),
                "run",
                f"{url}/openapi.json",
                "--checks",
                "all",
                "--exclude-checks",
                "positive_data_acceptance",
                "--phases",
                "examples,coverage,fuzzing,stateful",
                "--max-examples",
                "10",
                "--max-time",
                str(seconds),
                "--seed",
                "21",
                "--workers",
                "1",
                "--no-color",
                "--report",
                "ndjson",
                "--report-ndjson-path",
                str(report),
            ],
            capture_output=True,
            text=True,
            timeout=seconds + 300,
            cwd=tmp_path,
        )
    errors, failures, cases = _outcome(report)
    assert errors == 0, failures
    assert failures == [], "\n".join(failures)
    assert run.returncode == 0, run.stdout[-3000:]
    assert cases > 100  # it did run
