"""A fleet's worth of OTLP payloads from the scenario corpus: every scenario in every dialect
recorded once through the real SDK, then copied with fresh trace and span ids, interleaved as
many concurrent runs would be, and serialized ahead of time so the sender only sends."""

from __future__ import annotations

import random
from dataclasses import dataclass

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mast_otel.collector.demo.agent import SreAgent, tracer_provider
from mast_otel.collector.demo.dialects import DIALECTS
from tests.corpus import CORPUS


class _Discard(SpanExporter):
    def export(self, spans):  # type: ignore[no-untyped-def]
        return SpanExportResult.SUCCESS


@dataclass
class Fleet:
    """Pre-serialized requests, and for each request the runs whose last span it carries."""

    requests: list[bytes]
    span_counts: list[int]  # per request
    last_span_of: list[list[str]]  # per request: trace ids (hex) that end in it
    spans: int
    runs: int


def template_runs(
    dialects: tuple[str, ...] = DIALECTS, scenarios: tuple = CORPUS
) -> list[list[PbSpan]]:
    """Every scenario in every dialect, as protobuf spans in export order (children first)."""
    memory = InMemorySpanExporter()
    provider = tracer_provider(_Discard(), also=memory)
    for dialect in dialects:
        agent = SreAgent(provider.get_tracer("fleet"), dialect=dialect)
        for scenario in scenarios:
            agent.run(scenario)
    provider.shutdown()
    request = encode_spans(memory.get_finished_spans())
    by_trace: dict[bytes, list[PbSpan]] = {}
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                by_trace.setdefault(span.trace_id, []).append(span)
    return list(by_trace.values())


def build_fleet(
    total_spans: int,
    batch_spans: int = 512,
    concurrent_runs: int = 500,
    seed: int = 7,
    templates: list[list[PbSpan]] | None = None,
) -> Fleet:
    """About `total_spans` spans in requests of `batch_spans`, from runs that are open
    `concurrent_runs` at a time (each run's spans in its own order, runs interleaved)."""
    rng = random.Random(seed)
    templates = templates or template_runs()
    resource_request = ExportTraceServiceRequest()
    resource = resource_request.resource_spans.add()
    resource.resource.attributes.add(key="service.name").value.string_value = "sre-agent"
    # Fresh ids for every copy of a template run.
    runs: list[list[PbSpan]] = []
    produced = 0
    while produced < total_spans:
        template = templates[rng.randrange(len(templates))]
        trace_id = rng.getrandbits(128).to_bytes(16, "big")
        ids = {s.span_id: rng.getrandbits(64).to_bytes(8, "big") for s in template}
        copy = []
        for span in template:
            clone = PbSpan()
            clone.CopyFrom(span)
            clone.trace_id = trace_id
            clone.span_id = ids[span.span_id]
            if span.parent_span_id:
                clone.parent_span_id = ids.get(span.parent_span_id, span.parent_span_id)
            copy.append(clone)
        runs.append(copy)
        produced += len(copy)
    # Interleave: a pool of open runs, each giving its next span in turn.
    requests: list[bytes] = []
    span_counts: list[int] = []
    last_span_of: list[list[str]] = []
    pending = iter(runs)
    open_runs: list[tuple[int, list[PbSpan]]] = []
    batch: list[PbSpan] = []
    ending: list[str] = []

    def refill() -> None:
        while len(open_runs) < concurrent_runs:
            nxt = next(pending, None)
            if nxt is None:
                return
            open_runs.append((0, nxt))

    def flush() -> None:
        request = ExportTraceServiceRequest()
        resource_spans = request.resource_spans.add()
        resource_spans.resource.CopyFrom(resource.resource)
        resource_spans.scope_spans.add().spans.extend(batch)
        requests.append(request.SerializeToString())
        span_counts.append(len(batch))
        last_span_of.append(list(ending))
        batch.clear()
        ending.clear()

    refill()
    while open_runs:
        i = rng.randrange(len(open_runs))
        position, spans = open_runs[i]
        batch.append(spans[position])
        if position + 1 == len(spans):
            ending.append(spans[position].trace_id.hex())
            open_runs[i] = open_runs[-1]
            open_runs.pop()
            refill()
        else:
            open_runs[i] = (position + 1, spans)
        if len(batch) >= batch_spans:
            flush()
    if batch:
        flush()
    return Fleet(requests, span_counts, last_span_of, produced, len(runs))
