"""What every framework's agent process shares: the OTel SDK pointed at the collector (OTLP
gRPC or HTTP, from the environment the test sets), a scripted model server of its own, no
network, and the trace ids of each scenario's runs reported back to the test."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.sdk.trace import SpanProcessor

from tests.frameworks.model_server import ModelServer

# Nothing a framework does may leave the machine: its own tracing back ends, telemetry and
# model hubs are off; the only model is the scripted server below.
OFFLINE_ENV = {
    "OPENAI_API_KEY": "sk-scripted",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_CALLBACKS_BACKGROUND": "false",
    "TRACELOOP_TELEMETRY": "false",
    "TRACELOOP_TRACE_CONTENT": "true",
    "HF_HUB_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "SMOLAGENTS_DISABLE_TELEMETRY": "1",
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "NO_PROXY": "127.0.0.1,localhost",
}
for _key, _value in OFFLINE_ENV.items():
    os.environ.setdefault(_key, _value)


def endpoint() -> tuple[str, str]:
    """(transport, endpoint) the test asked for: `grpc` HOST:PORT or `http` base URL."""
    return os.environ["MAST_TEST_TRANSPORT"], os.environ["MAST_TEST_ENDPOINT"]


def span_exporter():  # type: ignore[no-untyped-def]
    transport, where = endpoint()
    if transport == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=where, insecure=True)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpSpanExporter,
    )

    return HttpSpanExporter(endpoint=f"{where}/v1/traces")


def log_exporter():  # type: ignore[no-untyped-def]
    transport, where = endpoint()
    if transport == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter

        return OTLPLogExporter(endpoint=where, insecure=True)
    from opentelemetry.exporter.otlp.proto.http._log_exporter import (
        OTLPLogExporter as HttpLogExporter,
    )

    return HttpLogExporter(endpoint=f"{where}/v1/logs")


class RootRecorder(SpanProcessor):
    """A span processor noting the trace id of every span, so the process can say which
    traces each scenario produced."""

    def __init__(self) -> None:
        self.trace_ids: list[str] = []

    def on_start(self, span, parent_context=None):  # type: ignore[no-untyped-def]
        trace_id = format(span.context.trace_id, "032x")
        if trace_id not in self.trace_ids:
            self.trace_ids.append(trace_id)

    @contextmanager
    def scenario(self, runs: dict[str, list[str]], name: str) -> Iterator[None]:
        before = len(self.trace_ids)
        yield
        runs[name] = self.trace_ids[before:]


def tracer_provider(service: str, set_global: bool = True):  # type: ignore[no-untyped-def]
    """The SDK's provider with a batching OTLP exporter, set as the global one (unless told
    not to: a framework's own tracing then stays off, an instrumentation given the provider
    traces alone)."""
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    recorder = RootRecorder()
    provider.add_span_processor(recorder)  # type: ignore[arg-type]
    provider.add_span_processor(BatchSpanProcessor(span_exporter(), schedule_delay_millis=200))
    if set_global:
        trace.set_tracer_provider(provider)
    return provider, recorder


def model_server() -> ModelServer:
    return ModelServer().start()


def finish(provider, runs: dict[str, list[str]]) -> None:  # type: ignore[no-untyped-def]
    from tests.frameworks.scenarios import emit

    if not provider.force_flush(30_000):
        print("spans were not all exported", file=sys.stderr)
        sys.exit(3)
    provider.shutdown()
    emit(runs)
