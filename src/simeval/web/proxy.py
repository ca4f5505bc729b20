"""The OpenAI-compatible proxy: ``simeval proxy --upstream URL`` and ``serve --upstream URL``.

A request to one of the OpenAI API's paths under ``/v1`` (``PROXIED``: chat/completions,
completions, responses, conversations, embeddings, models, moderations, audio, images, videos,
files, uploads, batches, fine_tuning, vector_stores, assistants, threads, containers, evals,
realtime; each with ``/{id}/...`` after it) goes to the upstream unchanged (method, path,
query, body, and the request headers of ``FORWARDED``: the provider's credentials, the
OpenAI and Anthropic headers, content negotiation, trace context) and its response comes
back unchanged, chunk by chunk as the upstream sends it (server-sent events are never
buffered), with one ``Date`` header (the server's own; the upstream's is dropped). Any other
path is answered 404 and never leaves the machine: OTLP's ``/v1/traces``, ``/v1/logs`` and
``/v1/metrics`` are captured by ``simeval.web.otlp``'s routes (in ``serve`` and ``proxy``
alike), whose exporters carry simeval's token. simeval's credentials are never forwarded: the
headers go by an allow-list, so no cookie (the studio's session least of all), no
``X-Simeval-*`` header and no header whatever its name whose value holds simeval's token leaves,
nor a ``token=`` query parameter holding it. Hop-by-hop headers are the connection's own, as
HTTP requires. A client that hangs up closes the upstream request
(nobody pays for tokens nobody reads); of a stream, what was delivered is still captured,
marked ``client_disconnected`` in its metadata.

Once a reply to ``POST /v1/chat/completions``, ``/v1/completions`` or ``/v1/responses`` is
complete, streamed or not, a copy of it goes to a bounded queue (``CaptureQueue``) and a
thread turns it into a capture there (``simeval.web.replies``): input = the last user
message (a chained Responses turn: its tool outputs), output = the assistant's text, the
response id as the capture key (``simeval.vocabulary.call_key``: a replayed response is
stored once, and an OTLP span of the same call too); ``n > 1`` gives one capture per
choice. A reply compressed with gzip, deflate, ``br`` or ``zstd`` is inflated (bounded)
to be read. The client's response never waits for that: when the store is slow
or down the queue holds the replies, retrying, and when it is full new replies are dropped,
logged, and counted on ``/api/health``. Upstream errors, and replies with no text (only tool
calls, say), are passed through and not captured. A reply that cannot be read (malformed,
nested too deep, too large inflated, not storable), from either side, is passed through too,
logged with its id and counted ``failed`` (so is one the upstream broke off: none is
lost silently); no message stops the thread, and a watchdog
restarts it should it ever end. No header is ever stored or logged, but the trace and span
ids of a valid W3C ``traceparent`` (``simeval.web.replies.trace_context``): the capture's
``trace_id`` and ``span_id``, so its exported scores join the caller's trace at once (the
span of the same call, when it comes, puts its own ids in their place:
``simeval.service.adopt``).

One call seen by the proxy and as an OTLP span (the same response id) is one capture: when
the span's was stored first, the proxy's copy replaces its texts and merges its metadata
(``Service.merge_proxied``, ``proxy_store``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, unquote, urlencode

import anyio
from starlette.types import Message, Receive, Scope, Send

from simeval.checks import KeyedCapture
from simeval.errors import SimevalError
from simeval.service.credentials import KEY_START
from simeval.service.store_names import database_problem
from simeval.web.replies import (
    MAX_CAPTURED_BYTES,
    Reply,
    reply_captures,
    reply_id,
    reply_output,
    request_input,
    trace_context,
)
from simeval.web.security import secret_matches

if TYPE_CHECKING:
    import httpx
    from fastapi import FastAPI

    from simeval.service import Service
    from simeval.service.models import CaptureOut

__all__ = [
    "CAPTURED",
    "MAX_CAPTURED_BYTES",
    "PROXIED",
    "CaptureQueue",
    "Proxy",
    "Reply",
    "create_proxy_app",
    "proxy_store",
    "reply_output",
    "request_input",
]

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
# the request headers forwarded upstream (any other is dropped): the provider's credentials,
# the OpenAI and Anthropic API headers, content negotiation and W3C trace context
FORWARDED = frozenset(
    {
        b"accept",
        b"accept-encoding",
        b"accept-language",
        b"api-key",
        b"authorization",
        b"baggage",
        b"cache-control",
        b"content-encoding",
        b"content-type",
        b"idempotency-key",
        b"traceparent",
        b"tracestate",
        b"user-agent",
        b"x-api-key",
        b"x-request-id",
    }
)
FORWARDED_PREFIXES = (b"openai-", b"x-stainless-", b"anthropic-", b"x-ms-", b"x-goog-")
CAPTURED = ("/chat/completions", "/completions", "/responses")
# The OpenAI API's paths under /v1 the proxy forwards (each also with /{id}/... after it);
# any other path is answered 404 here and never leaves: /v1/traces, /v1/logs, /v1/metrics
# above all, whose exporters carry simeval's own token
PROXIED = (
    "/chat/completions",
    "/completions",
    "/responses",
    "/conversations",
    "/embeddings",
    "/models",
    "/moderations",
    "/audio",
    "/images",
    "/videos",
    "/files",
    "/uploads",
    "/batches",
    "/fine_tuning",
    "/vector_stores",
    "/assistants",
    "/threads",
    "/containers",
    "/evals",
    "/realtime",
)
DEGRADED_FOR_S = 300.0  # /api/health says "degraded" this long after a reply failed
WATCH_EVERY_S = 1.0  # how often the watchdog looks at the capture thread


def proxy_store(service: Service) -> Callable[[list[KeyedCapture]], list[CaptureOut]]:
    """What the capture queue stores through: ``service.capture_checked``, then, for each
    call whose OTLP span was stored first (the same key, a capture from a span), the proxy's
    copy merged into it (``Service.merge_proxied``: the proxy's exact texts, the span's
    conversation and ids). The captures are stored by then: a merge that fails is said,
    never retried with the batch (which would store its unkeyed captures twice)."""

    def store(items: list[KeyedCapture]) -> list[CaptureOut]:
        outs = service.capture_checked(items)
        for item, out in zip(items, outs, strict=True):
            meta = out.metadata or {}
            if not out.replayed or meta.get("source") == "proxy" or "span_name" not in meta:
                continue
            try:
                service.merge_proxied(out.id, item)
            except Exception as exc:
                log.warning(
                    "the proxy's copy of capture %d (stored from its span) was not merged "
                    "into it: %s",
                    out.id,
                    str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__,
                )
        return outs

    return store


def _transient(exc: BaseException) -> bool:
    """True when ``exc`` says the store cannot write now (busy, down, full): the replies wait
    and are tried again; any other error is the capture's own."""
    if isinstance(exc, SimevalError):
        return exc.status_code == 503
    return database_problem(exc) is not None


