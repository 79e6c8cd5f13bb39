"""Writes spans, logs, findings and run signatures to ClickHouse in columnar batches.

Rows are buffered per table and written as one Arrow batch per table when `batch_max_rows` is
reached or `flush_interval_s` has passed, never a write per span. Attribute values are written
as the OpenTelemetry Collector's ClickHouse exporter writes them (strings; arrays and maps as
JSON), so the two are interchangeable on the same tables.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from collector.queries import record_outcome
from collector.store import Store
from processors.conventions import MODE_CODES, MODES_BY_CODE
from processors.model import Finding, OutcomeUpdate, RunSignature
from processors.records import AttrValue, LogRecord, SpanRecord

log = logging.getLogger(__name__)

_NS = pa.timestamp("ns", tz="UTC")
_MS = pa.timestamp("ms", tz="UTC")
_STR_MAP = pa.map_(pa.string(), pa.string())


def attr_to_str(value: AttrValue) -> str:
    """An attribute value as the ClickHouse exporter stores it."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value) if isinstance(value, float) else str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if value is None:
        return ""
    return json.dumps(_jsonable(value), ensure_ascii=False, separators=(",", ":"))


def _jsonable(value: AttrValue) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def _str_map(attributes: dict[str, AttrValue]) -> list[tuple[str, str]]:
    return [(key, attr_to_str(value)) for key, value in attributes.items()]


# The tables this exporter writes, in write order.
TABLES: tuple[str, ...] = ("otel_traces", "otel_logs", "mast_findings", "mast_signatures")

# Upper bounds (seconds) of the write-latency histogram: an embedded insert takes milliseconds,
# a remote server under load seconds; past 10 s a batch is in trouble whatever the cause.
WRITE_SECONDS_BUCKETS: tuple[float, ...] = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)


@dataclass
class LatencyHistogram:
    """Cumulative-bucket histogram of durations, read by self-metrics as a snapshot."""

    bounds: tuple[float, ...] = WRITE_SECONDS_BUCKETS
    counts: list[int] = field(default_factory=lambda: [0] * (len(WRITE_SECONDS_BUCKETS) + 1))
    total_seconds: float = 0.0
    count: int = 0

    def observe(self, seconds: float) -> None:
        index = next((i for i, bound in enumerate(self.bounds) if seconds <= bound), -1)
        self.counts[index] += 1
        self.total_seconds += seconds
        self.count += 1

    def snapshot(self) -> dict[str, Any]:
        """Cumulative counts per upper bound as Prometheus writes it ("0.005", ..., "+Inf"),
        the sum and the count: plain JSON, so /healthz can carry it too."""
        cumulative: list[tuple[str, int]] = []
        running = 0
        labels = [repr(bound) for bound in self.bounds] + ["+Inf"]
        for label, n in zip(labels, self.counts, strict=True):
            running += n
            cumulative.append((label, running))
        return {"buckets": cumulative, "sum": self.total_seconds, "count": self.count}


@dataclass
class ExporterStats:
    rows_written: dict[str, int] = field(default_factory=dict)
    batches_written: int = 0
    write_errors: int = 0
    last_write_seconds: float = 0.0
    # Failed writes by table, and how long each write took (failed ones included).
    write_errors_by_table: dict[str, int] = field(default_factory=dict)
    write_seconds: LatencyHistogram = field(default_factory=LatencyHistogram)


