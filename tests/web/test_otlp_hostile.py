"""``POST /v1/traces`` fed hostile payloads through the real app on a real SQLite file: each
gets its 4xx with a one-line JSON error (never a 500), and nothing stored changes (the whole
database dumped before and after). Gzip bodies inflate within the cap, every member of them."""

from __future__ import annotations

import gzip
import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import zstandard
from fastapi.testclient import TestClient

from simeval.codings import MAX_MEMBERS
from simeval.web import create_app
from simeval.web.otlp import MAX_INFLATED, PARSING

pytest.importorskip("opentelemetry.proto")
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

JSON = {"content-type": "application/json"}
PROTO = {"content-type": "application/x-protobuf"}
GZIP = {**JSON, "content-encoding": "gzip"}
ZSTD = {**JSON, "content-encoding": "zstd"}
OUTPUT = {"key": "gen_ai.completion.0.content", "value": {"stringValue": "An answer."}}


def payload(attrs: list[Any], **span: Any) -> bytes:
    """An OTLP JSON export of one span (``span`` overrides its fields)."""
    one = {
        "traceId": "4bf92f3577b34da6a3ce929d0e0e4736",
        "spanId": "00f067aa0ba902b7",
        "name": "chat",
        "startTimeUnixNano": "1714560000000000000",
        "endTimeUnixNano": "1714560001500000000",
        "attributes": attrs,
        **span,
    }
    doc = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": [one]}]}]}
    return json.dumps(doc).encode()


