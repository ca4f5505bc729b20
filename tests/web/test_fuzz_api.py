"""Schemathesis over ``/openapi.json``: generated requests to every operation (a bounded,
seeded number of examples each) on a real app with a real SQLite file; no 5xx, every response
as the schema documents it (status codes, bodies, content types).

``test_every_phase_and_check_against_a_real_server`` runs Schemathesis's own runner (``st
run``) against a real ``simeval serve`` on SQLite and on PostgreSQL: every operation, every
phase (examples, coverage, fuzzing, stateful sequences along the links the schema declares,
``simeval.web.schema.LINKS``), every check, ``positive_data_acceptance`` among them: what the
schema says is valid is accepted (its patterns say what the service refuses: a NUL, a year
outside 1000-8999, a control character in a capture key...) and what it says is invalid is
refused. Within a bounded budget: ``SIMEVAL_FUZZ_SECONDS`` (default 20) for each of three
groups of phases, ``SIMEVAL_FUZZ_EXAMPLES`` (default 10) examples an operation,
``SIMEVAL_FUZZ_SEED`` (default 21) the seed; a longer run is the same test with larger ones
(``pytest -s`` prints what each group ran).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Callable
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
# Requests are made as an admin: the users routes are fuzzed too, and a user that the fuzzer
# adds (POST /api/users) cannot lock the rest of the run out, as it would in local mode
ADMIN = "fuzz-admin-q7"


def _admin_key(svc: Service) -> str:
    return svc.users.add_user(ADMIN, "admin").key


def _seeded_app() -> tuple[Any, str]:
    """The fuzzed app on a database with an eval and a capture; the admin's API key."""
    with Service(_DB) as svc:
        svc.create_eval("capital", REF)
        svc.test_eval("capital", "q", REF)
        svc.activate_eval("capital")
        svc.capture("q", REF)
        key = _admin_key(svc)
    # the test client's host name is "testserver"
    return create_app(db=str(_DB), allowed_hosts=["testserver", "127.0.0.1"]), key


_APP, _KEY = _seeded_app()
AS_ADMIN = {"Authorization": f"Bearer {_KEY}"}
schema = schemathesis.openapi.from_asgi("/openapi.json", _APP, headers=AS_ADMIN)
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
    case.call_and_validate(checks=CHECKS, headers=AS_ADMIN)


def test_the_schema_documents_the_error_responses() -> None:
    doc = create_app(db=str(_DB)).openapi()
    for path, ops in doc["paths"].items():
        if not path.startswith("/api/"):
            continue
        for op in ops.values():
            for status in ("400", "404", "409", "413", "422"):
                assert status in op["responses"], (path, status)


# a refusal for a body too large (413) or of the wrong media type (415) is a refusal too;
# the stateful phase follows the links the schema declares, not ones guessed from field names
# (which took a result's "3-1" for a capture id and a null run_id for a run's)
ST_CONFIG = """
# the first eval with a new language, stemming, prefix and tokenizer derives its background
# table once (seconds; more on a busy machine): slow, not wrong
[checks]
max_response_time = 60.0

[checks.negative_data_rejection]
expected-statuses = [400, 404, 405, 409, 413, 415, 422]

[phases.stateful.inference]
algorithms = []

# What no schema can say: a dataset file's bytes (any CSV, JSONL or Parquet, or none) and case
# ids unique within a body (JSON Schema's uniqueItems compares whole items); the service's
# 400 names the problem
[[operations]]
include-path = "/api/datasets/{name}/import"
checks.positive_data_acceptance.expected-statuses = ["2xx", 400, 404, 409]

[[operations]]
include-path = "/api/datasets"
include-method = "POST"
checks.positive_data_acceptance.expected-statuses = ["2xx", 400, 404, 409]

# A synonym of letters and digits may still be refused for what depends on the options: a stop
# word ("a"), one that the tokenizer splits (CJK characters), two that are one lowercased
# ("AAA", "aaa"); the service's 400 names it
[[operations]]
include-path = "/api/evals"
include-method = "POST"
checks.positive_data_acceptance.expected-statuses = ["2xx", 400, 404, 409]

[[operations]]
include-path = "/api/evals/{name}"
include-method = "PATCH"
checks.positive_data_acceptance.expected-statuses = ["2xx", 400, 404, 409]

# The run is made as one admin, whose name GET /api/users shows: a new key for it or a change
# of its role would sign the rest of the run out. These two are fuzzed in-process above
# (test_api_conforms_to_its_schema) and their answers tested in tests/web/test_api.py
[[operations]]
include-path = "/api/users/{name}"
include-method = "PATCH"
enabled = false

[[operations]]
include-path = "/api/users/{name}/key"
include-method = "POST"
enabled = false

# A listing's cursor is opaque: only one a page of that listing answered reads back, and a
# cursor with an offset is refused; the 400 says which
[[operations]]
include-path-regex = "^/api/(results|captures|conversations|runs)$"
include-method = "GET"
checks.positive_data_acceptance.expected-statuses = ["2xx", 400, 404]
"""