class ClickHouseExporter:
    def __init__(self, store: Store, batch_max_rows: int, flush_interval_s: float) -> None:
        self.store = store
        self.batch_max_rows = batch_max_rows
        self.flush_interval_s = flush_interval_s
        self._spans: list[SpanRecord] = []
        self._logs: list[LogRecord] = []
        self._findings: list[Finding] = []
        self._signatures: list[RunSignature] = []
        self._outcomes: list[OutcomeUpdate] = []
        self._last_flush = time.monotonic()
        self.stats = ExporterStats()

    @property
    def buffered_rows(self) -> int:
        return (
            len(self._spans)
            + len(self._logs)
            + len(self._findings)
            + len(self._signatures)
            + len(self._outcomes)
        )

    def add_spans(self, spans: list[SpanRecord]) -> None:
        self._spans.extend(spans)

    def add_logs(self, logs: list[LogRecord]) -> None:
        self._logs.extend(logs)

    def add_findings(self, findings: list[Finding]) -> None:
        self._findings.extend(findings)

    def add_signatures(self, signatures: list[RunSignature]) -> None:
        self._signatures.extend(signatures)

    def add_outcomes(self, outcomes: list[OutcomeUpdate]) -> None:
        self._outcomes.extend(outcomes)

    def flush(self, now: float, force: bool = False) -> None:
        due = now - self._last_flush >= self.flush_interval_s
        if not (force or due or self.buffered_rows >= self.batch_max_rows):
            return
        self._last_flush = now
        # Spans first: a finding or signature should never point at spans not yet stored.
        batches: tuple[tuple[str, list[Any], Callable[[], pa.Table]], ...] = (
            ("otel_traces", self._spans, lambda: spans_table(self._spans)),
            ("otel_logs", self._logs, lambda: logs_table(self._logs)),
            ("mast_findings", self._findings, lambda: findings_table(self._findings)),
            ("mast_signatures", self._signatures, lambda: signatures_table(self._signatures)),
        )
        for name, rows, build in batches:
            if not rows:
                continue
            started = time.perf_counter()
            try:
                self.store.insert_arrow(name, build())
            except Exception:
                self.stats.write_errors += 1
                errors = self.stats.write_errors_by_table
                errors[name] = errors.get(name, 0) + 1
                self.stats.write_seconds.observe(time.perf_counter() - started)
                raise
            self.stats.last_write_seconds = time.perf_counter() - started
            self.stats.write_seconds.observe(self.stats.last_write_seconds)
            self.stats.batches_written += 1
            self.stats.rows_written[name] = self.stats.rows_written.get(name, 0) + len(rows)
            rows.clear()
        # After the signatures: an outcome rewrites the stored signature of its run.
        while self._outcomes:
            update = self._outcomes[0]
            try:
                record_outcome(self.store, update.trace_id, update.outcome, update.score)
            except Exception:
                self.stats.write_errors += 1
                raise
            self._outcomes.pop(0)

    def close(self) -> None:
        self.flush(time.monotonic(), force=True)


def spans_table(spans: list[SpanRecord]) -> pa.Table:
    return pa.table(
        {
            "Timestamp": pa.array([s.start_ns for s in spans], _NS),
            "TraceId": [s.trace_id for s in spans],
            "SpanId": [s.span_id for s in spans],
            "ParentSpanId": [s.parent_span_id for s in spans],
            "TraceState": [s.trace_state for s in spans],
            "SpanName": [s.name for s in spans],
            "SpanKind": [s.kind for s in spans],
            "ServiceName": [s.service_name for s in spans],
            "ResourceAttributes": pa.array(
                [_str_map(s.resource_attributes) for s in spans], _STR_MAP
            ),
            "ScopeName": [s.scope_name for s in spans],
            "ScopeVersion": [s.scope_version for s in spans],
            "SpanAttributes": pa.array([_str_map(s.attributes) for s in spans], _STR_MAP),
            "Duration": pa.array([max(0, s.end_ns - s.start_ns) for s in spans], pa.uint64()),
            "StatusCode": [s.status_code for s in spans],
            "StatusMessage": [s.status_message for s in spans],
            "Events.Timestamp": pa.array(
                [[e.time_ns for e in s.events] for s in spans], pa.list_(_NS)
            ),
            "Events.Name": pa.array(
                [[e.name for e in s.events] for s in spans], pa.list_(pa.string())
            ),
            "Events.Attributes": pa.array(
                [[_str_map(e.attributes) for e in s.events] for s in spans], pa.list_(_STR_MAP)
            ),
            "Links.TraceId": pa.array(
                [[x.trace_id for x in s.links] for s in spans], pa.list_(pa.string())
            ),
            "Links.SpanId": pa.array(
                [[x.span_id for x in s.links] for s in spans], pa.list_(pa.string())
            ),
            "Links.TraceState": pa.array(
                [[x.trace_state for x in s.links] for s in spans], pa.list_(pa.string())
            ),
            "Links.Attributes": pa.array(
                [[_str_map(x.attributes) for x in s.links] for s in spans], pa.list_(_STR_MAP)
            ),
        }
    )


def logs_table(logs: list[LogRecord]) -> pa.Table:
    return pa.table(
        {
            "Timestamp": pa.array([r.time_ns or r.observed_time_ns for r in logs], _NS),
            "TraceId": [r.trace_id for r in logs],
            "SpanId": [r.span_id for r in logs],
            "TraceFlags": pa.array([r.flags & 0xFF for r in logs], pa.uint8()),
            "SeverityText": [r.severity_text for r in logs],
            "SeverityNumber": pa.array(
                [max(0, min(255, r.severity_number)) for r in logs], pa.uint8()
            ),
            "ServiceName": [r.service_name for r in logs],
            "Body": [attr_to_str(r.body) for r in logs],
            "ResourceAttributes": pa.array(
                [_str_map(r.resource_attributes) for r in logs], _STR_MAP
            ),
            "ScopeName": [r.scope_name for r in logs],
            "ScopeVersion": [r.scope_version for r in logs],
            "LogAttributes": pa.array([_str_map(r.attributes) for r in logs], _STR_MAP),
            "EventName": [r.event_name for r in logs],
        }
    )


