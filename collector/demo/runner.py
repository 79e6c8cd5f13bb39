"""`mast-otel demo`: start a collector on the embedded store, run the scripted agent's
scenarios through the real OpenTelemetry SDK over OTLP, and report each run's signature."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace.export import SpanExporter

from collector import queries
from collector.config import Config, on_free_loopback_ports
from collector.demo.agent import SCENARIOS, AgentRun, Scenario, SreAgent, tracer_provider
from collector.service import Service
from collector.store import ChdbStore


def otlp_exporter(transport: str, service: Service) -> SpanExporter:
    """The SDK's own OTLP exporter, pointed at the service's loopback receiver."""
    if transport == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=f"127.0.0.1:{service.grpc_port}", insecure=True)
    if transport == "http":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HttpExporter,
        )

        return HttpExporter(endpoint=f"http://127.0.0.1:{service.http_port}/v1/traces")
    raise ValueError(f"unknown transport {transport!r}; use grpc or http")


@dataclass
class DemoResult:
    runs: list[AgentRun]
    signatures: dict[str, dict[str, Any]]
    findings: list[dict[str, Any]]
    spans_stored: int
    unique_spans: int


def run_agents(
    service: Service,
    transport: str,
    dialects: list[str],
    scenarios: tuple[Scenario, ...] = SCENARIOS,
    also: SpanExporter | None = None,
) -> list[AgentRun]:
    """Send every scenario in every dialect to a running service; returns once the SDK has
    exported everything. `also` receives a copy of every span (tests use it)."""
    provider = tracer_provider(otlp_exporter(transport, service), also=also)
    runs = []
    try:
        for dialect in dialects:
            agent = SreAgent(provider.get_tracer("mast-otel.demo"), dialect=dialect)
            for scenario in scenarios:
                runs.append(agent.run(scenario, conversation=f"{scenario.name}-{dialect}"))
        if not provider.force_flush(30_000):
            raise RuntimeError("the OpenTelemetry SDK could not export every span in 30 s")
    finally:
        provider.shutdown()
    return runs


def run_demo(
    config: Config, transport: str = "grpc", dialects: list[str] | None = None
) -> DemoResult:
    config = on_free_loopback_ports(config)
    service = Service(config)
    service.start()
    try:
        runs = run_agents(service, transport, dialects or ["genai"])
    finally:
        service.stop()
    store = ChdbStore(config.storage.data_dir, config.storage.database)
    try:
        trace_ids = {r.trace_id for r in runs}
        signatures = {
            row["trace_id"]: row
            for row in queries.signatures(store, limit=100_000)
            if row["trace_id"] in trace_ids
        }
        findings = [
            row
            for row in queries.findings(store, queries.FindingFilter(limit=100_000))
            if row["trace_id"] in trace_ids
        ]
        counts = queries.span_counts(store)
    finally:
        store.close()
    return DemoResult(runs, signatures, findings, counts["spans"], counts["unique_spans"])