def _seed(db: str) -> str:
    """The fuzzed database's eval and capture; the admin's API key."""
    with Service(db) as svc:
        svc.create_eval("capital", REF)
        svc.test_eval("capital", "q", REF)
        svc.activate_eval("capital")
        svc.capture("q", REF, conversation_id="c1")
        return _admin_key(svc)


def _said(interaction: dict[str, Any]) -> str:
    """The start of a recorded answer's body (its error message)."""
    content = (interaction.get("response") or {}).get("content") or {}
    text = content.get("$base64", "") if isinstance(content, dict) else str(content)
    try:
        return base64.b64decode(text)[:200].decode("utf-8", "replace")
    except ValueError:
        return str(text)[:200]


def _mislabelled(
    recorder: dict[str, Any], case_id: str, check: dict[str, Any], doc: dict[str, Any]
) -> bool:
    """A failure that is not. An eval it archived, then found gone (see below); and a "valid
    data rejected" where the data was not valid: Schemathesis 4 calls a case positive when one
    part of it is (a path parameter near its length bound) while another is not (the body
    ``0`` where the schema wants an object), as the case's ``meta.components`` records; and
    it draws strings holding lone surrogates (``\\p{Cs}``, which Python strings can hold and
    its validator cannot judge) that JSON then carries as one character of another kind (an
    unassigned or private-use one). A case is positive here only when its body, decoded as
    the server decodes it, is valid against the operation's schema."""
    if check.get("name") == "ensure_resource_availability":
        # an eval archived (``POST /api/evals/{name}/archive``) is deleted, and answers 404
        # saying so; Schemathesis takes only a DELETE for a deletion
        answer = (recorder.get("interactions") or {}).get(case_id) or {}
        return "is archived (deleted)" in _said(answer)
    if check.get("name") != "positive_data_acceptance":
        return False
    case = ((recorder.get("cases") or {}).get(case_id) or {}).get("value") or {}
    modes = [
        part.get("mode") for part in ((case.get("meta") or {}).get("components") or {}).values()
    ]
    if "negative" in modes:
        return True
    op = doc["paths"].get(case.get("path", ""), {}).get(str(case.get("method", "")).lower())
    content = ((op or {}).get("requestBody") or {}).get("content") or {}
    schema = (content.get("application/json") or {}).get("schema")
    if schema is None or "body" not in case:
        return False
    return not _valid(doc, schema, case["body"])


def _valid(doc: dict[str, Any], schema: dict[str, Any], value: Any) -> bool:
    import jsonschema_rs  # Schemathesis's own validator

    whole = {**schema, "components": doc["components"]}
    return bool(jsonschema_rs.validator_for(whole).is_valid(value))


def _outcome(ndjson: Path, doc: dict[str, Any]) -> tuple[int, list[str], int, int]:
    """Server errors seen, the failures found (check, method, path, status), the cases, and
    the failures Schemathesis reported but ``_mislabelled`` set aside."""
    errors, failures, cases, set_aside = 0, [], 0, 0
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
                if check.get("status") != "failure":
                    continue
                if _mislabelled(recorder, case_id, check, doc):
                    set_aside += 1
                else:
                    request = interaction.get("request", {})
                    failures.append(
                        f"{check['name']} {request.get('method')} "
                        f"{str(request.get('uri'))[:120]} -> {status} {_said(interaction)}"
                    )
    return errors, failures, cases, set_aside


