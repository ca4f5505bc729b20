"""A local OTLP/HTTP logs receiver for the tests of the scores simeval exports
(``gen_ai.evaluation.result`` events): it decodes what it is sent (protobuf or JSON) into
plain records (``opentelemetry-proto`` imported when used: a test module skips first
without it)."""

from __future__ import annotations

import http.server
import json
import threading
import time
from typing import Any


def _pb() -> Any:
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2

    return logs_service_pb2


class Receiver:
    """An OTLP/HTTP logs receiver on 127.0.0.1: decodes each request (protobuf or JSON) into
    plain records; ``fail_first`` requests get 503 first; ``hang`` holds every request
    unanswered until ``release``."""

    def __init__(self, fail_first: int = 0, hang: bool = False):
        self.records: list[dict[str, Any]] = []
        self.requests: list[str] = []  # the content type of each request received
        self.fail_first = fail_first
        self.released = threading.Event()
        if not hang:
            self.released.set()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                kind = self.headers.get("Content-Type", "")
                owner.requests.append(kind)
                owner.released.wait(60)
                if owner.fail_first > 0:
                    owner.fail_first -= 1
                    self.send_response(503)
                    self.send_header("Retry-After", "0")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                owner.records += decode(body, kind)
                self.send_response(200)
                self.send_header("Content-Type", kind)
                reply = (
                    _pb().ExportLogsServiceResponse().SerializeToString()
                    if "protobuf" in kind
                    else b"{}"
                )
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def wait_for(self, count: int, timeout: float = 60) -> list[dict[str, Any]]:
        end = time.monotonic() + timeout
        while len(self.records) < count and time.monotonic() < end:
            time.sleep(0.02)
        return self.records

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


def decode(body: bytes, kind: str) -> list[dict[str, Any]]:
    """Each log record as {event, trace_id, span_id (hex), attrs}."""
    out = []
    if "protobuf" in kind:
        request = _pb().ExportLogsServiceRequest.FromString(body)
        for rl in request.resource_logs:
            for sl in rl.scope_logs:
                for rec in sl.log_records:
                    attrs = {}
                    for kv in rec.attributes:
                        which = kv.value.WhichOneof("value")
                        attrs[kv.key] = getattr(kv.value, which)
                    out.append(
                        {
                            "event": rec.event_name,
                            "trace_id": rec.trace_id.hex(),
                            "span_id": rec.span_id.hex(),
                            "attrs": attrs,
                            "time": rec.time_unix_nano,
                            "observed": rec.observed_time_unix_nano,
                            "severity": (rec.severity_number, rec.severity_text),
                        }
                    )
        return out
    payload = json.loads(body)
    for rl in payload["resourceLogs"]:
        for sl in rl["scopeLogs"]:
            for rec in sl["logRecords"]:
                attrs = {kv["key"]: next(iter(kv["value"].values())) for kv in rec["attributes"]}
                out.append(
                    {
                        "event": rec["eventName"],
                        "trace_id": rec.get("traceId", ""),
                        "span_id": rec.get("spanId", ""),
                        "attrs": attrs,
                        "time": int(rec["timeUnixNano"]),
                        "observed": int(rec["observedTimeUnixNano"]),
                        "severity": (rec["severityNumber"], rec["severityText"]),
                    }
                )
    return out
