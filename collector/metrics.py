"""Self-metrics: the collector's own counters in the Prometheus text exposition format.

Every number comes from `Service.health()` (pipeline, windows, receivers, store), read at
scrape time, so `/healthz` and `/metrics` never disagree. The names are spelled once, in
`schemas.metrics`: the collector-health dashboard and the Prometheus alert rules are built from
the same constants, and a test scrapes a running collector to check each one is served.

Served on `GET /metrics` of the OTLP/HTTP receiver, and, when `telemetry.metrics_endpoint` is
set, on a listener of its own (so Prometheus can scrape without reaching the OTLP port).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest, start_http_server
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from mast_otel.collector import __version__
from mast_otel.collector.receivers.delivery import ReceiverStats
from mast_otel.collector.store.arrow import TABLES
from mast_otel.processors.conventions import FATAL_PRIOR
from mast_otel.schemas.metrics import (
    BUILD_INFO,
    FINDINGS,
    PIPELINE_EXPORT_ERRORS,
    PIPELINE_RECEIVED,
    PIPELINE_UNRECOGNISED,
    QUEUE_CAPACITY,
    QUEUE_ITEMS,
    RECEIVER_ERRORS,
    RECEIVER_ITEMS_ACCEPTED,
    RECEIVER_ITEMS_REFUSED,
    RECEIVER_ITEMS_REJECTED,
    RECEIVER_LIMIT_HITS,
    RECEIVER_REQUESTS,
    RECEIVER_REQUESTS_REFUSED,
    RECOVERED,
    RUNS_CLOSED,
    RUNS_EVICTED,
    RUNS_OPEN,
    RUNS_OPENED,
    SIGNATURES,
    STAGE_CPU_SECONDS,
    STEPS,
    STORE_BATCHES_WRITTEN,
    STORE_BUFFERED_ROWS,
    STORE_ROWS_WRITTEN,
    STORE_WRITE_ERRORS,
    STORE_WRITE_SECONDS,
)

log = logging.getLogger(__name__)

HealthSource = Callable[[], dict[str, Any]]

# The classic text format every Prometheus version reads (names here need no UTF-8 escaping).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class HealthCollector(Collector):
    """Turns one `Service.health()` snapshot into metric families at each scrape."""

    def __init__(self, health: HealthSource) -> None:
        self._health = health

    def collect(self) -> Iterator[Metric]:
        status = self._health()
        yield from _receiver_metrics(status)
        yield from _pipeline_metrics(status)
        yield from _store_metrics(status.get("store", {}))
        stages = CounterMetricFamily(
            STAGE_CPU_SECONDS,
            "CPU seconds spent by stage (receive, redact, normalize, detect, store)",
            labels=["stage"],
        )
        for stage, seconds in status.get("stages", {}).items():
            stages.add_metric([stage], seconds)
        yield stages
        info = GaugeMetricFamily(BUILD_INFO, "mast-otel version", labels=["version"])
        info.add_metric([__version__], 1)
        yield info


def _receiver_metrics(status: dict[str, Any]) -> Iterator[Metric]:
    requests = CounterMetricFamily(
        RECEIVER_REQUESTS, "OTLP export requests received", labels=["transport", "signal"]
    )
    accepted = CounterMetricFamily(
        RECEIVER_ITEMS_ACCEPTED,
        "Spans and log records accepted into the pipeline",
        labels=["transport", "signal"],
    )
    refused = CounterMetricFamily(
        RECEIVER_ITEMS_REFUSED,
        "Spans and log records refused with a retryable status (pipeline full or stopping)",
        labels=["transport", "signal"],
    )
    rejected = CounterMetricFamily(
        RECEIVER_ITEMS_REJECTED,
        "Spans and log records rejected as malformed (partial success, not retried)",
        labels=["transport", "signal"],
    )
    requests_refused = CounterMetricFamily(
        RECEIVER_REQUESTS_REFUSED, "Export requests refused as a whole", labels=["transport"]
    )
    errors = CounterMetricFamily(
        RECEIVER_ERRORS,
        "Requests that failed to decode or hit an internal error",
        labels=["transport", "kind"],
    )
    limit_hits = CounterMetricFamily(
        RECEIVER_LIMIT_HITS,
        "Connections, calls and requests cut or refused because a receiver bound was hit "
        "(the limit label names the counter in /healthz)",
        labels=["transport", "limit"],
    )
    for transport in ("grpc", "http"):
        stats = status.get(transport)
        if not stats:
            continue
        for signal, prefix in (("traces", "spans"), ("logs", "logs")):
            labels = [transport, signal]
            requests.add_metric(
                labels, stats.get("trace_requests" if prefix == "spans" else "log_requests", 0)
            )
            accepted.add_metric(labels, stats.get(f"{prefix}_accepted", 0))
            refused.add_metric(labels, stats.get(f"{prefix}_refused", 0))
            rejected.add_metric(labels, stats.get(f"{prefix}_rejected", 0))
        requests_refused.add_metric([transport], stats.get("requests_refused", 0))
        errors.add_metric([transport, "decode"], stats.get("decode_errors", 0))
        errors.add_metric([transport, "internal"], stats.get("internal_errors", 0))
        for key in ReceiverStats.LIMIT_KEYS:
            limit_hits.add_metric([transport, key], stats.get(key, 0))
    yield from (requests, accepted, refused, rejected, requests_refused, errors, limit_hits)


def _pipeline_metrics(status: dict[str, Any]) -> Iterator[Metric]:
    pipeline = status.get("pipeline", {})
    windows = status.get("windows", {})
    yield GaugeMetricFamily(
        QUEUE_ITEMS, "Items waiting in the pipeline queue", value=status.get("queue_items", 0)
    )
    yield GaugeMetricFamily(
        QUEUE_CAPACITY,
        "Pipeline queue limit (pipeline.queue_max_items)",
        value=status.get("queue_max_items", 0),
    )
    received = CounterMetricFamily(
        PIPELINE_RECEIVED, "Items processed by the pipeline", labels=["signal"]
    )
    received.add_metric(["traces"], pipeline.get("spans_received", 0))
    received.add_metric(["logs"], pipeline.get("logs_received", 0))
    yield received
    yield CounterMetricFamily(
        PIPELINE_UNRECOGNISED,
        "Spans no dialect recognised (stored as-is)",
        value=pipeline.get("spans_unrecognised", 0),
    )
    yield CounterMetricFamily(
        PIPELINE_EXPORT_ERRORS,
        "Failed flushes to the store (retried)",
        value=pipeline.get("export_errors", 0),
    )
    yield GaugeMetricFamily(RUNS_OPEN, "Runs open in memory", value=status.get("active_runs", 0))
    yield CounterMetricFamily(RUNS_OPENED, "Runs opened", value=windows.get("runs_opened", 0))
    closed = CounterMetricFamily(
        RUNS_CLOSED, "Runs closed and analysed, by why they closed", labels=["reason"]
    )
    for reason, n in sorted(windows.get("runs_closed", {}).items()):
        closed.add_metric([reason], n)
    yield closed
    yield CounterMetricFamily(
        RUNS_EVICTED,
        "Runs closed early because windows.max_active_runs was reached",
        value=windows.get("runs_evicted", 0),
    )
    steps = CounterMetricFamily(
        STEPS, "Steps seen by the run windows, by what became of them", labels=["state"]
    )
    for key, state in (
        ("steps_received", "received"),
        ("steps_duplicate", "duplicate"),
        ("steps_late", "late"),
        ("steps_after_close", "after_close"),
        ("steps_trimmed", "trimmed"),
        ("pending_overflow", "pending_overflow"),
    ):
        steps.add_metric([state], windows.get(key, 0))
    yield steps
    recovered = CounterMetricFamily(
        RECOVERED,
        "What model calls' inputs showed that no span did, and calls a bound left untracked",
        labels=["what"],
    )
    for key in (
        "turns_recovered",
        "results_recovered",
        "calls_closed_unanswered",
        "conversations_untracked",
        "calls_untracked",
    ):
        recovered.add_metric([key], windows.get(f"recovery_{key}", 0))
    yield recovered
    findings = CounterMetricFamily(
        FINDINGS, "Findings by failure mode; fatal by the study's prior", labels=["mode", "fatal"]
    )
    for mode, n in sorted(pipeline.get("findings_by_mode", {}).items()):
        findings.add_metric([mode, "true" if mode in FATAL_PRIOR else "false"], n)
    yield findings
    yield CounterMetricFamily(
        SIGNATURES, "Run signatures written (runs closed)", value=pipeline.get("signatures", 0)
    )


def _store_metrics(store: dict[str, Any]) -> Iterator[Metric]:
    rows = CounterMetricFamily(STORE_ROWS_WRITTEN, "Rows written to the store", labels=["table"])
    written = store.get("rows_written", {})
    for table in sorted({*TABLES, *written}):
        rows.add_metric([table], written.get(table, 0))
    yield rows
    yield CounterMetricFamily(
        STORE_BATCHES_WRITTEN, "Batches written to the store", value=store.get("batches_written", 0)
    )
    errors = CounterMetricFamily(
        STORE_WRITE_ERRORS, "Failed batch writes to the store", labels=["table"]
    )
    failed = store.get("write_errors_by_table", {})
    for table in sorted({*TABLES, *failed}):
        errors.add_metric([table], failed.get(table, 0))
    yield errors
    yield GaugeMetricFamily(
        STORE_BUFFERED_ROWS, "Rows buffered, not yet written", value=store.get("buffered_rows", 0)
    )
    latency = store.get("write_seconds")
    if latency:
        yield HistogramMetricFamily(
            STORE_WRITE_SECONDS,
            "Time to write one batch to the store (failed writes included)",
            buckets=[(le, n) for le, n in latency["buckets"]],
            sum_value=latency["sum"],
        )


def registry_for(health: HealthSource) -> CollectorRegistry:
    """A registry of its own (not the process-global one) serving `health`'s numbers."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(HealthCollector(health))
    return registry


def exposition(registry: CollectorRegistry) -> tuple[str, bytes]:
    """(content type, body) for a scrape."""
    return CONTENT_TYPE, generate_latest(registry)


class MetricsServer:
    """A listener of its own for `/metrics` (prometheus_client's WSGI server)."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self._server, self._thread = start_http_server(port, addr=host, registry=registry)
        self.port = int(self._server.server_port)
        log.info("self-metrics on http://%s:%d/metrics", host, self.port)

    def shutdown(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5.0)
