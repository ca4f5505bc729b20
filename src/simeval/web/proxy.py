"""The OpenAI-compatible proxy: ``simeval proxy --upstream URL`` and ``serve --upstream URL``.

Every request under ``/v1`` goes to the upstream unchanged (method, path, query, body and
headers, ``Authorization`` included) and its response comes back unchanged, chunk by chunk as
the upstream sends it (server-sent events are never buffered). The proxy's own headers
(``X-Simeval-*``, e.g. the studio's token) are not forwarded, and hop-by-hop headers are the
connection's own, as HTTP requires.

Once a reply to ``POST /v1/chat/completions``, ``/v1/completions`` or ``/v1/responses`` is
complete, streamed or not, a copy of it goes to a bounded queue (``CaptureQueue``) and a
thread turns it into a capture there: input = the last user message, output = the assistant's
text, the response id as the capture key (a replayed response is stored once). The client's
response never waits for that: when the store is slow or down the queue holds the replies,
retrying, and when it is full new replies are dropped, logged, and counted on
``/api/health``. Upstream errors, and replies with no text (only tool calls, say), are passed
through and not captured. No header is ever stored or logged.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import logging
import queue
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from starlette.types import Message, Receive, Scope, Send

from simeval.checks import KeyedCapture, check_capture, check_capture_key
from simeval.errors import SimevalError
from simeval.service.database import DatabaseBusyError

log = logging.getLogger("simeval.proxy")

# the connection's own headers (RFC 9110 7.6.1) and those the HTTP layers set again
_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"host",
        b"content-length",
    }
)
CAPTURED = ("/chat/completions", "/completions", "/responses")
MAX_CAPTURED_BYTES = 16 * 1024 * 1024  # a longer reply is passed through but not captured


@dataclass
class Reply:
    """A completed exchange, as the capture thread needs it (no request headers but the
    conversation id)."""

    endpoint: str  # "/chat/completions", "/completions" or "/responses"
    request: bytes
    conversation: str | None
    status: int
    content_type: str
    encoding: str
    chunks: list[bytes] = field(default_factory=list)
    times: list[float] = field(default_factory=list)  # seconds after the request, per chunk
    latency: float = 0.0


class CaptureQueue:
    """Replies waiting to become captures, stored by one thread through ``store`` (a function
    taking a list of keyed checked captures, e.g. ``Service.capture_checked``).

    Bounded: ``put`` never blocks; a reply that finds the queue full is dropped and logged.
    A store that fails (down, locked) is retried with backoff while new replies queue up.
    """

    def __init__(
        self,
        store: Callable[[list[KeyedCapture]], Any],
        maxsize: int = 10_000,
        upstream: str = "",
    ):
        self._store = store
        self.upstream = upstream
        self._q: queue.Queue[Reply | None] = queue.Queue(maxsize)
        self.captured = 0
        self.dropped = 0
        self._closing = 0.0  # when close() gives up on a store that stays down
        self._thread = threading.Thread(target=self._run, name="simeval-proxy", daemon=True)
        self._thread.start()

    def put(self, reply: Reply) -> None:
        try:
            self._q.put_nowait(reply)
        except queue.Full:
            self.dropped += 1
            log.warning(
                "capture queue full (%d replies waiting): dropped a reply to %s (%d dropped)",
                self._q.maxsize,
                reply.endpoint,
                self.dropped,
            )

    def stats(self) -> dict[str, Any]:
        return {
            "upstream": self.upstream,
            "captured": self.captured,
            "dropped": self.dropped,
            "queued": self._q.qsize(),
        }

    def join(self, timeout: float = 10.0) -> bool:
        """Wait until every queued reply is stored or dropped; False on timeout."""
        deadline = time.monotonic() + timeout
        while self._q.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def close(self, timeout: float = 10.0) -> None:
        """Store what is queued (for at most ``timeout`` seconds), then stop the thread."""
        self._closing = time.monotonic() + timeout
        with contextlib.suppress(queue.Full):
            self._q.put(None, timeout=timeout)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            first = self._q.get()
            batch = [first]
            while len(batch) < 256 and first is not None:
                try:
                    batch.append(self._q.get_nowait())
                except queue.Empty:
                    break
                if batch[-1] is None:
                    break
            replies = [r for r in batch if r is not None]
            try:
                items = [c for c in map(_captured, replies) if c is not None]
                if items:
                    self._store_all(items)
            finally:
                for _ in batch:
                    self._q.task_done()
            if batch[-1] is None:
                return

    def _store_all(self, items: list[KeyedCapture]) -> None:
        delay = 0.2
        while True:
            try:
                self._store(items)
                self.captured += len(items)
                return
            except DatabaseBusyError as exc:
                problem = str(exc)
            except SimevalError:
                # one capture the store refuses must not lose the others: each alone
                for item in items:
                    try:
                        self._store([item])
                        self.captured += 1
                    except Exception as one:
                        self.dropped += 1
                        log.warning("a captured reply could not be stored: %s", one)
                return
            except Exception as exc:  # the store is down or unreachable: keep the replies
                problem = f"{type(exc).__name__}: {exc}"
            if self._closing and time.monotonic() + delay > self._closing:
                self.dropped += len(items)
                log.warning("store unavailable at shutdown: dropped %d captures", len(items))
                return
            log.warning(
                "store unavailable (%s): %d captures wait, retrying in %.1f s",
                problem.splitlines()[0] if problem else "?",
                len(items),
                delay,
            )
            time.sleep(delay)
            delay = min(delay * 2, 10.0)


# -- turning a reply into a capture ----------------------------------------------------------
def _text_parts(
    content: Any, kinds: tuple[str, ...] = ("text", "input_text", "output_text")
) -> str:
    """The text of an OpenAI message content: a string, or the text parts of a list, joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and part.get("type") in kinds:
                text = part.get("text")
                if isinstance(text, str):
                    texts.append(text)
        return "\n".join(t for t in texts if t)
    return ""


