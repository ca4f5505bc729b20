"""Model calls made through a real instrumentation, exported over OTLP/HTTP: run in a
subprocess by tests/web/test_instrumentations.py (an instrumentation patches the ``openai``
module for the whole process, so each mode gets a process of its own).

``python tests/instrumented_calls.py MODE --upstream URL --otlp URL [--session ID]
[--order spans-first|logs-first] [--one-trace] [--records-without-span]
[--flush-after-captures N] [--question Q ...] [--stream-question Q ...]``

- MODE ``openai-v2``: ``opentelemetry-instrumentation-openai-v2`` in whatever mode the
  environment sets (``OTEL_SEMCONV_STABILITY_OPT_IN``,
  ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``), read when it instruments;
  ``openinference``: ``openinference-instrumentation-openai``, inside
  ``using_session(--session)`` when one is given; ``openllmetry``: Traceloop's
  ``opentelemetry-instrumentation-openai`` in its default mode (content in span attributes),
  ``openllmetry-events`` in its events mode (``use_legacy_attributes=False``: content in log
  records); ``logfire``: Pydantic's ``logfire`` (``instrument_openai``), its spans sent by
  the same exporter beside its own (``send_to_logfire=False``).
- The OpenTelemetry SDK's own OTLP/HTTP exporters (protobuf) for traces, logs and metrics,
  behind its batch processors, to ``--otlp`` (``/v1/traces``, ``/v1/logs``, ``/v1/metrics``);
  ``--order`` says which provider is shut down (so flushed) first. ``--one-trace``: every
  call inside one parent span (one trace); ``--records-without-span``: a log record
  processor (the SDK's extension point, as a log bridge that loses the span would) clears
  each record's span id before it is exported, its trace id kept — a shape no pinned
  instrumentation sends on its own. ``--flush-after-captures N``: the spans and records
  are sent only once the server at ``--otlp`` holds N captures (at most 30 s of polling), so
  a proxy's captures are stored before the spans of their calls arrive.
- The official ``openai`` client against ``--upstream`` (an OpenAI-compatible server):
  one call per ``--question``, one streamed call (with usage) per ``--stream-question``.

Prints one JSON line: ``{"ids": [response ids in order], "exports": {signal: [results]}}``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "mode",
        choices=["openai-v2", "openinference", "openllmetry", "openllmetry-events", "logfire"],
    )
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--otlp", required=True)
    parser.add_argument("--session")
    parser.add_argument("--order", choices=["spans-first", "logs-first"], default="spans-first")
    parser.add_argument("--one-trace", action="store_true")
    parser.add_argument("--records-without-span", action="store_true")
    parser.add_argument("--flush-after-captures", type=int, default=0)
    parser.add_argument("--question", action="append", default=[])
    parser.add_argument("--stream-question", action="append", default=[])
    args = parser.parse_args()

    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    exports: dict[str, list[str]] = {"traces": [], "logs": [], "metrics": []}

    def recorded(exporter: Any, signal: str) -> Any:
        """The exporter, its every export's result kept (the test asserts none failed)."""
        export = exporter.export

        def wrapped(batch: Any, *more: Any, **kw: Any) -> Any:
            result = export(batch, *more, **kw)
            exports[signal].append(result.name)
            return result

        exporter.export = wrapped
        return exporter

    resource = Resource.create({"service.name": "instrumented-engine"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(
        BatchSpanProcessor(recorded(OTLPSpanExporter(endpoint=args.otlp + "/v1/traces"), "traces"))
    )
    logger_provider = LoggerProvider(resource=resource)
    if args.records_without_span:
        from opentelemetry.sdk._logs import LogRecordProcessor

        class WithoutSpan(LogRecordProcessor):
            """Each record's span id cleared (0: none), before the batch takes it."""

            def on_emit(self, log_record: Any) -> None:
                log_record.log_record.span_id = 0

            def shutdown(self) -> None:
                pass

            def force_flush(self, timeout_millis: int = 30000) -> bool:
                return True

        logger_provider.add_log_record_processor(WithoutSpan())
    logger_provider.add_log_record_processor(
        BatchLogRecordProcessor(recorded(OTLPLogExporter(endpoint=args.otlp + "/v1/logs"), "logs"))
    )
    reader = PeriodicExportingMetricReader(
        recorded(OTLPMetricExporter(endpoint=args.otlp + "/v1/metrics"), "metrics"),
        export_interval_millis=60_000,
    )
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])

    session: Any = contextlib.nullcontext()
    if args.mode == "openai-v2":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(
            tracer_provider=tracer_provider,
            logger_provider=logger_provider,
            meter_provider=meter_provider,
        )
    elif args.mode == "logfire":
        pass  # configured with the client, below
    elif args.mode.startswith("openllmetry"):
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor as LLMetry

        LLMetry(use_legacy_attributes=args.mode == "openllmetry").instrument(
            tracer_provider=tracer_provider,
            logger_provider=logger_provider,
            meter_provider=meter_provider,
        )
    else:
        from openinference.instrumentation import using_session
        from openinference.instrumentation.openai import OpenAIInstrumentor as OIInstrumentor

        OIInstrumentor().instrument(tracer_provider=tracer_provider)
        if args.session:
            session = using_session(args.session)

    import openai

    client = openai.OpenAI(base_url=args.upstream, api_key="sk-test", max_retries=0)
    if args.mode == "logfire":
        import logfire

        logfire.configure(
            send_to_logfire=False,
            console=False,
            service_name="instrumented-engine",
            additional_span_processors=[
                BatchSpanProcessor(
                    recorded(OTLPSpanExporter(endpoint=args.otlp + "/v1/traces"), "traces")
                )
            ],
        )
        logfire.instrument_openai(client)
    # a metric of the engine's own, so that every mode sends metrics (to /v1/metrics too)
    calls = meter_provider.get_meter("instrumented-engine").create_counter("engine.calls")
    ids = []
    parent: Any = contextlib.nullcontext()
    if args.one_trace:
        parent = tracer_provider.get_tracer("engine").start_as_current_span("answer questions")
    with session, parent:
        for question in args.question:
            reply = client.chat.completions.create(
                model="gpt-test",
                messages=[
                    {"role": "system", "content": "Answer in one sentence."},
                    {"role": "user", "content": question},
                ],
            )
            ids.append(reply.id)
            calls.add(1)
        for question in args.stream_question:
            stream = client.chat.completions.create(
                model="gpt-test",
                messages=[{"role": "user", "content": question}],
                stream=True,
                stream_options={"include_usage": True},
            )
            first = None
            for chunk in stream:
                first = first or chunk.id
            ids.append(first)
            calls.add(1)
    if args.mode == "logfire":
        import logfire

        logfire.force_flush()  # its own provider: the spans sent before the process ends
    if args.flush_after_captures:
        import time

        import httpx

        for _ in range(300):
            found = httpx.get(args.otlp + "/api/captures").json()["captures"]
            if len(found) >= args.flush_after_captures:
                break
            time.sleep(0.1)
    providers = [tracer_provider, logger_provider]
    if args.order == "logs-first":
        providers.reverse()
    for provider in [*providers, meter_provider]:
        provider.shutdown()  # flushed: every batch sent before the process ends
    print(json.dumps({"ids": ids, "exports": exports}), flush=True)


if __name__ == "__main__":
    main()
