"""One call seen twice, by the proxy and as a span (the same response id, so the same capture
key): one capture holding the best of both, whichever came first — the span's conversation
id, trace and span ids and span name, the proxy's exact text and metadata.

- The proxy's capture stored first: it takes what only the span knows (``adopt_span``); its
  texts and results stay.
- The span's capture stored first: it takes the proxy's texts and metadata
  (``merge_proxied``) and is scored again on those texts. This is the one write, besides an
  eval's rescore, that replaces a stored capture's results; nothing else rewrites them.

Both rewrite one capture in the caller's write transaction (``rewrite``): its ``capture_meta``
rows, its conversations' summaries, and — when the rollups counted it already (its id at or
below their watermark) — ``trend_rollup``, ``meta_rollup`` and ``meta_capture_rollup`` follow,
the capture taken out of them as it was and counted again as it is, so every count stays
exact. On PostgreSQL the capture's row is locked first, then the capture lock taken: shared,
as a capture takes it, when the rollups have not counted the capture (the watermark cannot
move past it until the commit, and captures go on meanwhile), else exclusively, as the rollup
takes it (``roll_up``: its sums are read, then written); a capture counted in between is
``Recount``, to be run again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from simeval.jsontypes import JSONObject, JSONValue
from simeval.store import Capture, Tx, unpack_results
from simeval.store.spans_sql import capture_for_update, rewrite_capture

# what a span knows of a call and the proxy does not
SPAN_KEYS = ("trace_id", "span_id", "span_name")
# what a capture's metadata says of its own texts: not true of another copy's texts
TEXT_NOTES = ("cut", "no_input")
# the ids the proxy can know only from the request's W3C ``traceparent`` header: those of
# the caller's span around the HTTP request (the GenAI span's for OpenLLMetry; an HTTP
# client's span inside it when the HTTP client is instrumented): the span's own replace them
SPAN_IDS = ("trace_id", "span_id")


def rewrite(s: Tx, keys: Sequence[str], cap: Capture, change: Callable[[], None]) -> None:
    """In the write transaction ``s``: ``change()`` edits the stored capture ``cap`` (read
    with its row locked: ``capture_for_update``; its texts, metadata, conversation,
    results); the tables read from it follow (see the module doc). ``keys``: the metadata
    keys indexed. ``Recount`` when it must be run again."""
    rewrite_capture(s, keys, cap, change)


def adopt_span(
    s: Tx,
    keys: Sequence[str],
    capture_id: int,
    conversation_id: str | None,
    span_meta: Mapping[str, JSONValue],
) -> bool:
    """In the write transaction ``s``: the proxy's capture ``capture_id`` takes the span's
    ``conversation_id`` where it has none, and the keys of ``span_meta`` its metadata lacks
    (trace and span id, span name); the span's trace and span ids replace any the proxy
    read from the request's ``traceparent`` (``SPAN_IDS``), never those of another span
    adopted before. Its texts and results stay.
    True when the capture changed."""
    cap = capture_for_update(s, capture_id)
    if cap is None:
        return False
    meta = dict(cap.meta or {})
    if "span_name" not in meta and span_meta.get("trace_id") and span_meta.get("span_id"):
        # ids with no span name: the proxy's, from the traceparent (a span's keep theirs)
        for key in SPAN_IDS:
            meta.pop(key, None)
    added = {k: v for k, v in span_meta.items() if k not in meta and v is not None}
    talk = conversation_id if cap.conversation_id is None and conversation_id else None
    merged = {**meta, **added}
    if merged == (cap.meta or {}) and talk is None:
        return False

    def change() -> None:
        cap.meta = merged
        if talk is not None:
            cap.conversation_id = talk

    rewrite(s, keys, cap, change)
    return True


def merged_meta(
    span_meta: Mapping[str, JSONValue], proxy_meta: Mapping[str, JSONValue]
) -> JSONObject:
    """The metadata of one call seen twice: the proxy's over the span's, the span's own ids
    and name kept, and nothing said of the span's copy of the texts (``TEXT_NOTES``)."""
    out = {k: v for k, v in span_meta.items() if k not in TEXT_NOTES}
    out.update(proxy_meta)
    out.update({k: span_meta[k] for k in SPAN_KEYS if k in span_meta})
    return out


def merge_proxied(
    s: Tx,
    keys: Sequence[str],
    capture_id: int,
    proxied: tuple[str, str, str | None, Mapping[str, JSONValue] | None],
    score: Callable[[str, str], bytes | None] | None,
) -> tuple[Capture, bool] | None:
    """In the write transaction ``s``: the capture ``capture_id``, stored from a span, takes
    the proxy's copy of the call ``proxied`` (input, output, conversation id, metadata):
    the proxy's exact texts, its metadata merged (``merged_meta``), the span's conversation
    id (else the proxy's). When the texts differ, or the capture was stored unscored, its
    results are replaced by ``score(input, output)`` (the packed results; ``score`` None:
    automatic evaluation is off, and the capture is left unscored). Returns the capture as
    rewritten and whether it had results before, or None when there is no such capture or
    it is the proxy's already."""
    cap = capture_for_update(s, capture_id)
    if cap is None or (cap.meta or {}).get("source") == "proxy":
        return None
    text_in, output, conversation_id, proxy_meta = proxied
    meta = merged_meta(dict(cap.meta or {}), dict(proxy_meta or {}))
    again = (cap.input, cap.output) != (text_in, output) or not cap.evaluated
    had = bool(cap.evaluated and unpack_results(cap.scores))

    def change() -> None:
        cap.input, cap.output, cap.meta = text_in, output, meta
        if cap.conversation_id is None:
            cap.conversation_id = conversation_id
        if again:
            blob = score(text_in, output) if score is not None else None
            cap.scores, cap.evaluated = blob, score is not None

    rewrite(s, keys, cap, change)
    return cap, had
