"""A small OpenAI-compatible upstream that records every request it gets, for the proxy's
tests: run in the test's own process by uvicorn on 127.0.0.1 (``Upstream()``, a context
manager), so a test can see exactly what left the proxy (``requests``: method, path with the
query, headers, body), whatever the path.

- ``POST /v1/chat/completions``: ``n`` choices (choice 0 answers ``ANSWER``, choice i
  ``ANSWER (i)``), streamed when asked (the choices' deltas interleaved, ``include_usage``);
  the reply's id is the request header ``OpenAI-Test-Id`` when there is one;
- ``POST /v1/completions``: the same, streamed as ``choices[].text`` deltas;
- ``POST /v1/responses``: with ``tools`` and no ``previous_response_id``, a function call
  and no text; chained (``previous_response_id`` with ``function_call_output`` items), an
  answer from the tool output (``TOOL_ANSWER``); else ``ANSWER``; streamed when asked;
- a request header ``OpenAI-Test-Encoding: br|zstd|gzip`` (a name the proxy forwards)
  compresses the reply (a stream whole);
  ``fake-br`` says ``br`` but sends the reply as it is (a reply the proxy cannot read);
- ``GET /v1/models``: an empty list; any other path: ``200 {"ok": true}`` (so a request
  that should never have been forwarded is seen here, not refused by the upstream).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
import time
from typing import Any

import brotli
import uvicorn
import zstandard
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

ANSWER = "Paris is the capital of France and its largest city."
TOOL_ANSWER = "It is 18 degrees and sunny in Paris."


def _encode(body: bytes, encoding: str) -> bytes:
    if encoding == "br":
        return bytes(brotli.compress(body))
    if encoding == "zstd":
        return bytes(zstandard.ZstdCompressor().compress(body))
    if encoding == "gzip":
        return gzip.compress(body)
    return body


def _reply(body: bytes, media: str, request: Request) -> Response:
    encoding = request.headers.get("openai-test-encoding", "")
    said = encoding.removeprefix("fake-")  # "fake-br": says br, sends the body as it is
    headers = {"content-encoding": said} if encoding else {}
    return Response(_encode(body, encoding), media_type=media, headers=headers)


def _sse(events: list[dict[str, Any]], request: Request) -> Response:
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    return _reply(body + b"data: [DONE]\n\n", "text/event-stream", request)


def _text(i: int) -> str:
    return ANSWER if i == 0 else f"{ANSWER} ({i})"


USAGE = {"prompt_tokens": 9, "completion_tokens": 10, "total_tokens": 19}


class Upstream:
    """The recording upstream, serving while the ``with`` block runs; ``url`` ends in /v1."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._count = 0
        app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/completions", self._completions, methods=["POST"]),
                Route("/v1/responses", self._responses, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/{path:path}", self._other, methods=["GET", "POST", "PUT", "DELETE"]),
            ]
        )
        recorded = self.requests

        async def recording(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                chunks = []
                while True:
                    message = await receive()
                    chunks.append(message.get("body", b""))
                    if not message.get("more_body"):
                        break
                body = b"".join(chunks)
                recorded.append(
                    {
                        "method": scope["method"],
                        "path": scope["raw_path"].decode("latin-1")
                        + ("?" + scope["query_string"].decode() if scope["query_string"] else ""),
                        "headers": [
                            (k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]
                        ],
                        "body": body,
                    }
                )
                sent = False

                async def replay() -> dict[str, Any]:
                    nonlocal sent
                    if not sent:
                        sent = True
                        return {"type": "http.request", "body": body, "more_body": False}
                    await asyncio.Event().wait()  # never: the request is whole
                    return {"type": "http.disconnect"}

                await app(scope, replay, send)
            else:
                await app(scope, receive, send)

        config = uvicorn.Config(
            recording, host="127.0.0.1", port=0, log_level="warning", lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self.url = ""

    def __enter__(self) -> Upstream:
        self._thread.start()
        for _ in range(500):  # bounded: 10 s
            if self._server.started:
                break
            time.sleep(0.02)
        else:
            raise RuntimeError("the recording upstream did not start")
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/v1"
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(10)

    def _id(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}-{self._count}-{time.monotonic_ns()}"

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        n = int(body.get("n") or 1)
        cid = request.headers.get("openai-test-id") or self._id("chatcmpl")
        base = {"id": cid, "object": "chat.completion", "created": 1, "model": body["model"]}
        if not body.get("stream"):
            choices = [
                {
                    "index": i,
                    "message": {"role": "assistant", "content": _text(i)},
                    "finish_reason": "stop",
                }
                for i in range(n)
            ]
            reply = {**base, "choices": choices, "usage": USAGE}
            return _reply(json.dumps(reply).encode(), "application/json", request)
        chunk = {**base, "object": "chat.completion.chunk"}
        events = []
        words = [_text(i).split(" ") for i in range(n)]
        for w in range(max(len(ws) for ws in words)):
            for i in range(n):  # the choices interleaved, as OpenAI streams them
                if w < len(words[i]):
                    piece = words[i][w] if w == 0 else " " + words[i][w]
                    delta = {"content": piece, **({"role": "assistant"} if w == 0 else {})}
                    events.append({**chunk, "choices": [{"index": i, "delta": delta}]})
        events += [
            {**chunk, "choices": [{"index": i, "delta": {}, "finish_reason": "stop"}]}
            for i in range(n)
        ]
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append({**chunk, "choices": [], "usage": USAGE})
        return _sse(events, request)

    async def _completions(self, request: Request) -> Response:
        body = await request.json()
        base = {"id": self._id("cmpl"), "object": "text_completion", "created": 1}
        base["model"] = body["model"]
        if not body.get("stream"):
            choice = {"index": 0, "text": ANSWER, "finish_reason": "stop", "logprobs": None}
            reply = {**base, "choices": [choice], "usage": USAGE}
            return _reply(json.dumps(reply).encode(), "application/json", request)
        words = ANSWER.split(" ")
        events = [
            {**base, "choices": [{"index": 0, "text": (" " if i else "") + w, "logprobs": None}]}
            for i, w in enumerate(words)
        ]
        last = {"index": 0, "text": "", "finish_reason": "stop", "logprobs": None}
        events.append({**base, "choices": [last]})
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append({**base, "choices": [], "usage": USAGE})
        return _sse(events, request)

    async def _responses(self, request: Request) -> Response:
        body = await request.json()
        rid = self._id("resp")
        items = body.get("input") if isinstance(body.get("input"), list) else []
        tool_outputs = [i for i in items if i.get("type") == "function_call_output"]
        base: dict[str, Any] = {"id": rid, "object": "response", "created_at": 1}
        base["model"] = body["model"]
        base |= {"status": "completed", "parallel_tool_calls": True, "tool_choice": "auto"}
        base |= {"tools": body.get("tools") or []}
        usage: dict[str, Any] = {"input_tokens": 9, "output_tokens": 10, "total_tokens": 19}
        usage |= {"input_tokens_details": {"cached_tokens": 0}}
        usage |= {"output_tokens_details": {"reasoning_tokens": 0}}
        if body.get("tools") and not body.get("previous_response_id"):
            call = {"type": "function_call", "id": "fc_1", "call_id": "call_1"}
            call |= {"name": "weather", "arguments": '{"city": "Paris"}', "status": "completed"}
            response = {**base, "output": [call], "usage": usage}
        else:
            text = TOOL_ANSWER if tool_outputs else ANSWER
            part = {"type": "output_text", "text": text, "annotations": []}
            message: dict[str, Any] = {"type": "message", "id": "msg_1", "role": "assistant"}
            message |= {"status": "completed", "content": [part]}
            response = {**base, "output": [message], "usage": usage}
        if not body.get("stream"):
            return _reply(json.dumps(response).encode(), "application/json", request)
        events = [{"type": "response.created", "sequence_number": 0, "response": base}]
        events.append({"type": "response.completed", "sequence_number": 1, "response": response})
        return _sse(events, request)

    async def _models(self, request: Request) -> Response:
        return Response(b'{"object": "list", "data": []}', media_type="application/json")

    async def _other(self, request: Request) -> Response:
        return Response(b'{"ok": true}', media_type="application/json")