class CaptureQueue:
    """Replies waiting to become captures, stored by one thread through ``store`` (a function
    taking a list of keyed checked captures, e.g. ``Service.capture_checked``).

    Bounded: ``put`` never blocks; a reply that finds the queue full is dropped and logged.
    A store that cannot write now (locked, down, full) is retried with backoff while new
    replies queue up. A reply that cannot become a capture, or that the store refuses with an
    error of its own, is logged with its id and counted (``failed``; ``dropped`` for one the
    store's checks refuse); the thread goes on. A watchdog thread restarts the capture
    thread if it ever ends before ``close``. ``degraded_for``: seconds after a failure during
    which ``degraded()`` is true.
    """

    def __init__(
        self,
        store: Callable[[list[KeyedCapture]], object],
        maxsize: int = 10_000,
        upstream: str = "",
        *,
        degraded_for: float = DEGRADED_FOR_S,
        watch_every: float = WATCH_EVERY_S,
    ):
        self._store = store
        self.upstream = upstream
        self.degraded_for = degraded_for
        self._q: queue.Queue[Reply | None] = queue.Queue(maxsize)
        self.captured = 0
        self.dropped = 0
        self.failed = 0
        self.restarts = 0
        self._last_failure: float | None = None
        self._numbered = 0
        self._open = 0  # replies of the batch in hand not yet stored, dropped or failed
        self._closing = 0.0  # when close() gives up on a store that stays down
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = self._start()
        self._watchdog = threading.Thread(
            target=self._watch, args=(watch_every,), name="simeval-proxy-watchdog", daemon=True
        )
        self._watchdog.start()

    def _start(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, name="simeval-proxy", daemon=True)
        thread.start()
        return thread

    def _ensure_worker(self) -> None:
        """Start the capture thread again if it ended before ``close`` (the watchdog's job)."""
        with self._lock:
            if self._thread.is_alive() or self._stop.is_set():
                return
            self.restarts += 1
            log.error(
                "the capture thread had stopped: restarted it (%d restarts); %d replies wait",
                self.restarts,
                self._q.qsize(),
            )
            self._thread = self._start()

    def _watch(self, every: float) -> None:
        while not self._stop.wait(every):
            self._ensure_worker()

    def put(self, reply: Reply) -> None:
        """Queue a completed reply for capture; never blocks (dropped when full)."""
        self._numbered += 1
        reply.number = self._numbered
        self._ensure_worker()
        try:
            self._q.put_nowait(reply)
        except queue.Full:
            self.dropped += 1
            log.warning(
                "capture queue full (%d replies waiting): dropped reply #%d to /v1%s (%d dropped)",
                self._q.maxsize,
                reply.number,
                reply.endpoint,
                self.dropped,
            )

    def degraded(self) -> str | None:
        """Why the proxy is not capturing as it should (the capture thread stopped, replies
        failed in the last ``degraded_for`` seconds), or None when all is well."""
        if not self._thread.is_alive() and not self._stop.is_set():
            return "the capture thread has stopped (the watchdog restarts it)"
        if self._last_failure is not None:
            ago = time.monotonic() - self._last_failure
            if ago < self.degraded_for:
                replies = "1 reply" if self.failed == 1 else f"{self.failed} replies"
                return f"{replies} could not be captured, the last {ago:.0f} s ago (see the log)"
        return None

    def stats(self) -> dict[str, str | int | None]:
        """The counters ``/api/health`` shows."""
        return {
            "upstream": self.upstream,
            "captured": self.captured,
            "dropped": self.dropped,
            "failed": self.failed,
            "queued": self._q.qsize(),
            "restarts": self.restarts,
            "problem": self.degraded(),
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
        """Store what is queued (for at most ``timeout`` seconds), then stop the threads."""
        self._closing = time.monotonic() + timeout
        self._ensure_worker()  # a stopped thread would leave the queue unread
        self._stop.set()
        with contextlib.suppress(queue.Full):
            self._q.put(None, timeout=timeout)
        self._thread.join(timeout)
        self._watchdog.join(timeout)

    # -- the capture thread -------------------------------------------------------------
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
            self._open = len(replies)
            try:
                pairs = [(r, c) for r in replies for c in self._convert(r)]
                if pairs:
                    self._store_all(pairs)
            except BaseException:
                # only an interpreter-level exit gets here (every Exception is handled):
                # the replies in hand are lost; the watchdog starts a new thread
                lost = self._open
                self._fail(lost)
                log.exception("the capture thread stopped: %d replies in hand lost", lost)
                raise
            finally:
                self._open = 0
                for _ in batch:
                    self._q.task_done()
            if batch[-1] is None:
                return

    def _convert(self, reply: Reply) -> list[KeyedCapture]:
        try:
            items = reply_captures(reply)
        except Exception as exc:
            self._failed_reply(reply, exc)
            return []
        self._open += len(items) - 1  # counted in captures from here (n > 1: several)
        return items

    def lost(self, endpoint: str, why: str) -> None:
        """A reply that never reached the queue (the upstream broke it off): counted
        ``failed`` and logged, never silent."""
        self._numbered += 1
        self.failed += 1
        self._last_failure = time.monotonic()
        log.warning(
            "reply #%d to /v1%s was not captured: %s (%d failed)",
            self._numbered,
            endpoint,
            why,
            self.failed,
        )

    def _fail(self, count: int) -> None:
        self.failed += count
        self._open -= count
        self._last_failure = time.monotonic()

    def _failed_reply(self, reply: Reply, exc: BaseException) -> None:
        """One reply not captured: counted and logged with its id, with a traceback when the
        error is not one of the checks' (a bug to report)."""
        self._fail(1)
        expected = isinstance(exc, SimevalError | ValueError)
        problem = str(exc).splitlines()[0][:300] if str(exc) else ""
        log.warning(
            "reply #%d to /v1%s (id %s) was not captured: %s%s (%d failed)",
            reply.number,
            reply.endpoint,
            reply_id(reply),
            "" if expected else type(exc).__name__ + ": ",
            problem,
            self.failed,
            exc_info=None if expected else exc,
        )

    def _store_all(self, pairs: list[tuple[Reply, KeyedCapture]]) -> None:
        """Store the captures; a store that cannot write now is retried (the replies wait),
        one capture the store refuses does not lose the others (each alone, then)."""
        delay = 0.2
        while True:
            try:
                self._store([item for _, item in pairs])
                self.captured += len(pairs)
                self._open -= len(pairs)
                return
            except Exception as exc:
                if not _transient(exc):
                    if len(pairs) == 1:
                        self._refused(pairs[0][0], exc)
                    else:
                        for pair in pairs:
                            self._store_all([pair])
                    return
                problem = str(exc) or type(exc).__name__
            if self._closing and time.monotonic() + delay > self._closing:
                self.dropped += len(pairs)
                self._open -= len(pairs)
                log.warning("store unavailable at shutdown: dropped %d captures", len(pairs))
                return
            log.warning(
                "store unavailable (%s): %d captures wait, retrying in %.1f s",
                problem.splitlines()[0] if problem else "?",
                len(pairs),
                delay,
            )
            time.sleep(delay)
            delay = min(delay * 2, 10.0)

    def _refused(self, reply: Reply, exc: Exception) -> None:
        if isinstance(exc, SimevalError):  # the store's own checks: not storable
            self.dropped += 1
            self._open -= 1
            log.warning(
                "reply #%d (id %s) could not be stored: %s", reply.number, reply_id(reply), exc
            )
        else:
            self._failed_reply(reply, exc)


# -- the ASGI app ----------------------------------------------------------------------------
class Proxy:
    """An ASGI app forwarding ``/v1/...`` to ``upstream`` (see the module docstring).

    ``upstream`` is the base URL an OpenAI client would use (``http://host:port/v1``); a URL
    that does not end in ``/v1`` gets the request's whole path appended.
    """

    def __init__(
        self,
        upstream: str,
        captures: CaptureQueue,
        timeout: float = 600.0,
        token: str | None = None,
    ):
        import httpx  # the `proxy` extra

        self._token = token or None  # simeval's own: never sent upstream
        base = upstream.rstrip("/")
        self.upstream = base
        self._prefix = base.removesuffix("/v1") if base.endswith("/v1") else base
        self.captures = captures
        self._httpx = httpx
        self._timeout = httpx.Timeout(timeout, connect=10.0)
        self._client: httpx.AsyncClient | None = None

    def _http(self) -> httpx.AsyncClient:
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
        refused = _refused_path(scope.get("raw_path", scope["path"].encode()).decode("latin-1"))
        if refused:
            await _send_error(send, 404, refused)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        exchange = _Exchange(scope, bytes(body), started)
        # The request is read: the next message a client sends is its hang-up. Watched beside
        # the forwarding, it cancels the forwarding, which closes the upstream request.
        async with anyio.create_task_group() as tasks:

            async def watch() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                if not exchange.complete:
                    exchange.gone = True
                    tasks.cancel_scope.cancel()

            tasks.start_soon(watch)
            await self._forward(exchange, send)
            tasks.cancel_scope.cancel()
        reply = exchange.reply
        if exchange.gone:
            log.info(
                "the client hung up on %s %s: the upstream request was closed",
                scope["method"],
                exchange.path,
            )
        if reply is not None:
            reply.latency = time.perf_counter() - started
            reply.client_disconnected = exchange.gone
            self.captures.put(reply)

    def _request(self, exchange: _Exchange) -> httpx.Request:
        """The upstream request: the client's, with exactly its headers (none of the HTTP
        client's defaults such as User-Agent) but the proxy's own and hop-by-hop ones."""
        scope = exchange.scope
        query = self._query(scope.get("query_string", b"").decode("latin-1"))
        url = self._prefix + exchange.path + ("?" + query if query else "")
        headers = []
        for key, value in scope["headers"]:
            if key == b"x-simeval-conversation":
                exchange.conversation = value.decode("utf-8", "replace")
            elif key == b"traceparent":
                exchange.trace = trace_context(value)
            allowed = key in FORWARDED or key.startswith(FORWARDED_PREFIXES)
            if allowed and not self._holds_token(value.decode("latin-1")):
                headers.append((key, value))
        body = exchange.body
        request = self._http().build_request(scope["method"], url, content=body)
        request.headers = self._httpx.Headers(
            [(b"host", request.headers["host"].encode("latin-1")), *headers]
            + ([(b"content-length", str(len(body)).encode())] if body else [])
        )
        return request

    def _holds_token(self, value: str) -> bool:
        """Whether a header's value is simeval's token or a simeval user's API key, alone or
        after a scheme ("Bearer")."""
        words = value.split()
        if any(w.startswith(KEY_START) for w in words[-1:] + words[:1]):
            return True
        if self._token is None:
            return False
        return any(secret_matches(w, self._token) for w in words[-1:] + words[:1])

    def _query(self, query: str) -> str:
        """The query string without a ``token=`` parameter holding simeval's token."""
        if not query or self._token is None or "token=" not in query:
            return query
        pairs = parse_qsl(query, keep_blank_values=True)
        kept = [(k, v) for k, v in pairs if not (k == "token" and secret_matches(v, self._token))]
        return query if len(kept) == len(pairs) else urlencode(kept)

    async def _forward(self, exchange: _Exchange, send: Send) -> None:
        """Send the request upstream and its response to the client as it comes, keeping a
        copy of a reply to capture in ``exchange.reply``."""
        request = self._request(exchange)
        try:
            response = await self._http().send(request, stream=True)
        except self._httpx.HTTPError as exc:
            # never the request: its headers hold the client's key
            log.warning("upstream %s unreachable: %s", self.upstream, type(exc).__name__)
            await _send_error(send, 502, f"upstream {self.upstream} unreachable: {exc}")
            return
        endpoint = exchange.path.split("?", 1)[0].removeprefix("/v1")
        method = exchange.scope["method"]
        if method == "POST" and endpoint in CAPTURED and 200 <= response.status_code < 300:
            exchange.reply = Reply(
                endpoint,
                exchange.body,
                exchange.conversation,
                response.status_code,
                response.headers.get("content-type", ""),
                response.headers.get("content-encoding", ""),
                trace=exchange.trace,
            )
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": [
                        (k, v)
                        for k, v in response.headers.raw
                        if k.lower() not in _HOP and k.lower() != b"date"
                    ]
                    + (
                        [(b"content-length", response.headers["content-length"].encode())]
                        if "content-length" in response.headers
                        and "transfer-encoding" not in response.headers
                        else []
                    ),
                }
            )
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                if exchange.reply is not None and not exchange.gone:
                    exchange.keep(chunk)
            exchange.complete = True
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except self._httpx.HTTPError as exc:
            log.warning("upstream %s broke off a reply: %s", self.upstream, type(exc).__name__)
            if exchange.reply is not None:  # the client sees the reply cut short, as it was
                self.captures.lost(endpoint, f"the upstream broke it off ({type(exc).__name__})")
            exchange.reply = None
        finally:
            with anyio.CancelScope(shield=True):  # closed even when the client hung up
                await response.aclose()