def request_input(endpoint: str, body: dict[str, Any]) -> str:
    """The prompt of a request: the last user message's text (or the completion prompt).

    >>> request_input("/chat/completions", {"messages": [
    ...     {"role": "system", "content": "Be brief."},
    ...     {"role": "user", "content": [{"type": "text", "text": "Capital of France?"}]}]})
    'Capital of France?'
    """
    if endpoint == "/completions":
        prompt = body.get("prompt")
        if isinstance(prompt, list):
            prompt = prompt[-1] if prompt and isinstance(prompt[-1], str) else ""
        return prompt if isinstance(prompt, str) else ""
    messages = body.get("messages") if endpoint == "/chat/completions" else body.get("input")
    if isinstance(messages, str):  # the Responses API's input may be plain text
        return messages
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                return _text_parts(message.get("content"))
    return ""


def _decoded(reply: Reply) -> bytes:
    raw = b"".join(reply.chunks)
    encoding = reply.encoding.strip().lower()
    if encoding in ("", "identity"):
        return raw
    if encoding in ("gzip", "x-gzip", "deflate"):
        wbits = 47 if encoding != "deflate" else 15  # 47: gzip or zlib header, detected
        try:
            return zlib.decompress(raw, wbits)
        except zlib.error:
            return zlib.decompress(raw, -15)  # raw deflate, as some servers send it
    raise ValueError(f"cannot decode a {encoding!r} body")