# each group of phases gets the budget: with one budget for all, fuzzing (which repeats until
# the budget is spent) would leave nothing to the stateful phase
PHASES = ("examples,coverage", "fuzzing", "stateful")


def _st_run(url: str, key: str, phases: str, config: Path, report: Path, seconds: int) -> list[str]:
    """``st run`` of the phases on the server at ``url``, as the user of API key ``key``:
    what went wrong (none: [])."""
    run = subprocess.run(
        [
            str(Path(sys.executable).with_name("st")),
            "--config-file",
            str(config),
            "run",
            f"{url}/openapi.json",
            "--checks",
            "all",
            "--phases",
            phases,
            "--max-examples",
            os.environ.get("SIMEVAL_FUZZ_EXAMPLES", "10"),
            "--max-time",
            str(seconds),
            # the first eval in a language, stemming and tokenizer derives its background table
            # (seconds on a busy machine): a slow answer, not a failure
            "--request-timeout",
            "60",
            "--seed",
            os.environ.get("SIMEVAL_FUZZ_SEED", "21"),
            "--header",
            f"Authorization: Bearer {key}",
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
        cwd=report.parent,
    )
    if not report.exists():  # it did not start (a bad configuration...)
        return [f"{phases}: exit {run.returncode}\n{run.stdout[-3000:]}{run.stderr[-3000:]}"]
    signed = urllib.request.Request(
        f"{url}/openapi.json", headers={"Authorization": f"Bearer {key}"}
    )
    with urllib.request.urlopen(signed, timeout=60) as answer:
        doc = json.load(answer)
    errors, failures, cases, set_aside = _outcome(report, doc)
    summary = [line.strip() for line in run.stdout.splitlines() if "generated" in line]
    print(
        f"{phases}: {cases} cases, {len(failures)} failures, {errors} 5xx "
        f"({set_aside} mislabelled set aside); {summary}"
    )
    if errors or failures:
        return [f"{phases}: {errors} 5xx", *failures]
    # st exits 1 for the failures it found, those set aside among them
    failed_only = run.returncode == 1 and set_aside > 0
    if (run.returncode != 0 and not failed_only) or cases <= 10:  # an error, or it did not run
        return [f"{phases}: exit {run.returncode}, {cases} cases\n{run.stdout[-3000:]}"]
    return []


@pytest.mark.slow
def test_every_phase_and_check_against_a_real_server(db: str, tmp_path: Path) -> None:
    key = _seed(db)
    config = tmp_path / "schemathesis.toml"
    config.write_text(ST_CONFIG)
    seconds = int(os.environ.get("SIMEVAL_FUZZ_SECONDS", "20"))
    problems = []
    with running_server(db) as (url, _proc):
        for phases in PHASES:
            report = tmp_path / f"{phases.replace(',', '-')}.ndjson"
            problems += _st_run(url, key, phases, config, report, seconds)
    assert problems == [], "\n".join(problems)


# -- where the schema and the service disagreed (Schemathesis's finds): each value is one the
# schema holds valid exactly when the service takes it
NAMES = [
    "\x1cname",  # str.strip takes "\x1c"-"\x1f" away, a JSON Schema "\s" does not hold them
    "\x85name",
    "\ufeffname",  # a JSON Schema "\s" holds U+FEFF; no name may
    "name\u3000",
    "na\u200bme",
    "²name",
    "ǅname",
    " . . ",
    "..",
    "\xa0name",
    "name\u2028",
    "n\u0301ame",
]
SYNONYMS = [
    [[0, "abcdefg"]],  # a whole number is its digits (YAML reads "9" as a number)
    [[5.0, "abcdefg"]],
    [[-7, 123456]],
    [[1.5, "abcdefg"]],
    [[True, "abcdefg"]],
    [["abcdefg", "hijklmn"]],
    [["abcdefg"]],
    [["AAA", 0]],  # any letters and digits (Schemathesis found "AAA" taken, the schema refusing)
    [[" Zürich ", "ciudad"]],
    # (not "东京": two tokens for the default tokenizer, one for "unicode"; a 400 names it)
    [["straße", "ciudad"]],
    [["a-b", "abcdefg"]],
    [["a b", "abcdefg"]],
    [["", "abcdefg", "hijklmn"]],
    [["don't", "abcdefg"]],
]
INDEXED = [
    ["engine2"],
    ["é"],
    ["a b"],
    [" "],
    [""],
    ["a\u200b"],
    ["a\u3000"],
    ["\t"],
    ["x" * 64],
    ["x" * 65],
    ["k:1/2"],
    ["same"] * 33,  # repeats counted, as maxItems counts them
    ["same"] * 32,
]


def _body_valid(doc: dict[str, Any], component: str, body: Any) -> bool:
    return _valid(doc, {"$ref": f"#/components/schemas/{component}"}, body)


def test_the_schema_holds_valid_what_the_service_takes(new_sqlite: Callable[..., str]) -> None:
    from fastapi.testclient import TestClient

    db = new_sqlite("agree.db")
    with Service(db) as svc:
        svc.create_eval("capital", REF)
        svc.capture("q", REF)  # capture 1
    with TestClient(create_app(db=db), base_url="http://127.0.0.1:8000") as client:
        doc = client.get("/openapi.json").json()
        calls: list[tuple[str, str, str, dict[str, Any]]] = []
        for i, name in enumerate(NAMES):
            named = name.replace("name", f"name{i}")
            case = {"input": "q", "references": [REF]}
            calls.append(("post", "/api/evals", "EvalIn", {"name": named, "references": [REF]}))
            calls.append(("post", "/api/datasets", "DatasetIn", {"name": named, "cases": [case]}))
        for groups in SYNONYMS:
            calls.append(("patch", "/api/evals/capital", "EvalPatch", {"synonyms": groups}))
            body = {"options": {"synonyms": groups}}
            calls.append(("patch", "/api/evals/capital", "EvalPatch", body))
        for keys in INDEXED:
            calls.append(("patch", "/api/settings", "SettingsIn", {"indexed_meta": keys}))
        # the options' own terms are checked even where the top-level ones win (Schemathesis
        # found options.synonyms = -1590651339 taken beside a top-level synonyms)
        groups = [["abcdefg", "hijklmn"]]
        for options in ({"synonyms": -1590651339}, {"required": 5}, {"synonyms": groups}):
            body = {"name": "both", "references": [REF], "options": options, "synonyms": groups}
            calls.append(("post", "/api/evals", "EvalIn", {**body, "required": ["paris"]}))
        # blank is what Python's strip takes away (U+0085 among it, U+FEFF not), as the
        # schema's patterns say: Schemathesis found case id "\x85\x85\x85\x85" refused
        for i, text in enumerate(["\x85\x85", "\ufeff", "x\x85", " \x1c "]):
            case = {"id": text, "input": "q", "references": [REF]}
            body = {"name": f"blank{i}", "cases": [case]}
            calls.append(("post", "/api/datasets", "DatasetIn", body))
            case = {"id": "c", "input": "q", "references": [text]}
            calls.append(
                ("post", "/api/datasets", "DatasetIn", {"name": f"ref{i}", "cases": [case]})
            )
            body = {"name": f"term{i}", "references": [REF], "required": [text, "paris"]}
            calls.append(("post", "/api/evals", "EvalIn", body))
        # a capture id is a JSON integer: not true, which pydantic read as 1
        for ids in ([True], [1], [1.0], ["1"], [0]):
            calls.append(("post", "/api/datasets/d/captures", "CapturesIn", {"capture_ids": ids}))
        disagree = []
        for method, path, component, body in calls:
            r = client.request(method, path, json=body)
            assert r.status_code < 500, (path, body, r.text)
            taken = r.status_code < 300
            if taken != _body_valid(doc, component, body):
                disagree.append(f"{method} {path} {body!r}: {r.status_code} {r.text[:120]}")
        assert disagree == []