def findings_table(findings: list[Finding]) -> pa.Table:
    now_ms = int(time.time() * 1000)
    modes = [MODES_BY_CODE.get(f.mode) for f in findings]
    return pa.table(
        {
            "Timestamp": pa.array([f.time_ns for f in findings], _NS),
            "DetectedAt": pa.array([now_ms] * len(findings), _MS),
            "FindingId": [f.finding_id for f in findings],
            "TraceId": [f.trace_id for f in findings],
            "SpanId": [f.span_id for f in findings],
            "Mode": [f.mode for f in findings],
            "ModeName": [m.name if m else "" for m in modes],
            "Category": [m.category if m else "" for m in modes],
            "Detector": [f.detector for f in findings],
            "DetectorVersion": [f.detector_version for f in findings],
            "Rule": [f.rule for f in findings],
            "Confidence": pa.array([f.confidence for f in findings], pa.float32()),
            "Message": [f.message for f in findings],
            "EvidenceSpanIds": pa.array(
                [list(f.evidence_span_ids) for f in findings], pa.list_(pa.string())
            ),
            "Evidence": [json.dumps(f.evidence, ensure_ascii=False, default=str) for f in findings],
            "ServiceName": [f.service for f in findings],
            "AgentName": [f.agent for f in findings],
            "Model": [f.model for f in findings],
            "CostSeconds": pa.array([f.cost.seconds for f in findings], pa.float64()),
            "CostLlmCalls": pa.array([f.cost.llm_calls for f in findings], pa.uint32()),
            "CostToolCalls": pa.array([f.cost.tool_calls for f in findings], pa.uint32()),
            "CostInputTokens": pa.array([f.cost.input_tokens for f in findings], pa.uint64()),
            "CostOutputTokens": pa.array([f.cost.output_tokens for f in findings], pa.uint64()),
            "Intervention": [m.intervention if m else "" for m in modes],
        }
    )


def signatures_table(signatures: list[RunSignature]) -> pa.Table:
    now_ns = time.time_ns()
    return pa.table(
        {
            "TraceId": [s.trace_id for s in signatures],
            "Start": pa.array([s.start_ns for s in signatures], _NS),
            "End": pa.array([s.end_ns for s in signatures], _NS),
            "ClosedAt": pa.array([now_ns // 1_000_000] * len(signatures), _MS),
            "ServiceName": [s.service for s in signatures],
            "AgentName": [s.agent for s in signatures],
            "Model": [s.model for s in signatures],
            "ConversationId": [s.conversation_id for s in signatures],
            "CloseReason": [s.close_reason for s in signatures],
            "Steps": pa.array([s.steps for s in signatures], pa.uint32()),
            "LlmCalls": pa.array([s.llm_calls for s in signatures], pa.uint32()),
            "ToolCalls": pa.array([s.tool_calls for s in signatures], pa.uint32()),
            "Errors": pa.array([s.errors for s in signatures], pa.uint32()),
            "InputTokens": pa.array([s.input_tokens for s in signatures], pa.uint64()),
            "OutputTokens": pa.array([s.output_tokens for s in signatures], pa.uint64()),
            "FailureVector": pa.array(
                [[1 if s.mode_counts.get(c) else 0 for c in MODE_CODES] for s in signatures],
                pa.list_(pa.uint8()),
            ),
            "Modes": pa.array([s.modes for s in signatures], pa.list_(pa.string())),
            "ModeCounts": pa.array(
                [list(s.mode_counts.items()) for s in signatures],
                pa.map_(pa.string(), pa.uint32()),
            ),
            "FindingCount": pa.array(
                [sum(s.mode_counts.values()) for s in signatures], pa.uint32()
            ),
            "DistinctModes": pa.array([len(s.modes) for s in signatures], pa.uint8()),
            "Outcome": [s.outcome for s in signatures],
            "Score": pa.array([s.score for s in signatures], pa.float64()),
            "Version": pa.array([now_ns] * len(signatures), pa.uint64()),
        }
    )
