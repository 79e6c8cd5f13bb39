"""`mast-otel serve` with several worker processes finds exactly what one process finds.

The same requests (the scenario corpus copied into a fleet of interleaved runs, and Codex
log-only conversations between them) are sent over OTLP/HTTP, then OTLP/gRPC, to a real `serve`
with one worker and to one with three; every finding and every signature in the two stores is
the same, column for column (but the wall-clock moments it was detected and stored), and every
span is stored once. A request refused for back-pressure is sent again, as an SDK would.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from mast_otel.collector.config import load_config, on_free_loopback_ports
from mast_otel.collector.metrics import exposition
from mast_otel.collector.service import Service
from mast_otel.collector.store import ChdbStore
from tests.benchmarks.fleet import build_fleet
from tests.load import CollectorProcess, free_port, wait_until_idle
from tests.test_route_findings import codex_requests

CONFIG = """
windows:
  grace_s: 0.3
  idle_timeout_s: 600
storage:
  flush_interval_s: 0.3
pipeline:
  workers: {workers}
"""

# Columns that say when (on the collector's clock) a row was made, not what it says.
FINDING_COLUMNS = (
    "Timestamp, FindingId, TraceId, SpanId, Mode, ModeName, Category, Detector, "
    "DetectorVersion, Rule, Confidence, Message, EvidenceSpanIds, Evidence, ServiceName, "
    "AgentName, Model, CostSeconds, CostLlmCalls, CostToolCalls, CostInputTokens, "
    "CostOutputTokens, Intervention, Fatal"
)
SIGNATURE_COLUMNS = (
    "TraceId, Start, End, ServiceName, AgentName, Model, ConversationId, CloseReason, Steps, "
    "LlmCalls, ToolCalls, Errors, InputTokens, OutputTokens, FailureVector, Modes, ModeCounts, "
    "FindingCount, DistinctModes, Fatal, Outcome, Score, Sign"
)


def stream() -> list[tuple[str, bytes]]:
    """The fleet's runs, each whole in one request (several runs to a request, so requests are
    split between workers): each run's steps then reach its window together and are released
    in start order, so what a detector sees when it fires does not depend on when ticks fall.
    Codex conversations between them, whose events arrive over several requests."""
    fleet = build_fleet(3_000, batch_spans=100, concurrent_runs=40, seed=11)
    first = ExportTraceServiceRequest.FromString(fleet.requests[0]).resource_spans[0]
    runs: dict[bytes, list[Any]] = {}
    for body in fleet.requests:
        for resource_spans in ExportTraceServiceRequest.FromString(body).resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    runs.setdefault(span.trace_id, []).append(span)
    items: list[tuple[str, bytes]] = []
    request = ExportTraceServiceRequest()
    for spans in runs.values():
        if request.resource_spans and len(request.resource_spans[0].scope_spans[0].spans) > 80:
            items.append(("traces", request.SerializeToString()))
            request = ExportTraceServiceRequest()
        if not request.resource_spans:
            resource_spans = request.resource_spans.add()
            resource_spans.resource.CopyFrom(first.resource)
            resource_spans.scope_spans.add().scope.CopyFrom(first.scope_spans[0].scope)
        request.resource_spans[0].scope_spans[0].spans.extend(spans)
    items.append(("traces", request.SerializeToString()))
    for i, body in enumerate(codex_requests(seed=5)):
        items.insert(min(len(items), i * 3 + 1), ("logs", body))
    return items


def send_http(port: int, items: list[tuple[str, bytes]]) -> int:
    refused = 0
    for signal, body in items:
        while True:
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/v1/{signal}",
                data=body,
                headers={"Content-Type": "application/x-protobuf"},
            )
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    assert response.status == 200
                break
            except urllib.error.HTTPError as exc:
                assert exc.code == 503, exc.read()
                refused += 1
                time.sleep(0.2)
    return refused


def send_grpc(port: int, items: list[tuple[str, bytes]]) -> int:
    refused = 0
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        traces = trace_service_pb2_grpc.TraceServiceStub(channel)
        logs = logs_service_pb2_grpc.LogsServiceStub(channel)
        for signal, body in items:
            while True:
                try:
                    if signal == "traces":
                        traces.Export(ExportTraceServiceRequest.FromString(body), timeout=30)
                    else:
                        logs.Export(ExportLogsServiceRequest.FromString(body), timeout=30)
                    break
                except grpc.RpcError as exc:
                    assert exc.code() == grpc.StatusCode.UNAVAILABLE, exc
                    refused += 1
                    time.sleep(0.2)
    return refused


def serve_and_read(tmp_path: Path, workers: int, items: list[tuple[str, bytes]]) -> dict[str, Any]:
    root = tmp_path / f"workers-{workers}"
    root.mkdir()
    config = root / "mast.yaml"
    config.write_text(CONFIG.format(workers=workers))
    collector = CollectorProcess(config, root / "data", free_port(), free_port())
    collector.start()
    try:
        half = len(items) // 2
        refused = send_http(collector.http_port, items[:half])
        refused += send_grpc(collector.grpc_port, items[half:])
        health = wait_until_idle(collector)
        # Runs whose end was seen close after their grace period, before the stop.
        time.sleep(2.0)
        assert collector.stop() == 0
    finally:
        collector.ensure_stopped()
    output = collector.output()
    assert "stopped; everything accepted is stored" in output, output[-3000:]
    store = ChdbStore(collector.data_dir)
    try:
        findings = store.query(
            f"SELECT {FINDING_COLUMNS} FROM otel.mast_findings FINAL ORDER BY TraceId, FindingId"
        )
        signatures = store.query(
            f"SELECT {SIGNATURE_COLUMNS} FROM otel.mast_signatures FINAL ORDER BY TraceId"
        )
        copies = store.query(
            "SELECT count() AS n, uniqExact(TraceId, SpanId) AS u FROM otel.otel_traces"
        )[0]
        logs = store.query("SELECT count() AS n FROM otel.otel_logs")[0]
    finally:
        store.close()
    return {
        "findings": findings,
        "signatures": signatures,
        "spans": int(copies["n"]),
        "unique_spans": int(copies["u"]),
        "logs": int(logs["n"]),
        "refused": refused,
        "health": health,
    }


def test_three_workers_store_the_same_findings_and_signatures_as_one(tmp_path: Path) -> None:
    items = stream()
    spans = sum(
        len(s.spans)
        for signal, body in items
        if signal == "traces"
        for r in ExportTraceServiceRequest.FromString(body).resource_spans
        for s in r.scope_spans
    )
    one = serve_and_read(tmp_path, 1, items)
    three = serve_and_read(tmp_path, 3, items)
    assert one["spans"] == one["unique_spans"] == spans
    assert three["spans"] == three["unique_spans"] == spans
    assert three["logs"] == one["logs"] > 0
    assert len(one["signatures"]) > 40
    assert one["findings"], "the corpus has failures to find"
    assert three["signatures"] == one["signatures"]
    assert three["findings"] == one["findings"]
    routing = three["health"]["workers"]["routing"]
    assert routing["requests_routed"] == len(items)
    assert len(three["health"]["workers"]["workers"]) == 3


class GatedStore:
    """The embedded store behind a gate: inserts wait while it is closed (a store that has
    fallen behind). Its owner is the receiving process, so the gate holds every worker."""

    def __init__(self, store: ChdbStore) -> None:
        self.store = store
        self.database = store.database
        self.cluster = store.cluster
        self.open = threading.Event()
        self.open.set()

    def execute(self, sql: str) -> None:
        self.store.execute(sql)

    def query(self, sql: str) -> list[dict[str, Any]]:
        return self.store.query(sql)

    def insert_arrow(self, table: str, data: Any, dedup_token: str = "") -> None:
        assert self.open.wait(60)
        self.store.insert_arrow(table, data, dedup_token)

    def close(self) -> None:
        self.store.close()


def test_a_worker_behind_makes_receivers_refuse_then_take_again(tmp_path: Path) -> None:
    config = on_free_loopback_ports(load_config(), tmp_path / "data")
    config = dataclasses.replace(
        config,
        pipeline=dataclasses.replace(
            config.pipeline, workers=2, worker_queue_max_requests=2, queue_max_items=1_000
        ),
        storage=dataclasses.replace(
            config.storage, max_buffered_rows=50, batch_max_rows=20, flush_interval_s=0.1
        ),
    )
    store = GatedStore(ChdbStore(config.storage.data_dir, config.storage.database))
    service = Service(config, store=store)
    service.start()
    accepted: list[int] = []
    refused = 0
    try:
        with grpc.insecure_channel(f"127.0.0.1:{service.grpc_port}") as channel:
            stub = trace_service_pb2_grpc.TraceServiceStub(channel)
            store.open.clear()
            for trace in range(1, 200):
                try:
                    stub.Export(spans_of(trace, 30), timeout=10)
                    accepted.append(trace)
                except grpc.RpcError as exc:
                    assert exc.code() == grpc.StatusCode.UNAVAILABLE, exc
                    assert "behind" in (exc.details() or "")
                    refused += 1
                    break
            # Bounded: the store's buffer, two batches in each pipeline, two requests waiting.
            assert refused == 1 and len(accepted) < 60
            assert service.grpc is not None
            assert service.grpc.stats["requests_refused"] >= 1
            store.open.set()
            deadline = time.monotonic() + 30
            while True:
                try:
                    stub.Export(spans_of(1_000, 30), timeout=10)
                    accepted.append(1_000)
                    break
                except grpc.RpcError:
                    assert time.monotonic() < deadline, "never taken again"
                    time.sleep(0.2)
        # Health and self-metrics add up the workers' figures.
        health = service.health()
        assert health["workers"]["routing"]["requests_routed"] == len(accepted)
        assert len(health["workers"]["workers"]) == 2
        _, body = exposition(service.metrics_registry)
        assert b"mast_otel_stage_cpu_seconds_total" in body
        assert b'mast_otel_store_rows_written_total{table="otel_traces"}' in body
    finally:
        store.open.set()
        report = service.stop()
    assert report.complete, report.describe()
    check = ChdbStore(config.storage.data_dir, config.storage.database)
    try:
        rows = check.query("SELECT TraceId AS t, count() AS n FROM otel.otel_traces GROUP BY t")
    finally:
        check.close()
    assert {int(r["t"], 16): int(r["n"]) for r in rows} == dict.fromkeys(accepted, 30)


def spans_of(trace: int, n: int) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    for i in range(n):
        span = spans.add()
        span.trace_id = trace.to_bytes(16, "big")
        span.span_id = (i + 1).to_bytes(8, "big")
        span.parent_span_id = (99).to_bytes(8, "big")
        span.name = "step"
        span.start_time_unix_nano = 1_700_000_000_000_000_000 + i
        span.end_time_unix_nano = span.start_time_unix_nano + 1
    return request
