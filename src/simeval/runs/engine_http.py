"""An OpenAI-compatible chat-completions engine: one ``httpx.AsyncClient`` per run.

A call is retried on 429, 5xx and connection errors, after ``Retry-After`` when the endpoint
says it (bounded by ``MAX_WAIT``), else after an exponential backoff with jitter. A call that
takes longer than the engine's ``timeout`` is a case error (not retried: a hung endpoint
would hold the run for the retries too). The key goes in the ``Authorization`` header only:
nothing of this module logs a header or puts one in an error message.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import time
from typing import TYPE_CHECKING

from simeval.errors import InvalidInput
from simeval.runs.engines import Answer, Case, EngineSpec

if TYPE_CHECKING:
    import httpx

MAX_WAIT = 60.0  # seconds: the longest Retry-After honoured (a longer one is cut to this)
POOL = 4  # connections per httpx pool (see HttpEngine.start)
BACKOFF = 0.5  # seconds before the first retry without Retry-After; doubled each time
_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds or an HTTP date), or None.

    >>> retry_after("2"), retry_after(None), retry_after("soon")
    (2.0, None, None)
    """
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds != seconds:  # NaN
        return None
    return min(MAX_WAIT, max(0.0, seconds))


def _error_text(response: httpx.Response) -> str:
    """The endpoint's own error message (OpenAI's shape), shortened, else the status."""
    message = ""
    try:
        body = response.json()
        err = body.get("error") if isinstance(body, dict) else None
        if isinstance(err, dict):
            message = str(err.get("message") or "")
        elif isinstance(err, str):
            message = err
    except ValueError:
        message = response.text[:200]
    message = " ".join(message.split())[:300]
    return f"HTTP {response.status_code}" + (f": {message}" if message else "")


def _usage(value: object, key: str) -> int | None:
    if not isinstance(value, dict):
        return None
    n = value.get(key)
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else None


class HttpEngine:
    """Answers through ``POST {url}/chat/completions``."""

    def __init__(self, spec: EngineSpec, concurrency: int):
        self.spec = spec
        self.concurrency = concurrency
        self.clients: list[httpx.AsyncClient] = []
        self.slots: asyncio.Queue[int] = asyncio.Queue()
        self.size = 1  # connections per pool (set by start)
        self.headers: dict[str, str] = {}

    async def start(self) -> None:
        """Open the clients (the API key read from the environment now).

        httpcore's pool looks at every connection it holds on each request and release, so
        one pool of 32 connections costs more per call than eight of 4 (about twice the CPU
        per call, measured): the calls in flight are spread over pools of ``POOL``
        connections, each call taking a free slot (the caller bounds the calls in flight to
        ``concurrency``)."""
        try:
            import httpx
        except ImportError:  # pragma: no cover - the `engines` extra
            raise InvalidInput(
                "an HTTP engine needs httpx: pip install 'simeval[engines]'"
            ) from None
        key = self.spec.api_key()
        if key is not None:
            self.headers["authorization"] = f"Bearer {key}"
        pools = -(-self.concurrency // POOL)
        size = -(-self.concurrency // pools)
        limits = httpx.Limits(max_connections=size, max_keepalive_connections=size)
        self.clients = [
            httpx.AsyncClient(
                timeout=httpx.Timeout(self.spec.timeout), limits=limits, follow_redirects=False
            )
            for _ in range(pools)
        ]
        for slot in range(pools * size):
            self.slots.put_nowait(slot)
        self.size = size

    def _scrub(self, text: str) -> str:
        # an endpoint may quote the key it refused: the message goes to results and the DB
        key = self.headers.get("authorization", "").removeprefix("Bearer ")
        return text.replace(key, "[the API key]") if key else text

    async def close(self) -> None:
        """Close the clients' connections."""
        clients, self.clients = self.clients, []
        for client in clients:
            await client.aclose()

    def body(self, prompt: str) -> dict[str, object]:
        """The request body for one prompt (the engine's params passed through)."""
        messages = []
        if self.spec.system is not None:
            messages.append({"role": "system", "content": self.spec.system})
        messages.append({"role": "user", "content": prompt})
        return {**self.spec.params, "model": self.spec.model, "messages": messages}

    async def answer(self, case: Case) -> Answer:
        """One case's answer: retried as the module says; an error is the Answer's."""
        import httpx

        url = f"{self.spec.url}/chat/completions"
        payload = json.dumps(self.body(case["prompt"])).encode()
        headers = {**self.headers, "content-type": "application/json"}
        out = Answer()
        started = time.perf_counter()
        for attempt in range(self.spec.retries + 1):
            out.calls += 1
            wait: float | None = None
            slot = await self.slots.get()
            try:
                client = self.clients[slot // self.size]
                response = await client.post(url, content=payload, headers=headers)
            except httpx.TimeoutException:
                out.error = f"no answer within {self.spec.timeout:g} s (timeout)"
                break
            except httpx.TransportError as exc:
                out.error = f"cannot reach {self.spec.url}: {type(exc).__name__}"
            except httpx.RequestError as exc:  # a reply that cannot be decoded, ...
                out.error = f"the request failed: {type(exc).__name__}"
                break
            else:
                if response.status_code == 200:
                    self._read(response, out)
                    break
                out.error = self._scrub(_error_text(response))
                if response.status_code not in _RETRY_STATUS:
                    break
                wait = retry_after(response.headers.get("retry-after"))
            finally:
                self.slots.put_nowait(slot)
            if attempt == self.spec.retries:
                break
            if wait is None:
                wait = min(MAX_WAIT, BACKOFF * 2**attempt) * (0.5 + random.random() / 2)
            await asyncio.sleep(wait)
        out.latency_ms = (time.perf_counter() - started) * 1000
        return out

    @staticmethod
    def _read(response: httpx.Response, out: Answer) -> None:
        try:
            body = response.json()
            choice = body["choices"][0]
            content = choice["message"].get("content")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            out.error = "the reply is not a chat completion (no choices[0].message)"
            return
        if not isinstance(content, str):
            reason = choice.get("finish_reason") if isinstance(choice, dict) else None
            out.error = f"the reply has no text (finish_reason {reason!r})"
            return
        out.output, out.error = content, None
        usage = body.get("usage")
        out.prompt_tokens = _usage(usage, "prompt_tokens")
        out.completion_tokens = _usage(usage, "completion_tokens")
