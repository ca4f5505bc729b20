"""OpenTelemetry as captures: ``POST /v1/traces`` and ``POST /v1/logs`` (OTLP/HTTP, protobuf
or JSON, gzip, zstd or neither); ``POST /v1/metrics`` is answered and stores nothing.

A model call becomes one capture whatever instrumentation reported it and however it split
it: a span carrying its content (the GenAI conventions current and older, span events,
OpenInference LLM spans: ``genai``), or a span whose content comes in log records
(``gen_ai.user.message`` … ``gen_ai.choice``, or ``gen_ai.client.inference.operation.details``),
joined by trace and span id (``join``: a bounded table in memory, each half waiting at most
a minute for the other). Input = the last user message's text, output = the first output
message's; the key is the response id when there is one (the key the proxy gives the same
reply, ``simeval.vocabulary.call_key``), else the span id, so a call seen twice (an exporter
sending a batch again, two instrumentations, the proxy and an instrumentation) is stored
once; the capture is dated when the span ended. A value that looks cut (JSON text that does
not parse, a truncation marker) is stored with the reason in its metadata (``cut``) and not
scored; the reply's partial success counts them.

Spans and records without GenAI content are accepted and ignored. A payload that cannot be
read gets 400 and nothing of it is stored or kept (``decode``): not protobuf or JSON, the
wrong shape (``"parts": 5``), values nested more than ``MAX_JSON_DEPTH`` levels, a time
outside 0 to 2^64-1 ns; a gzip or zstd body that inflates past ``MAX_INFLATED``, or of more
than ``simeval.codings.MAX_MEMBERS`` members, gets 413 (read in time linear in the body).
Inflating and parsing run on a worker thread, never on the event loop; inflating is under no
lock, so one large body never holds up the others' inflating.
"""

from simeval.web.otlp.decode import MAX_INFLATED, UnsupportedMedia
from simeval.web.otlp.join import MAX_BYTES as OTLP_JOIN_BYTES
from simeval.web.otlp.join import Joiner
from simeval.web.otlp.routes import PARSING, close, joiner_of, parse_logs, parse_traces, router

__all__ = [
    "MAX_INFLATED",
    "OTLP_JOIN_BYTES",
    "PARSING",
    "Joiner",
    "UnsupportedMedia",
    "close",
    "joiner_of",
    "parse_logs",
    "parse_traces",
    "router",
]