def _events(reply: Reply) -> Iterable[tuple[float, dict[str, Any]]]:
    """The JSON events of a server-sent-event stream, each with when its chunk arrived."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    pending = ""
    chunks = [_decoded(reply)] if reply.encoding not in ("", "identity") else reply.chunks
    times = reply.times if chunks is reply.chunks else [reply.times[-1] if reply.times else 0]
    for chunk, at in zip(chunks, times, strict=False):
        pending += decoder.decode(chunk).replace("\r\n", "\n")
        while "\n\n" in pending:
            event, pending = pending.split("\n\n", 1)
            data = "\n".join(
                line[5:].removeprefix(" ") for line in event.split("\n") if line.startswith("data:")
            )
            if not data or data == "[DONE]":
                continue
            with contextlib.suppress(ValueError):
                parsed = json.loads(data)
                if isinstance(parsed, dict):
                    yield at, parsed


def _chat_text(choice: dict[str, Any], streamed: bool) -> str:
    if streamed:
        delta = choice.get("delta") or {}
        return delta.get("content") or "" if isinstance(delta, dict) else ""
    if "text" in choice:  # /completions
        return choice.get("text") or ""
    message = choice.get("message") or {}
    return _text_parts(message.get("content")) if isinstance(message, dict) else ""


def _response_text(response: dict[str, Any]) -> str:
    texts = []
    for item in response.get("output") or []:
        if isinstance(item, dict) and item.get("type") == "message":
            texts.append(_text_parts(item.get("content"), ("output_text", "text")))
    return "".join(texts)


def reply_output(reply: Reply) -> tuple[str, dict[str, Any]]:
    """The assistant's text of a completed reply, and what it says about itself: its id,
    model, token usage, finish reason and (streams) when the first text arrived."""
    info: dict[str, Any] = {}
    streamed = reply.content_type.startswith("text/event-stream")
    if not streamed:
        body = json.loads(_decoded(reply))
        if not isinstance(body, dict):
            return "", info
        events: Iterable[tuple[float, dict[str, Any]]] = [(reply.latency, body)]
    else:
        events = _events(reply)
    text: list[str] = []
    for at, event in events:
        if reply.endpoint == "/responses":
            kind = event.get("type", "")
            response = event.get("response") if streamed else event
            if kind == "response.output_text.delta" and isinstance(event.get("delta"), str):
                if "first_token" not in info and event["delta"]:
                    info["first_token"] = at
                text.append(event["delta"])
            if isinstance(response, dict) and (not streamed or kind == "response.completed"):
                full = _response_text(response)
                if not streamed or not text:
                    text = [full]
                info["id"] = response.get("id")
                info["model"] = response.get("model")
                info["usage"] = response.get("usage")
                info["finish_reason"] = response.get("status")
            continue
        info.setdefault("id", event.get("id"))
        info["model"] = event.get("model") or info.get("model")
        if event.get("usage"):
            info["usage"] = event["usage"]
        for choice in event.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            piece = _chat_text(choice, streamed)
            if piece:
                if streamed and "first_token" not in info:
                    info["first_token"] = at
                text.append(piece)
            if choice.get("finish_reason"):
                info["finish_reason"] = choice["finish_reason"]
    return "".join(text), info


def _captured(reply: Reply) -> KeyedCapture | None:
    """A reply as a checked capture with its key, or None when it is not one (an error, no
    text, not JSON, too long)."""
    if not 200 <= reply.status < 300:
        return None
    try:
        request = json.loads(reply.request) if reply.request else {}
        if not isinstance(request, dict):
            return None
        output, info = reply_output(reply)
        if not output.strip():
            return None  # tool calls only, or an empty reply: nothing to score
        metadata: dict[str, Any] = {
            "source": "proxy",
            "endpoint": "/v1" + reply.endpoint,
            "model": info.get("model") or request.get("model"),
            "latency_ms": round(reply.latency * 1000, 3),
            "upstream_status": reply.status,
        }
        if "first_token" in info:
            metadata["first_token_ms"] = round(info["first_token"] * 1000, 3)
        if isinstance(info.get("usage"), dict):
            metadata["usage"] = info["usage"]
        if info.get("finish_reason"):
            metadata["finish_reason"] = info["finish_reason"]
        user = request.get("user")
        conversation = reply.conversation or (user if isinstance(user, str) and user else None)
        key = info.get("id")
        checked = check_capture(
            request_input(reply.endpoint, request),
            output,
            conversation[:200] if conversation else None,
            metadata,
        )
        return (*checked, check_capture_key(key if isinstance(key, str) else None))
    except (ValueError, SimevalError) as exc:
        log.warning("a reply to /v1%s was not captured: %s", reply.endpoint, exc)
        return None


# -- the ASGI app ----------------------------------------------------------------------------
class Proxy:
    """An ASGI app forwarding ``/v1/...`` to ``upstream`` (see the module docstring).

    ``upstream`` is the base URL an OpenAI client would use (``http://host:port/v1``); a URL
    that does not end in ``/v1`` gets the request's whole path appended.
    """

    def __init__(self, upstream: str, captures: CaptureQueue, timeout: float = 600.0):
        import httpx  # the `proxy` extra

        base = upstream.rstrip("/")
        self.upstream = base
        self._prefix = base.removesuffix("/v1") if base.endswith("/v1") else base
        self.captures = captures
        self._httpx = httpx
        self._timeout = httpx.Timeout(timeout, connect=10.0)
        self._client: Any = None

    def _http(self) -> Any:
        if self._client is None:
            self._client = self._httpx.AsyncClient(
                timeout=self._timeout,
                limits=self._httpx.Limits(max_connections=None, max_keepalive_connections=64),
                follow_redirects=False,
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        started = time.perf_counter()
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        path: str = scope.get("raw_path", scope["path"].encode()).decode("latin-1")
        query: bytes = scope.get("query_string", b"")
        url = self._prefix + path + ("?" + query.decode("latin-1") if query else "")
        conversation = None
        headers = []
        for key, value in scope["headers"]:
            if key in _HOP:
                continue
            if key.startswith(b"x-simeval-"):
                if key == b"x-simeval-conversation":
                    conversation = value.decode("utf-8", "replace")
                continue
            headers.append((key, value))
        http = self._http()
        request = http.build_request(scope["method"], url, content=bytes(body))
        # exactly the client's headers: none of the HTTP client's defaults (User-Agent, ...)
        request.headers = self._httpx.Headers(
            [(b"host", request.headers["host"].encode("latin-1")), *headers]
            + ([(b"content-length", str(len(body)).encode())] if body else [])
        )
        try:
            response = await http.send(request, stream=True)
        except self._httpx.HTTPError as exc:
            # never the request: its headers hold the client's key
            log.warning("upstream %s unreachable: %s", self.upstream, type(exc).__name__)
            await _send_error(send, 502, f"upstream {self.upstream} unreachable: {exc}")
            return
        endpoint = path.split("?", 1)[0].removeprefix("/v1")
        reply: Reply | None = None
        if scope["method"] == "POST" and endpoint in CAPTURED and 200 <= response.status_code < 300:
            reply = Reply(
                endpoint,
                bytes(body),
                conversation,
                response.status_code,
                response.headers.get("content-type", ""),
                response.headers.get("content-encoding", ""),
            )
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": [(k, v) for k, v in response.headers.raw if k.lower() not in _HOP]
                    + (
                        [(b"content-length", response.headers["content-length"].encode())]
                        if "content-length" in response.headers
                        and "transfer-encoding" not in response.headers
                        else []
                    ),
                }
            )
            size = 0
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                if reply is not None:
                    size += len(chunk)
                    if size > MAX_CAPTURED_BYTES:
                        reply = None
                    else:
                        reply.chunks.append(chunk)
                        reply.times.append(time.perf_counter() - started)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except self._httpx.HTTPError as exc:
            log.warning("upstream %s broke off a reply: %s", self.upstream, type(exc).__name__)
            return  # the client sees the reply cut short, as it was; nothing captured
        finally:
            await response.aclose()
        if reply is not None:
            reply.latency = time.perf_counter() - started
            self.captures.put(reply)


async def _send_error(send: Send, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    start: Message = {
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))],
    }
    await send(start)
    await send({"type": "http.response.body", "body": body})


def create_proxy_app(
    upstream: str,
    db: str | None = None,
    token: str | None = None,
    *,
    service: Any = None,
    queue_size: int = 10_000,
    max_body: int = 32 * 1024 * 1024,
    allowed_hosts: Iterable[str] | None = None,
) -> Any:
    """The app behind ``simeval proxy``: the proxy under ``/v1`` and ``/api/health`` (with the
    capture queue's counters), storing captures in ``db`` (or ``service``).

    ``token``: when set, every request must carry it in ``X-Simeval-Token`` (the
    ``Authorization`` header belongs to the upstream), and any host name is served.

    Example::

        import uvicorn
        from simeval.web.proxy import create_proxy_app
        uvicorn.run(create_proxy_app("http://127.0.0.1:8080/v1", "evals.db"), port=8001)
    """
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from simeval import __version__
    from simeval.service import Service
    from simeval.web.security import BodyLimitMiddleware, GuardMiddleware

    own = service is None
    svc = Service(db) if service is None else service
    captures = CaptureQueue(svc.capture_checked, queue_size, upstream)
    proxy = Proxy(upstream, captures)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "version": __version__, "proxy": captures.stats()})

    async def elsewhere(request: Request) -> JSONResponse:
        return JSONResponse(
            {"error": f"not found: {request.url.path} (the proxy serves /v1/... only)"}, 404
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        yield
        await proxy.aclose()
        captures.close()
        if own:
            svc.close()

    app = Starlette(
        routes=[
            Route("/api/health", health, methods=["GET"]),
            Route("/v1/{path:path}", proxy),
            Route("/{path:path}", elsewhere, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
        ],
        lifespan=lifespan,
    )
    app.state.proxy = captures
    app.state.service = svc
    app.add_middleware(GuardMiddleware, token=token or None, allowed_hosts=allowed_hosts)
    app.add_middleware(BodyLimitMiddleware, max_body=max_body)
    return app
