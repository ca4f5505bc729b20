"""Engines that answer a data set's cases: their declarations and what one answer is.

An engine is declared in an engines file (``simeval run --engines engines.yaml``) or on the
command line (``--engine URL --model M``). Three kinds:

- ``url`` + ``model``: an OpenAI-compatible chat-completions endpoint
  (``simeval.runs.engine_http``): OpenAI, vLLM, Ollama, llama.cpp's server, LM Studio,
  LiteLLM, simeval's own proxy;
- ``cmd``: a command started once for the run, JSON lines in on its stdin, JSON lines out
  (``simeval.runs.engine_local``);
- ``python: module:function``: a Python callable (``simeval.runs.engine_local``).

The prompt is ``template`` with ``{input}`` replaced by the case's input (``"{input}"`` by
default), after an optional ``system`` prompt. The API key is read from the environment
variable ``api_key_env`` names when the engine starts: it is never part of an engine's
description, of the cache's key, of a results file or of a stored run.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypedDict

from simeval.errors import InvalidInput
from simeval.yamlfile import read_yaml

DEFAULT_TEMPLATE = "{input}"
HTTP_CONCURRENCY = 8  # requests in flight per HTTP engine unless --concurrency says otherwise
DEFAULT_TIMEOUT = 60.0  # seconds per call
DEFAULT_RETRIES = 4  # after the first try, on 429, 5xx and connection errors
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PYTHON = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
# the keys an engine's declaration may hold; anything else is a mistake worth naming
_KEYS = {
    "name",
    "url",
    "model",
    "api_key_env",
    "system",
    "template",
    "temperature",
    "max_tokens",
    "top_p",
    "seed",
    "params",
    "cmd",
    "python",
    "timeout",
    "retries",
    "concurrency",
    "prices",
}


@dataclass(frozen=True)
class EngineSpec:
    """One engine as declared: its ``kind`` (``http``, ``cmd`` or ``python``) and settings.

    ``params`` are passed through to the endpoint's request body (``temperature``,
    ``max_tokens``, ... ), to a command or a callable in each case's ``params``.
    ``prices``: per million tokens, ``{"prompt": X, "completion": Y}`` (a case's cost is
    computed from its token usage when they are given)."""

    name: str
    kind: str
    url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    system: str | None = None
    template: str = DEFAULT_TEMPLATE
    params: Mapping[str, object] = field(default_factory=dict)
    cmd: tuple[str, ...] = ()
    python: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    retries: int = DEFAULT_RETRIES
    concurrency: int | None = None
    prices: Mapping[str, float] | None = None

    def prompt(self, text: str) -> str:
        """The user message for a case whose input is ``text``."""
        return self.template.replace("{input}", text)

    def identity(self) -> dict[str, object]:
        """What the engine's answers depend on (the cache's key, with the prompt): never its
        key nor its display name (a renamed engine asks nothing again)."""
        return {
            "kind": self.kind,
            "url": self.url,
            "model": self.model,
            "system": self.system,
            "params": dict(sorted(self.params.items())),
            "cmd": list(self.cmd),
            "python": self.python,
        }

    def describe(self) -> dict[str, object]:
        """The engine as a summary and a stored run show it (the key's variable's name, never
        the key)."""
        out: dict[str, object] = {"name": self.name, "kind": self.kind}
        for key in ("url", "model", "api_key_env", "system", "python"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.cmd:
            out["cmd"] = list(self.cmd)
        if self.template != DEFAULT_TEMPLATE:
            out["template"] = self.template
        if self.params:
            out["params"] = dict(self.params)
        if self.prices:
            out["prices"] = dict(self.prices)
        return out

    def cost(self, prompt_tokens: int | None, completion_tokens: int | None) -> float | None:
        """A case's cost from its token usage, when prices are given."""
        if not self.prices or prompt_tokens is None or completion_tokens is None:
            return None
        return (
            prompt_tokens * self.prices.get("prompt", 0.0)
            + completion_tokens * self.prices.get("completion", 0.0)
        ) / 1e6

    def api_key(self) -> str | None:
        """The API key from the environment (``api_key_env``), or None when none is named.
        A named variable that is unset is a usage error, before any case is asked."""
        if self.api_key_env is None:
            return None
        value = os.environ.get(self.api_key_env)
        if not value:
            raise InvalidInput(
                f"engine {self.name}: the environment variable {self.api_key_env} "
                "(api_key_env) is not set"
            )
        return value


@dataclass
class Answer:
    """One answer of an engine to one case: the text (or the error), the tokens it used, how
    long it took, whether it came from the cache."""

    output: str | None = None
    error: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_ms: float = 0.0
    cached: bool = False
    calls: int = 0  # requests sent (retries included)


class Case(TypedDict):
    """One case as an engine is given it: a command's JSON line, a callable's argument."""

    id: str | None
    input: str
    prompt: str
    system: str | None
    params: dict[str, object]
    repeat: int


class Engine(Protocol):
    """What a run asks of an engine (``HttpEngine``, ``CommandEngine``, ``PythonEngine``):
    started once, asked each case, closed at the end."""

    async def start(self) -> None: ...

    async def answer(self, case: Case) -> Answer: ...

    async def close(self) -> None: ...


# -- reading declarations --------------------------------------------------------------------
def _number(
    value: object, what: str, low: float, high: float, integer: bool = False
) -> float | int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (integer and not isinstance(value, int))
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        kind = "an integer" if integer else "a number"
        raise InvalidInput(f"{what} must be {kind} from {low:g} to {high:g}, not {value!r}")
    return value


def _text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{what} must be a non-empty string, not {value!r}")
    return value


