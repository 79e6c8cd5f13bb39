"""`mast-otel demo`: start a collector on the embedded store, run the scripted agent's
scenarios through the real OpenTelemetry SDK over OTLP, and report each run's signature; or,
with `--endpoint`, send the runs to a collector that is already running (an OpenTelemetry
Collector in front of mast-otel replicas, say), once or in a loop."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace.export import SpanExporter

from mast_otel.collector.config import Config, on_free_loopback_ports
from mast_otel.collector.demo.agent import SCENARIOS, AgentRun, Scenario, SreAgent, tracer_provider
from mast_otel.collector.service import Service
from mast_otel.collector.store import ChdbStore, queries


def otlp_exporter(transport: str, service: Service) -> SpanExporter:
    """The SDK's own OTLP exporter, pointed at the service's loopback receiver."""
    port = service.grpc_port if transport == "grpc" else service.http_port
    return exporter_to(transport, f"127.0.0.1:{port}")


def exporter_to(transport: str, endpoint: str) -> SpanExporter:
    """The SDK's own OTLP exporter for `endpoint` (HOST:PORT; for HTTP also a full URL)."""
    if transport == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        target = endpoint.removeprefix("http://")
        return OTLPSpanExporter(endpoint=target, insecure=True)
    if transport == "http":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HttpExporter,
        )

        url = endpoint if "://" in endpoint else f"http://{endpoint}/v1/traces"
        return HttpExporter(endpoint=url)
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
    try:
        return _one_round(provider, dialects, scenarios)
    finally:
        provider.shutdown()


def _one_round(
    provider: Any, dialects: list[str], scenarios: tuple[Scenario, ...] = SCENARIOS
) -> list[AgentRun]:
    runs = []
    for dialect in dialects:
        agent = SreAgent(provider.get_tracer("mast-otel.demo"), dialect=dialect)
        for scenario in scenarios:
            runs.append(agent.run(scenario, conversation=f"{scenario.name}-{dialect}"))
    if not provider.force_flush(30_000):
        raise RuntimeError("the OpenTelemetry SDK could not export every span in 30 s")
    return runs


def send_runs(
    endpoint: str,
    transport: str,
    dialects: list[str],
    stop: threading.Event,
    loop: bool = False,
    interval_s: float = 5.0,
    service_name: str = "sre-agent",
    on_round: Callable[[int, list[AgentRun]], None] | None = None,
) -> int:
    """Send the scenarios to a collector at `endpoint`: one round, or rounds every
    `interval_s` seconds until `stop` is set. Returns the number of runs handed to the SDK.

    Each round is flushed before the next starts. A collector that is down or refusing makes
    the SDK's exporter retry with backoff and then log the batch as lost; the loop goes on
    with the next round, so a demo fleet outlives a restart of the collector it sends to."""
    provider = tracer_provider(exporter_to(transport, endpoint), service=service_name)
    sent = 0
    rounds = 0
    try:
        while not stop.is_set():
            try:
                runs = _one_round(provider, dialects)
            except RuntimeError:
                runs = []
            rounds += 1
            sent += len(runs)
            if on_round is not None:
                on_round(rounds, runs)
            if not loop or stop.wait(interval_s):
                break
    finally:
        provider.shutdown()
    return sent


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