class _Exchange:
    """One request through the proxy: what it sent, and what came back to capture."""

    def __init__(self, scope: Scope, body: bytes, started: float):
        self.scope = scope
        self.body = body
        self.started = started
        self.path: str = scope.get("raw_path", scope["path"].encode()).decode("latin-1")
        self.conversation: str | None = None
        self.trace: tuple[str, str] | None = None  # the request's traceparent
        self.reply: Reply | None = None
        self.size = 0
        self.complete = False  # the whole response was handed to the client
        self.gone = False  # the client hung up before that

    def keep(self, chunk: bytes) -> None:
        """A chunk delivered to the client, copied for the capture (up to the limit)."""
        reply = self.reply
        assert reply is not None
        self.size += len(chunk)
        if self.size > MAX_CAPTURED_BYTES:
            reply.truncated = True
            return
        reply.chunks.append(chunk)
        reply.times.append(time.perf_counter() - self.started)


def _refused_path(path: str) -> str | None:
    """Why ``path`` (as sent, under ``/v1``) is not forwarded, or None: it must be one of
    the OpenAI API's (``PROXIED``), with no ``.``/``..`` segment (encoded or not) that an
    upstream could resolve to another path."""
    rest = path.split("?", 1)[0].removeprefix("/v1")
    decoded = unquote(rest)  # a model id may hold an encoded slash (meta-llama%2FLlama-3)
    if any(part in (".", "..") for part in re.split(r"[/\\]", decoded)):
        return f"not proxied: {path.split('?', 1)[0][:200]} has a relative segment"
    # as sent and as an upstream may decode it, the path must be one of the API's
    if all(any(p == x or p.startswith(x + "/") for x in PROXIED) for p in (rest, decoded)):
        return None
    return (
        f"not found: {rest[:200] or '/'} under /v1 is not an OpenAI API path "
        "(the proxy forwards /v1/chat/completions, /v1/responses, /v1/models, ...)"
    )


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
    service: Service | None = None,
    queue_size: int = 10_000,
    max_body: int = 32 * 1024 * 1024,
    allowed_hosts: Iterable[str] | None = None,
) -> FastAPI:
    """The app behind ``simeval proxy``: the proxy under ``/v1``, OTLP ingest
    (``simeval.web.otlp``'s routes: ``/v1/traces`` and what else it serves, captured here,
    never forwarded) and ``/api/health`` (with the capture queue's counters), storing
    captures in ``db`` (or ``service``).

    ``token``: when set, every request must carry it (``X-Simeval-Token``, or
    ``Authorization: Bearer`` when the upstream needs no key of its own: that header is then
    not forwarded), and any host name is served. Once the database has users, a user's key
    replaces the token (``simeval.web.security``).

    Example::

        import uvicorn
        from simeval.web.proxy import create_proxy_app
        uvicorn.run(create_proxy_app("http://127.0.0.1:8080/v1", "evals.db"), port=8001)
    """
    from fastapi import FastAPI
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from simeval.service import Service
    from simeval.web import api, otlp
    from simeval.web.capture_writer import CaptureWriter
    from simeval.web.health import DatabaseCheck
    from simeval.web.identity import Identities
    from simeval.web.security import BodyLimitMiddleware, GuardMiddleware

    own = service is None
    svc = Service(db) if service is None else service
    captures = CaptureQueue(proxy_store(svc), queue_size, upstream)
    proxy = Proxy(upstream, captures, token=token)
    writer = CaptureWriter(svc)  # what the OTLP routes store through, as in `serve`

    async def elsewhere(request: Request) -> JSONResponse:
        return JSONResponse(
            {"error": f"not found: {request.url.path} (the proxy serves /v1/... only)"}, 404
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await proxy.aclose()
        captures.close()
        await otlp.close(app)  # the OTLP halves still waiting, stored
        writer.close()
        if own:
            svc.close()

    # FastAPI (no docs) for the OTLP router's routes, matched before the proxy's /v1
    app = FastAPI(lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    # ``serve``'s own /api/health: the database first (an outage is a 503 naming it, not
    # "ok"), then the capture queue's and OTLP's counters
    app.include_router(api.HEALTH_ROUTER)
    app.include_router(otlp.router)
    app.router.routes.append(Route("/v1/{path:path}", proxy))
    every = ["GET", "POST", "PUT", "PATCH", "DELETE"]
    app.router.routes.append(Route("/{path:path}", elsewhere, methods=every))
    app.state.proxy = captures
    app.state.service = svc
    app.state.database_check = DatabaseCheck(svc)
    app.state.writer = writer
    # once the database has users, a key whose role may write captures (ingest, editor,
    # admin) is needed here as in `serve` (``X-Simeval-Token: KEY`` beside the upstream's own)
    app.add_middleware(
        GuardMiddleware,
        token=token or None,
        allowed_hosts=allowed_hosts,
        identities=Identities(svc),
    )
    app.add_middleware(BodyLimitMiddleware, max_body=max_body)
    return app