def engine_spec(raw: object, where: str, position: int) -> EngineSpec:
    """An ``EngineSpec`` from one entry of an engines file (``where`` names the file)."""
    if not isinstance(raw, dict):
        raise InvalidInput(f"{where}: engine {position} must be a mapping, not {raw!r}")
    name = raw.get("name", f"engine{position}")
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidInput(
            f"{where}: engine {position}: name must be letters, digits, '_', '.' or '-' "
            f"(up to 64), not {name!r}"
        )
    at = f"{where}: engine {name}"
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise InvalidInput(f"{at}: unknown key {unknown[0]!r} (keys: {', '.join(sorted(_KEYS))})")
    kinds = [k for k in ("url", "cmd", "python") if raw.get(k) is not None]
    if len(kinds) != 1:
        raise InvalidInput(f"{at}: give exactly one of url (with model), cmd or python")
    kind = {"url": "http", "cmd": "cmd", "python": "python"}[kinds[0]]
    params: dict[str, object] = {}
    extra = raw.get("params") or {}
    if not isinstance(extra, dict) or not all(isinstance(k, str) for k in extra):
        raise InvalidInput(f"{at}: params must be a mapping of names to values")
    params.update(extra)
    for key in ("temperature", "max_tokens", "top_p", "seed"):
        if raw.get(key) is not None:
            params[key] = raw[key]
    if "temperature" in params:
        _number(params["temperature"], f"{at}: temperature", 0, 2)
    if "max_tokens" in params:
        _number(params["max_tokens"], f"{at}: max_tokens", 1, 10_000_000, integer=True)
    spec: dict[str, Any] = {"name": name, "kind": kind, "params": params}
    if kind == "http":
        url = _text(raw["url"], f"{at}: url").rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise InvalidInput(f"{at}: url must start with http:// or https://, not {url!r}")
        spec["url"] = url
        spec["model"] = _text(raw.get("model"), f"{at}: model")
    elif kind == "cmd":
        spec["cmd"] = _command(raw["cmd"], at)
    else:
        target = _text(raw["python"], f"{at}: python")
        if not _PYTHON.match(target.strip()):
            raise InvalidInput(f"{at}: python must be module:function, not {target!r}")
        spec["python"] = target.strip()
    env = raw.get("api_key_env")
    if env is not None and (not isinstance(env, str) or not _ENV.match(env)):
        raise InvalidInput(f"{at}: api_key_env must name an environment variable, not {env!r}")
    spec["api_key_env"] = env
    for key in ("system", "template"):
        if raw.get(key) is not None:
            spec[key] = _text(raw[key], f"{at}: {key}")
    if "{input}" not in spec.get("template", DEFAULT_TEMPLATE):
        raise InvalidInput(f"{at}: template must contain {{input}}, where the case's input goes")
    if raw.get("timeout") is not None:
        spec["timeout"] = float(_number(raw["timeout"], f"{at}: timeout", 0.001, 3600))
    if raw.get("retries") is not None:
        spec["retries"] = int(_number(raw["retries"], f"{at}: retries", 0, 20, integer=True))
    if raw.get("concurrency") is not None:
        spec["concurrency"] = int(
            _number(raw["concurrency"], f"{at}: concurrency", 1, 1024, integer=True)
        )
    if raw.get("prices") is not None:
        spec["prices"] = _prices(raw["prices"], at)
    return EngineSpec(**spec)


def _command(value: object, at: str) -> tuple[str, ...]:
    import shlex

    if isinstance(value, str):
        try:
            parts = shlex.split(value)
        except ValueError as exc:
            raise InvalidInput(f"{at}: cmd: {exc}") from None
    elif isinstance(value, list) and all(isinstance(p, str) for p in value):
        parts = list(value)
    else:
        raise InvalidInput(f"{at}: cmd must be a command line or a list of arguments")
    if not parts:
        raise InvalidInput(f"{at}: cmd is empty")
    return tuple(parts)


def _prices(value: object, at: str) -> dict[str, float]:
    if not isinstance(value, dict) or not value or set(value) - {"prompt", "completion"}:
        raise InvalidInput(
            f"{at}: prices must be a mapping with prompt and/or completion (per million tokens)"
        )
    return {k: float(_number(v, f"{at}: prices.{k}", 0, 1e9)) for k, v in value.items()}


def load_engines(path: str) -> list[EngineSpec]:
    """The engines of an engines file (YAML or JSON: ``engines:`` a list of mappings)."""
    p = Path(path)
    if not p.is_file():
        raise InvalidInput(f"{path}: no such engines file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path} is not UTF-8 text (byte {exc.start})") from None
    doc = read_yaml(text, path)
    engines = doc.get("engines") if isinstance(doc, dict) else None
    if not isinstance(engines, list) or not engines:
        raise InvalidInput(f"{path}: no engines: give a list under 'engines:'")
    specs = [engine_spec(raw, path, i + 1) for i, raw in enumerate(engines)]
    names = [s.name for s in specs]
    for name in names:
        if names.count(name) > 1:
            raise InvalidInput(f"{path}: two engines are named {name!r}")
    return specs


def command_line_engine(
    url: str,
    model: str | None,
    api_key_env: str | None,
    system: str | None,
    template: str | None,
    params: Mapping[str, object],
) -> EngineSpec:
    """The one engine of ``--engine URL --model M`` (named after its model)."""
    if not model:
        raise InvalidInput("--engine needs --model (the model the endpoint should use)")
    raw: dict[str, object] = {
        "name": re.sub(r"[^A-Za-z0-9_.-]", "-", model)[:64].lstrip("-._") or "engine",
        "url": url,
        "model": model,
        "api_key_env": api_key_env,
        "system": system,
        "template": template,
        "params": dict(params),
    }
    return engine_spec(raw, "--engine", 1)
