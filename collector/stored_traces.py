"""Analysis of whole traces read back from the store.

The spans table holds every span any collector replica received, so a trace whose spans were
split across replicas (the load balancer moved its trace id when replicas came or went) is
whole there even when no single replica saw all of it. `analyze_stored_traces` runs the same
pipeline as `serve` over such traces and returns their findings and signatures, as one
collector that had seen every span would have produced them.

Stored attribute values are text (as the OpenTelemetry Collector's ClickHouse exporter writes
them); the dialect readers coerce counts, flags and JSON from text, so the steps read back are
the steps that were read live.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from collector.config import Config
from collector.exporters.base import MemoryExporter
from collector.pipeline import Pipeline
from collector.store import Store
from processors.model import Finding, RunSignature
from processors.records import SpanEvent, SpanLink, SpanRecord

_HEX_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")

# A run read back from the store has no arrival times; a run without a root span is closed as
# a live collector would have closed it, for being idle.
CLOSE_REASON_WITHOUT_ROOT = "idle"


@dataclass
class StoredAnalysis:
    """Findings and one signature per trace, from the spans in the store."""

    findings: list[Finding] = field(default_factory=list)
    signatures: list[RunSignature] = field(default_factory=list)
    spans_read: int = 0


def read_stored_spans(store: Store, trace_ids: Iterable[str]) -> list[SpanRecord]:
    """The stored spans of `trace_ids`, one per span id (a span stored twice, by a retry or by
    two replicas, counts once), in start-time order."""
    ids = sorted({t.lower() for t in trace_ids})
    bad = [t for t in ids if not _HEX_TRACE_ID.match(t)]
    if bad:
        raise ValueError(f"trace ids must be 32 lowercase hex characters, got {bad[:3]}")
    if not ids:
        return []
    listed = ", ".join(f"'{t}'" for t in ids)
    rows = store.query(
        f"""
        SELECT TraceId, SpanId, ParentSpanId, TraceState, SpanName, SpanKind, ServiceName,
               ResourceAttributes, ScopeName, ScopeVersion, SpanAttributes,
               toUnixTimestamp64Nano(Timestamp) AS StartNs, Duration, StatusCode,
               StatusMessage,
               arrayMap(t -> toUnixTimestamp64Nano(t), `Events.Timestamp`) AS EventTimes,
               `Events.Name` AS EventNames, `Events.Attributes` AS EventAttributes,
               `Links.TraceId` AS LinkTraceIds, `Links.SpanId` AS LinkSpanIds,
               `Links.TraceState` AS LinkTraceStates, `Links.Attributes` AS LinkAttributes
        FROM {store.database}.otel_traces
        WHERE TraceId IN ({listed})
        ORDER BY StartNs, SpanId
        LIMIT 1 BY TraceId, SpanId
        """
    )
    return [_span_record(row) for row in rows]


def _span_record(row: dict[str, Any]) -> SpanRecord:
    start = int(row["StartNs"])
    return SpanRecord(
        trace_id=row["TraceId"],
        span_id=row["SpanId"],
        parent_span_id=row["ParentSpanId"],
        name=row["SpanName"],
        start_ns=start,
        end_ns=start + int(row["Duration"]),
        kind=row["SpanKind"],
        trace_state=row["TraceState"],
        status_code=row["StatusCode"],
        status_message=row["StatusMessage"],
        service_name=row["ServiceName"],
        resource_attributes=dict(row["ResourceAttributes"]),
        scope_name=row["ScopeName"],
        scope_version=row["ScopeVersion"],
        attributes=dict(row["SpanAttributes"]),
        events=[
            SpanEvent(int(t), name, dict(attrs))
            for t, name, attrs in zip(
                row["EventTimes"], row["EventNames"], row["EventAttributes"], strict=False
            )
        ],
        links=[
            SpanLink(trace_id, span_id, state, dict(attrs))
            for trace_id, span_id, state, attrs in zip(
                row["LinkTraceIds"],
                row["LinkSpanIds"],
                row["LinkTraceStates"],
                row["LinkAttributes"],
                strict=False,
            )
        ],
    )


def analyze_stored_traces(store: Store, config: Config, trace_ids: Iterable[str]) -> StoredAnalysis:
    """Run the detectors over the whole of each trace as stored. Timing rules read span
    timestamps, not arrival, so the result does not depend on when or where spans arrived."""
    spans = read_stored_spans(store, trace_ids)
    exporter = MemoryExporter()
    # The deterministic detectors only: a semantic judge's verdicts arrive on their own.
    config = dataclasses.replace(config, judge=dataclasses.replace(config.judge, enabled=False))
    pipeline = Pipeline(config, exporter, clock=lambda: 0.0)
    pipeline.process_spans(spans, now=0.0)
    pipeline.close_all(CLOSE_REASON_WITHOUT_ROOT)
    return StoredAnalysis(exporter.findings, exporter.signatures, len(spans))
