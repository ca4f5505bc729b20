"""Engines on this machine: a command (JSON lines in and out) and a Python callable.

Both get each case as one JSON object, ``{"id", "input", "prompt", "system", "params",
"repeat"}``, and answer a string, or an object with ``output`` (or ``error``) and optional
``usage`` (``{"prompt_tokens", "completion_tokens"}``).

A command is started once for the run, in the current directory, and answers its stdin's
lines one by one, a line on stdout for each (in order; its stderr is the terminal's). A case
it takes longer than the timeout to answer, or a line that is not JSON, is that case's error
and the command is started again for the next case.

A callable (``module:function``, the module found from the current directory too) is called
in a worker thread (a coroutine function is awaited), ``concurrency`` at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import json
import os
import sys
import time
from collections.abc import Callable

from simeval.errors import InvalidInput
from simeval.runs.engines import Answer, Case, EngineSpec

LINE_LIMIT = 64 * 1024 * 1024  # the longest answer line a command may write


def _reply(value: object, out: Answer) -> None:
    """Fill ``out`` from what a command or callable answered."""
    if isinstance(value, str):
        out.output = value
        return
    if not isinstance(value, dict):
        out.error = f"the engine answered {type(value).__name__}, not a string or an object"
        return
    if value.get("error") is not None:
        out.error = " ".join(str(value["error"]).split())[:500] or "error"
        return
    text = value.get("output")
    if not isinstance(text, str):
        out.error = "the engine's answer has no 'output' string"
        return
    out.output = text
    usage = value.get("usage")
    if isinstance(usage, dict):
        for key in ("prompt_tokens", "completion_tokens"):
            n = usage.get(key)
            if isinstance(n, int) and not isinstance(n, bool) and n >= 0:
                setattr(out, key, n)


class CommandEngine:
    """A long-lived process answering one JSON line per case."""

    def __init__(self, spec: EngineSpec):
        self.spec = spec
        self.proc: asyncio.subprocess.Process | None = None
        self.lock = asyncio.Lock()

    async def start(self) -> None:
        """Start the command (a missing program is a usage error, before any case)."""
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *self.spec.cmd,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                limit=LINE_LIMIT,
            )
        except OSError as exc:
            raise InvalidInput(
                f"engine {self.spec.name}: cannot start {self.spec.cmd[0]!r}: {exc.strerror}"
            ) from None

    async def close(self) -> None:
        """Close the command's stdin (its end of input) and wait for it, briefly."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 5)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()

    async def answer(self, case: Case) -> Answer:
        """Send the case, read its line; a failure restarts the command for the next one."""
        out = Answer(calls=1)
        started = time.perf_counter()
        async with self.lock:
            if self.proc is None or self.proc.returncode is not None:
                await self.close()
                await self.start()
            proc = self.proc
            assert proc is not None and proc.stdin is not None and proc.stdout is not None
            broken = True  # out of step with the command, unless a line came back
            try:
                proc.stdin.write(json.dumps(case, ensure_ascii=False).encode() + b"\n")
                await proc.stdin.drain()
                line = await asyncio.wait_for(proc.stdout.readline(), self.spec.timeout)
            except TimeoutError:
                out.error = f"no answer within {self.spec.timeout:g} s (timeout)"
            except (OSError, ValueError) as exc:  # a broken pipe; a line over LINE_LIMIT
                out.error = f"the command failed: {exc}"
            else:
                if not line:
                    code = await proc.wait()
                    out.error = f"the command exited (code {code}) without answering"
                else:
                    try:
                        value = json.loads(line)
                    except (ValueError, RecursionError):
                        out.error = "the command's answer is not a JSON line"
                    else:
                        broken = False
                        _reply(value, out)
            if broken:
                await self._restart()
        out.latency_ms = (time.perf_counter() - started) * 1000
        return out

    async def _restart(self) -> None:
        # out of step with the command (an answer may still come): start afresh
        proc, self.proc = self.proc, None
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()


def load_callable(target: str, name: str) -> Callable[..., object]:
    """``module:function``, imported (the current directory searched first)."""
    module_name, _, attr = target.partition(":")
    here = os.getcwd()
    added = here not in sys.path
    if added:
        sys.path.insert(0, here)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InvalidInput(f"engine {name}: cannot import {module_name}: {exc}") from None
    finally:
        if added:
            with contextlib.suppress(ValueError):
                sys.path.remove(here)
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise InvalidInput(f"engine {name}: {module_name} has no function {attr}")
    return fn


class PythonEngine:
    """A Python callable, called with each case's object."""

    def __init__(self, spec: EngineSpec, concurrency: int):
        self.spec = spec
        self.concurrency = concurrency
        self.fn: Callable[..., object] | None = None

    async def start(self) -> None:
        """Import the callable."""
        assert self.spec.python is not None
        self.fn = load_callable(self.spec.python, self.spec.name)

    async def close(self) -> None:
        """Nothing to close."""

    async def answer(self, case: Case) -> Answer:
        """Call the function; an exception is the case's error (its type and message)."""
        assert self.fn is not None
        out = Answer(calls=1)
        started = time.perf_counter()
        try:
            if inspect.iscoroutinefunction(self.fn):
                value = await asyncio.wait_for(self.fn(case), self.spec.timeout)
            elif self.concurrency > 1:
                value = await asyncio.wait_for(asyncio.to_thread(self.fn, case), self.spec.timeout)
            else:  # one at a time: no thread to hop through
                value = self.fn(case)
        except TimeoutError:
            out.error = f"no answer within {self.spec.timeout:g} s (timeout)"
        except Exception as exc:  # the user's code: its error is the case's, not the run's
            out.error = f"{type(exc).__name__}: {exc}"[:500]
        else:
            _reply(value, out)
        out.latency_ms = (time.perf_counter() - started) * 1000
        return out
