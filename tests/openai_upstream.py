"""An OpenAI-compatible server with deterministic replies, run as a subprocess by the proxy's
tests and benchmark (``python tests/openai_upstream.py``; it prints ``upstream: URL``).

- ``POST /v1/chat/completions``, ``/v1/completions``, ``/v1/responses``: streamed (SSE, one
  chunk per word) or not; the reply depends only on the request, and so does its id (a
  replayed request gets the same id).
- ``Authorization: Bearer sk-test`` is required (401 otherwise, as OpenAI answers).
- model ``"broken"``: a 500 error; a request with ``tools``: a tool call and no text;
  model ``"hold"`` (streamed): the first chunk, then the rest only after ``POST /release``;
  model ``"drip"`` (streamed): 200 words, one every 20 ms, each stream's fate (finished, or
  abandoned after N events) recorded for ``GET /debug/streams``.
- ``POST /script`` ``{"chunks": [base64...], "content_type", "encoding", "status"}``: the next
  request under /v1 (whatever it is, unread) gets exactly these bytes, chunk by chunk (the
  hostile-reply tests).
- ``GET /v1/models``; ``GET /debug/last`` the headers of the last request under /v1.
- For the engine runs (``simeval run --engines``): the chat reply depends on the model too: a
  model named ``weak...`` answers "I am not sure." whatever it is asked; a model with
  ``slow-N`` in its name answers after N ms; ``ratelimit``: the first request of each question
  gets a 429 with ``Retry-After: 1``, the next succeeds; ``hang``: no answer for 30 s.
  ``GET /debug/count``: chat requests received (``{"chat": n, "by_model": {...}}``).
- The key is ``sk-test``, or ``$UPSTREAM_KEY`` when set.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import re
import socket
import sys
from typing import Any

KEY = os.environ.get("UPSTREAM_KEY") or "sk-test"
WEAK = "I am not sure."
ANSWERS = {
    "france": "Paris is the capital of France and its largest city.",
    "japan": "Tokyo is the capital of Japan.",
}


def answer(question: str) -> str:
    for word, reply in ANSWERS.items():
        if word in question.lower():
            return reply
    return f"You asked: {question}"


def last_user(body: dict[str, Any]) -> str:
    messages = body.get("messages") or body.get("input") or []
    if isinstance(messages, str):
        return messages
    for m in reversed(messages):
        if m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, str):
                return content
            return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(body.get("prompt", ""))


def make_app() -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    release = asyncio.Event()
    last: dict[str, Any] = {}
    scripted: list[dict[str, Any]] = []
    streams: list[dict[str, Any]] = []
    counts: dict[str, Any] = {"chat": 0, "by_model": {}}
    limited: set[str] = set()  # questions a ``ratelimit`` model has answered 429 once

    def dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()

    def error(status: int, message: str, kind: str) -> Response:
        return Response(
            dumps({"error": {"message": message, "type": kind, "param": None, "code": None}}),
            status,
            media_type="application/json",
        )

    def script_reply() -> Response:
        spec = scripted.pop(0)
        chunks = [base64.b64decode(c) for c in spec["chunks"]]
        headers = {"content-encoding": spec["encoding"]} if spec.get("encoding") else {}

        async def gen() -> Any:
            for chunk in chunks:
                yield chunk
                await asyncio.sleep(0.001)

        return StreamingResponse(
            gen(),
            spec.get("status", 200),
            headers=headers,
            media_type=spec.get("content_type", "application/json"),
        )

    def drip(events: list[bytes]) -> StreamingResponse:
        fate: dict[str, Any] = {"sent": 0, "of": len(events), "finished": False, "closed": False}
        streams.append(fate)

        async def gen() -> Any:
            try:
                for event in events:
                    yield event
                    fate["sent"] += 1
                    await asyncio.sleep(0.02)
                fate["finished"] = True
            finally:  # finished, or cancelled: the client (the proxy) hung up
                fate["closed"] = True

        return StreamingResponse(gen(), media_type="text/event-stream")

    async def guarded(request: Request) -> tuple[dict[str, Any] | None, Response | None]:
        last.clear()
        last.update({k: v for k, v in request.headers.items()})
        if scripted:
            return None, script_reply()
        if request.headers.get("authorization") != f"Bearer {KEY}":
            return None, error(401, "Incorrect API key provided.", "invalid_request_error")
        raw = await request.body()
        body = json.loads(raw)
        if body.get("model") == "broken":
            return None, error(500, "The upstream broke.", "server_error")
        body["_id"] = hashlib.sha256(raw).hexdigest()[:24]
        return body, None

    def sse(events: list[bytes], hold: bool) -> StreamingResponse:
        async def gen() -> Any:
            for i, event in enumerate(events):
                yield event
                if hold and i == 0:
                    await asyncio.wait_for(release.wait(), 30)
                await asyncio.sleep(0.002)

        return StreamingResponse(gen(), media_type="text/event-stream")

    async def engine_modes(
        body: dict[str, Any], request: Request
    ) -> tuple[str | None, Response | None]:
        """The per-model behaviours of the engine tests: (the reply's text, or an error)."""
        model = str(body.get("model"))
        question = last_user(body)
        if model == "ratelimit" and question not in limited:
            limited.add(question)
            reply = error(429, "Rate limit reached.", "rate_limit_error")
            reply.headers["retry-after"] = "1"
            return None, reply
        if model == "hang":  # until 30 s have passed or the client has gone
            for _ in range(600):
                if await request.is_disconnected():
                    break
                await asyncio.sleep(0.05)
        delay = re.search(r"slow-(\d+)", model)
        if delay:
            await asyncio.sleep(int(delay.group(1)) / 1000)
        return (WEAK if model.startswith("weak") else None), None

    async def chat(request: Request) -> Response:
        counts["chat"] += 1
        body, err = await guarded(request)
        if err is not None or body is None:
            return err or error(400, "no body", "invalid_request_error")
        by_model = counts["by_model"]
        by_model[str(body.get("model"))] = by_model.get(str(body.get("model")), 0) + 1
        special, err = await engine_modes(body, request)
        if err is not None:
            return err
        cid, model, created = f"chatcmpl-{body['_id']}", body["model"], 1700000000
        text = special or answer(last_user(body))
        if model == "drip":
            text = " ".join(f"w{i}" for i in range(200))
        usage = {"prompt_tokens": 9, "completion_tokens": len(text.split()), "total_tokens": 0}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if body.get("tools"):
            call = {
                "id": "call_1",
                "type": "function",
                "function": {"name": "lookup", "arguments": '{"city":"Paris"}'},
            }
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": text}, "stop"
        if not body.get("stream"):
            return Response(
                dumps(
                    {
                        "id": cid,
                        "object": "chat.completion",
                        "created": created,
                        "model": model,
                        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                        "usage": usage,
                    }
                ),
                media_type="application/json",
            )

        def chunk(delta: dict[str, Any], reason: str | None, **more: Any) -> bytes:
            obj = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": reason}],
                **more,
            }
            return b"data: " + dumps(obj) + b"\n\n"

        events = [chunk({"role": "assistant", "content": ""}, None)]
        if body.get("tools"):
            events.append(chunk({"tool_calls": [{"index": 0, **call}]}, None))
        else:
            words = text.split(" ")
            events += [
                chunk({"content": w if i == 0 else " " + w}, None) for i, w in enumerate(words)
            ]
        events.append(chunk({}, finish))
        if (body.get("stream_options") or {}).get("include_usage"):
            obj = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [],
                "usage": usage,
            }
            events.append(b"data: " + dumps(obj) + b"\n\n")
        events.append(b"data: [DONE]\n\n")
        if model == "drip":
            return drip(events)
        return sse(events, model == "hold")

    async def completions(request: Request) -> Response:
        body, err = await guarded(request)
        if err is not None or body is None:
            return err or error(400, "no body", "invalid_request_error")
        text = answer(str(body.get("prompt", "")))
        obj = {
            "id": f"cmpl-{body['_id']}",
            "object": "text_completion",
            "created": 1700000000,
            "model": body["model"],
            "choices": [{"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
        }
        return Response(dumps(obj), media_type="application/json")

    async def responses(request: Request) -> Response:
        body, err = await guarded(request)
        if err is not None or body is None:
            return err or error(400, "no body", "invalid_request_error")
        text = answer(last_user(body))
        rid = f"resp_{body['_id']}"
        full = {
            "id": rid,
            "object": "response",
            "created_at": 1700000000,
            "status": "completed",
            "model": body["model"],
            "output": [
                {
                    "type": "message",
                    "id": f"msg_{body['_id']}",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            ],
            "usage": {"input_tokens": 8, "output_tokens": 9, "total_tokens": 17},
        }
        if not body.get("stream"):
            return Response(dumps(full), media_type="application/json")
        events = []
        for kind, data in (
            ("response.created", {"response": {**full, "status": "in_progress", "output": []}}),
            ("response.output_text.delta", {"delta": text[: len(text) // 2]}),
            ("response.output_text.delta", {"delta": text[len(text) // 2 :]}),
            ("response.completed", {"response": full}),
        ):
            payload = dumps({"type": kind, **data})
            events.append(f"event: {kind}\ndata: ".encode() + payload + b"\n\n")
        return sse(events, False)

    async def models(request: Request) -> Response:
        last.clear()
        last.update({k: v for k, v in request.headers.items()})
        if request.headers.get("authorization") != f"Bearer {KEY}":
            return error(401, "Incorrect API key provided.", "invalid_request_error")
        return JSONResponse({"object": "list", "data": [{"id": "gpt-test", "object": "model"}]})

    async def script(request: Request) -> Response:
        scripted.append(await request.json())
        return JSONResponse({"scripted": len(scripted)})

    async def debug_streams(request: Request) -> Response:
        return JSONResponse(streams)

    async def do_release(request: Request) -> Response:
        release.set()
        return JSONResponse({"released": True})

    async def debug_last(request: Request) -> Response:
        return JSONResponse(last)

    async def debug_count(request: Request) -> Response:
        return JSONResponse(counts)

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/v1/responses", responses, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/release", do_release, methods=["POST"]),
            Route("/script", script, methods=["POST"]),
            Route("/debug/streams", debug_streams, methods=["GET"]),
            Route("/debug/last", debug_last, methods=["GET"]),
            Route("/debug/count", debug_count, methods=["GET"]),
        ]
    )


def main() -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    print(f"upstream: http://127.0.0.1:{sock.getsockname()[1]}/v1", flush=True)
    config = uvicorn.Config(make_app(), log_level="warning", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])
    sys.exit(0)


if __name__ == "__main__":
    main()
