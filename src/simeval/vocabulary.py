"""The words every capture path shares: the capture key of a model call and the metadata names.

No database and no HTTP here: the proxy (``simeval.web.replies``), OTLP ingest
(``simeval.web.otlp``) and the service's capture path (``simeval.service.capture``: the HTTP
batch API, the library and ``simeval.Client``) all use this module, so one model call gets one
key and one set of metadata names whichever way it arrived.

- ``call_key(response_id, choice=0)``: the capture key of a model call, from its response id
  (``chatcmpl-…``, ``resp_…``, ``gen_ai.response.id``). Choice 0 is the id itself (hashed when
  it is not a valid key), so keys stored before stay the same; choice ``n > 0`` (a reply asked
  with ``n > 1``) is the choice-0 key with ``#n`` appended (hashed likewise when too long).
- ``normal_meta(meta)``: capture metadata in the one vocabulary. The other keys are kept as
  they are; these are filled in or made uniform:

  ===================  =====================================================================
  ``model``            a string: ``model``, else ``gen_ai.response.model``,
                       ``gen_ai.request.model``, ``llm.model_name``
  ``provider``         a string: ``provider``, else ``gen_ai.provider.name``,
                       ``gen_ai.system``, ``llm.provider``, ``llm.system``, ``system``
  ``finish_reason``    a string: a list of one gives that one, several are joined with ``,``
                       (``"stop,length"``: nothing is lost); a JSON text of a list
                       (``'["stop"]'``) is decoded first; an empty one is left out;
                       also read from ``finish_reasons``, ``gen_ai.response.finish_reasons``
  ``input_tokens``     an integer: ``input_tokens``, else ``usage.input_tokens``,
                       ``usage.prompt_tokens``, ``gen_ai.usage.input_tokens``,
                       ``gen_ai.usage.prompt_tokens``, ``llm.token_count.prompt``
  ``output_tokens``    an integer: ``output_tokens``, else ``usage.output_tokens``,
                       ``usage.completion_tokens``, ``gen_ai.usage.output_tokens``,
                       ``gen_ai.usage.completion_tokens``, ``llm.token_count.completion``
  ``latency_ms``       a number of milliseconds, as given
  ===================  =====================================================================

  A value of a vocabulary key that cannot be read as its type (``input_tokens: "many"``) is
  kept as it was: the metadata a caller sent is never dropped.

>>> normal_meta({"finish_reason": ["stop"], "usage": {"prompt_tokens": 3, "completion_tokens": 5}})
{'finish_reason': 'stop', 'usage': {'prompt_tokens': 3, 'completion_tokens': 5}, \
'input_tokens': 3, 'output_tokens': 5}
"""

from __future__ import annotations

import hashlib
import json
import unicodedata

from simeval.checks import check_capture_key
from simeval.errors import SimevalError
from simeval.jsontypes import JSONObject, JSONValue

__all__ = ["VOCABULARY", "call_key", "normal_meta"]

VOCABULARY = ("model", "provider", "finish_reason", "input_tokens", "output_tokens", "latency_ms")

_MODEL = ("model", "gen_ai.response.model", "gen_ai.request.model", "llm.model_name")
_PROVIDER = (
    "provider",
    "gen_ai.provider.name",
    "gen_ai.system",
    "llm.provider",
    "llm.system",
    "system",
)
_FINISH = ("finish_reason", "finish_reasons", "gen_ai.response.finish_reasons")
_INPUT_TOKENS = (
    "input_tokens",
    "usage.input_tokens",
    "usage.prompt_tokens",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.token_count.prompt",
)
_OUTPUT_TOKENS = (
    "output_tokens",
    "usage.output_tokens",
    "usage.completion_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
)


def _hashed(text: str) -> str:
    """``text`` as a key when it is not one: its first 120 printable characters,
    ``~sha256:`` and the SHA-256 of the whole (at most 192 characters, under the key limit)."""
    head = "".join(c for c in text[:120] if unicodedata.category(c) not in ("Cc", "Cs"))
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{head}~sha256:{digest}"


def _as_key(text: str) -> str:
    try:
        return check_capture_key(text) or _hashed(text)
    except SimevalError:
        return _hashed(text)


def call_key(response_id: object, choice: int = 0) -> str | None:
    """The capture key of one model call (one choice of it): its response id as is when it
    is a valid key, else hashed (``~sha256:``), so the same id always gives the same key (a
    replayed reply is stored once) and two ids never share one. ``choice`` n > 0: the key
    of choice 0 with ``#n`` after it, distinct and stable. Not a string (or empty): no key.

    >>> call_key("chatcmpl-1"), call_key("chatcmpl-1", 2)
    ('chatcmpl-1', 'chatcmpl-1#2')
    >>> len(call_key("r" * 500))
    192
    >>> call_key(5) is None
    True
    """
    if not isinstance(response_id, str) or not response_id:
        return None
    key = _as_key(response_id)
    if isinstance(choice, bool) or not isinstance(choice, int) or choice <= 0:
        return key
    return _as_key(f"{key}#{choice}")


def _lookup(meta: JSONObject, names: tuple[str, ...]) -> JSONValue:
    """The first of ``names`` present (not None) in ``meta``; ``a.b`` also looks in
    ``meta["a"]["b"]`` (``usage.prompt_tokens``), as a flat key first."""
    for name in names:
        if meta.get(name) is not None:
            return meta[name]
        head, _, rest = name.partition(".")
        inner = meta.get(head)
        if rest and isinstance(inner, dict) and inner.get(rest) is not None:
            return inner[rest]
    return None


def _finish_text(value: JSONValue) -> JSONValue:
    """A finish reason as one string (see the module's table); None when there is none."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    if isinstance(value, list | tuple):
        parts = [v if isinstance(v, str) else json.dumps(v) for v in value if v is not None]
        return ",".join(p for p in parts if p) or None
    if isinstance(value, str):
        return value or None
    if isinstance(value, dict):
        return value  # not a finish reason of any known shape: kept as sent
    return str(value).lower() if isinstance(value, bool) else str(value)


def _count(value: JSONValue) -> JSONValue:
    """A token count as an integer (``"12"``, ``12.0``); else the value as it was."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return value


def normal_meta(meta: JSONObject | None) -> JSONObject | None:
    """Capture metadata with the vocabulary keys filled in and uniform (see the module's
    table), a new dict (``meta`` is not changed); the other keys kept as they are. Idempotent:
    normal metadata comes back equal. None (or not a dict) comes back as it is.

    >>> normal_meta({"gen_ai.usage.input_tokens": 7, "finish_reason": '["stop", "length"]'})
    {'gen_ai.usage.input_tokens': 7, 'finish_reason': 'stop,length', 'input_tokens': 7}
    """
    if not isinstance(meta, dict):
        return meta
    out = dict(meta)
    for name, names in (("model", _MODEL), ("provider", _PROVIDER)):
        value = _lookup(meta, names)
        if value is not None:
            out[name] = value if isinstance(value, str) else json.dumps(value)
    finish = _finish_text(_lookup(meta, _FINISH))
    if finish is not None:
        out["finish_reason"] = finish
    elif "finish_reason" in out and _finish_text(out["finish_reason"]) is None:
        del out["finish_reason"]  # an empty list or text: no finish reason
    for name, names in (("input_tokens", _INPUT_TOKENS), ("output_tokens", _OUTPUT_TOKENS)):
        value = _lookup(meta, names)
        if value is not None:
            out[name] = _count(value)
    return out