def string_attr(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def nested_value(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"stringValue": "x"}
    for _ in range(levels):
        value = {"arrayValue": {"values": [value]}}
    return value


# protobuf, written by hand where the protobuf library itself refuses to build the message
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, data: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def proto_nested(levels: int) -> bytes:
    """An export whose one span has an attribute value nested ``levels`` arrays deep."""
    value = _field(1, b"x")  # AnyValue.string_value
    for _ in range(levels):
        value = _field(5, _field(1, value))  # AnyValue.array_value(ArrayValue.values)
    attribute = _field(1, b"gen_ai.request.model") + _field(2, value)
    span = _field(2, bytes.fromhex("00f067aa0ba902b7")) + _field(5, b"chat") + _field(9, attribute)
    return _field(1, _field(2, _field(2, span)))  # resource_spans / scope_spans / spans


def proto_with(value: AnyValue) -> bytes:
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.span_id = bytes.fromhex("00f067aa0ba902aa")
    span.name = "chat"
    span.attributes.append(KeyValue(key="gen_ai.request.model", value=value))
    span.attributes.append(
        KeyValue(key="gen_ai.completion.0.content", value=AnyValue(string_value="ok"))
    )
    return request.SerializeToString()


def any_nested(levels: int) -> AnyValue:
    value = AnyValue(string_value="x")
    for _ in range(levels):
        value = AnyValue(array_value={"values": [value]})
    return value


def gzip_bomb() -> bytes:
    """About 70 KB of gzip members that inflate past MAX_INFLATED (64 MB)."""
    member = gzip.compress(b" " * (1024 * 1024), 9)
    return member * (MAX_INFLATED // (1024 * 1024) + 1)


def in_members(body: bytes, n: int, compress: Any) -> bytes:
    """``body`` cut in ``n`` pieces, each compressed on its own (a member, a frame)."""
    step = -(-len(body) // n)
    pieces = [body[i : i + step] for i in range(0, len(body), step)]
    pieces += [b""] * (n - len(pieces))
    return b"".join(compress(p) for p in pieces)


def zstd(data: bytes) -> bytes:
    return zstandard.ZstdCompressor().compress(data)


# a span refused on its own: 200, the export's partial success counts it (the others kept)
REFUSED = 200
# name: (body, headers, the status it must get)
HOSTILE: dict[str, tuple[bytes, dict[str, str], int]] = {
    "JSON nested 1,000 deep": (b"[" * 1000 + b"]" * 1000, JSON, 400),
    "JSON nested 100,000 deep": (b"[" * 100_000, JSON, 400),
    "a span nested 1,000 deep": (
        payload([], attributes="deep").replace(b'"deep"', b"[" * 999 + b"]" * 999),
        JSON,
        400,
    ),
    "parts is 5": (
        payload([string_attr("gen_ai.output.messages", '[{"role": "assistant", "parts": 5}]')]),
        JSON,
        REFUSED,
    ),
    "parts is 5 in a structured value": (
        payload(
            [
                {
                    "key": "gen_ai.output.messages",
                    "value": {
                        "kvlistValue": {"values": [{"key": "parts", "value": {"intValue": "5"}}]}
                    },
                }
            ]
        ),
        JSON,
        REFUSED,
    ),
    "a negative end time": (payload([OUTPUT], endTimeUnixNano="-37800000000000000000"), JSON, 400),
    "a negative start time as a number": (payload([OUTPUT], startTimeUnixNano=-1), JSON, 400),
    "a time past 2^64 ns": (payload([OUTPUT], endTimeUnixNano=str(2**64)), JSON, 400),
    "a time that is an object": (payload([OUTPUT], endTimeUnixNano={"a": 1}), JSON, 400),
    "a time that is true": (payload([OUTPUT], endTimeUnixNano=True), JSON, 400),
    "a time of Infinity": (
        payload([OUTPUT], endTimeUnixNano=1).replace(
            b'"endTimeUnixNano": 1', b'"endTimeUnixNano": Infinity'
        ),
        JSON,
        400,
    ),
    "an intValue of 5,000 digits": (
        payload([OUTPUT, {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "9" * 5000}}]),
        JSON,
        400,
    ),
    "an intValue of Infinity": (
        payload([OUTPUT, {"key": "gen_ai.usage.x", "value": {"intValue": 1}}]).replace(
            b'"intValue": 1', b'"intValue": Infinity'
        ),
        JSON,
        400,
    ),
    "an attribute value nested 40 deep": (
        payload([OUTPUT, {"key": "gen_ai.request.model", "value": nested_value(40)}]),
        JSON,
        400,
    ),
    "messages as JSON text nested 100,000 deep": (
        payload([string_attr("gen_ai.output.messages", "[" * 100_000)]),
        JSON,
        REFUSED,
    ),
    "NaN in the usage": (
        payload([OUTPUT, {"key": "gen_ai.usage.x", "value": {"doubleValue": "NaN"}}]),
        JSON,
        REFUSED,
    ),
    "a span id of 300 characters": (payload([OUTPUT], spanId="ab" * 150), JSON, REFUSED),
    "a NUL in the output": (
        payload([string_attr("gen_ai.completion.0.content", "a\x00")]),
        JSON,
        REFUSED,
    ),
    "a gzip bomb": (gzip_bomb(), GZIP, 413),
    "damaged gzip": (b"\x1f\x8b\x08\x00 not gzip at all", GZIP, 400),
    "truncated gzip": (gzip.compress(payload([OUTPUT]))[:-5], GZIP, 400),
    "gzip with garbage after its member": (gzip.compress(payload([OUTPUT])) + b"junk", GZIP, 400),
    "deflate, not gzip": (payload([OUTPUT]), {**JSON, "content-encoding": "br"}, 415),
    "gzip of too many members": (
        in_members(payload([OUTPUT]), MAX_MEMBERS + 1, gzip.compress),
        GZIP,
        413,
    ),
    "a zstd bomb": (zstd(b" " * (MAX_INFLATED + 1)), ZSTD, 413),
    "zstd of too many frames": (in_members(payload([OUTPUT]), MAX_MEMBERS + 1, zstd), ZSTD, 413),
    "truncated zstd": (zstd(payload([OUTPUT]))[:-5], ZSTD, 400),
    "damaged zstd": (b"\x28\xb5\x2f\xfd not zstd at all", ZSTD, 400),
    "zstd with garbage after its frame": (zstd(payload([OUTPUT])) + b"junk", ZSTD, 400),
    "protobuf nested 200 deep": (proto_nested(200), PROTO, 400),
    "protobuf nested 100,000 deep": (proto_nested(100_000), PROTO, 400),
    "protobuf attribute nested 40 deep": (proto_with(any_nested(40)), PROTO, 400),
}


@pytest.fixture
def app(new_sqlite: Callable[..., str]) -> Iterator[tuple[TestClient, Path]]:
    db = Path(new_sqlite("otlp.db"))
    with TestClient(create_app(str(db)), base_url="http://127.0.0.1") as client:
        yield client, db


def dump(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return list(conn.iterdump())


def test_hostile_payloads_are_refused_and_store_nothing(app: tuple[TestClient, Path]) -> None:
    client, db = app
    # one capture stored first, so that "nothing changed" is about a database with data
    assert client.post("/v1/traces", content=payload([OUTPUT]), headers=JSON).status_code == 200
    before = dump(db)
    assert any("An answer." in line for line in before)
    for name, (body, headers, status) in HOSTILE.items():
        r = client.post("/v1/traces", content=body, headers=headers)
        assert r.status_code == status, (name, r.status_code, r.text[:300])
        if status == REFUSED:
            said = r.json()["partialSuccess"]
            assert said["rejectedSpans"] == "1", (name, said)
            error = said["errorMessage"]
            assert error.startswith("1 refused, the others kept: span 0 ("), (name, error)
        else:
            error = r.json()["error"]
        assert error and "\n" not in error and len(error) < 1000, (name, error)
        assert dump(db) == before, name


def test_ignored_and_bounded_but_accepted(app: tuple[TestClient, Path]) -> None:
    """What is not an error: an indexed attribute whose index has 5,000 digits is no GenAI
    message (ignored, 200); a gzip body of several members is read whole; the largest time
    OTLP can carry (2^64-1 ns, the year 2554) is a time."""
    client, db = app
    huge_index = string_attr("gen_ai.completion." + "9" * 5000 + ".content", "x")
    r = client.post("/v1/traces", content=payload([huge_index]), headers=JSON)
    assert r.status_code == 200 and "9999" not in "".join(dump(db))
    body = payload([string_attr("gen_ai.completion.0.content", "In two members.")])
    members = gzip.compress(body[:40]) + gzip.compress(body[40:]) + b"\0\0"
    assert client.post("/v1/traces", content=members, headers=GZIP).status_code == 200
    # as many members as are taken, gzip and zstd (which the OTel exporters may send)
    body = payload([string_attr("gen_ai.completion.0.content", "Many members.")], spanId="01" * 8)
    many = in_members(body, MAX_MEMBERS, gzip.compress)
    assert client.post("/v1/traces", content=many, headers=GZIP).status_code == 200
    body = payload([string_attr("gen_ai.completion.0.content", "Many frames.")], spanId="02" * 8)
    many = in_members(body, MAX_MEMBERS, zstd)
    assert client.post("/v1/traces", content=many, headers=ZSTD).status_code == 200
    last = payload(
        [string_attr("gen_ai.completion.0.content", "At the end of time.")],
        spanId="00000000000000ff",
        startTimeUnixNano="0",
        endTimeUnixNano=str(2**64 - 1),
    )
    assert client.post("/v1/traces", content=last, headers=JSON).status_code == 200
    caps = {c.output: c for c in client.app.state.service.list_captures()}  # type: ignore[attr-defined]
    assert set(caps) == {"In two members.", "Many members.", "Many frames.", "At the end of time."}
    assert caps["At the end of time."].captured_at.year == 2554


def test_inflating_waits_for_no_other_payload(app: tuple[TestClient, Path]) -> None:
    """Inflating is done before, and outside, the lock under which payloads are parsed one at
    a time: while another payload is being parsed (the lock held here), a gzip or zstd body
    is inflated and refused (a bomb), where it used to wait for the lock."""
    client, _db = app
    answers: list[int] = []

    def send(body: bytes, headers: dict[str, str]) -> None:
        answers.append(client.post("/v1/traces", content=body, headers=headers).status_code)

    with PARSING:
        for body, headers in ((gzip_bomb(), GZIP), (zstd(b" " * (MAX_INFLATED + 1)), ZSTD)):
            sender = threading.Thread(target=send, args=(body, headers), daemon=True)
            sender.start()
            sender.join(timeout=60)
            assert not sender.is_alive(), "the inflating waited for the parsing lock"
    assert answers == [413, 413]


def test_the_join_table_is_bounded_in_bytes(new_sqlite: Callable[..., str]) -> None:
    """Spans whose content never comes (4,000 of them, with a 64 KiB GenAI attribute each, held
    256 MB): what waits is bounded by its bytes, the oldest settled early and counted on
    /api/health. The bound here: 2 MB (``serve --otlp-join-mb``; 64 MB by default)."""
    app = create_app(new_sqlite("otlp.db"), otlp_join_bytes=2 * 1024 * 1024)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        assert client.get("/api/health").json()["otlp"] is None
        big = string_attr("gen_ai.tool.definitions", "b" * 65_536)  # kept with its call
        model = string_attr("gen_ai.request.model", "m")
        for i in range(120):  # input only: each waits for a choice record that never comes
            one = payload(
                [model, big, string_attr("gen_ai.prompt.0.content", "q")], spanId=f"{i:016x}"
            )
            assert client.post("/v1/traces", content=one, headers=JSON).status_code == 200
        joiner = client.app.state.otlp_joiner  # type: ignore[attr-defined]
        otlp = client.get("/api/health").json()["otlp"]
        assert otlp["max_bytes"] == 2 * 1024 * 1024
        assert 0 < otlp["waiting_bytes"] <= otlp["max_bytes"]
        assert 20 <= otlp["waiting"] < 40 and otlp["settled_early"] == 120 - otlp["waiting"]
        assert otlp["dropped_without_content"] == otlp["settled_early"]
        assert len(joiner) == otlp["waiting"]
