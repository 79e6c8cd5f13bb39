"""Writes spans, logs, findings and run signatures to ClickHouse in columnar batches.

Rows are buffered per table and written as one Arrow batch per table when `batch_max_rows` is
reached or `flush_interval_s` has passed, never a write per span. A batch is built once, with a
deduplication token, and then retried as it is (same rows, same token) on transient errors, with
exponential backoff: a batch that reached the store before the error is not stored twice.
Attribute values are written as the OpenTelemetry Collector's ClickHouse exporter writes them
(strings; arrays and maps as JSON), so the two are interchangeable on the same tables.
"""

from __future__ import annotations

import base64
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from collector.store import Store, StoreError
from processors.conventions import MODE_CODES, MODES_BY_CODE, fatal_prior
from processors.model import Finding, OutcomeUpdate, RunSignature
from processors.records import AttrValue, LogRecord, SpanRecord

if TYPE_CHECKING:
    from collector.config import StorageConfig

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
    retries: int = 0
    # Outcomes that arrived for a run with no stored signature (dropped, with a warning).
    outcomes_without_run: int = 0
    last_write_seconds: float = 0.0
    # Failed writes by table, and how long each write took (failed ones included).
    write_errors_by_table: dict[str, int] = field(default_factory=dict)
    write_seconds: LatencyHistogram = field(default_factory=LatencyHistogram)


@dataclass(frozen=True)
class RetryPolicy:
    """How a failed batch is retried: `attempts` tries in all, waiting `backoff_s`, doubling
    up to `backoff_max_s`. Only errors the store calls transient are retried."""

    attempts: int = 5
    backoff_s: float = 0.5
    backoff_max_s: float = 10.0

    @classmethod
    def of(cls, storage: StorageConfig) -> RetryPolicy:
        return cls(storage.insert_attempts, storage.retry_backoff_s, storage.retry_backoff_max_s)

    def delays(self) -> list[float]:
        """The waits between attempts."""
        return [min(self.backoff_max_s, self.backoff_s * 2**n) for n in range(self.attempts - 1)]


def insert_with_retry(
    store: Store,
    table: str,
    data: pa.Table,
    token: str,
    policy: RetryPolicy,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[StoreError], None] | None = None,
) -> None:
    """Insert one batch, retrying transient errors with the same deduplication token."""
    delays = policy.delays()
    for attempt in range(policy.attempts):
        try:
            store.insert_arrow(table, data, dedup_token=token)
            return
        except StoreError as exc:
            if not exc.transient or attempt == policy.attempts - 1:
                raise
            if on_retry is not None:
                on_retry(exc)
            log.warning(
                "insert into %s failed (%s); retry %d of %d in %.1fs",
                table,
                exc,
                attempt + 1,
                policy.attempts - 1,
                delays[attempt],
            )
            sleep(delays[attempt])


@dataclass
class _Sealed:
    """A batch built for writing: its rows are fixed, and so is its token."""

    table: pa.Table
    rows: int
    token: str


class ClickHouseExporter:
    def __init__(
        self,
        store: Store,
        batch_max_rows: int,
        flush_interval_s: float,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.store = store
        self.batch_max_rows = batch_max_rows
        self.flush_interval_s = flush_interval_s
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self._spans: list[SpanRecord] = []
        self._logs: list[LogRecord] = []
        self._findings: list[Finding] = []
        self._signatures: list[RunSignature] = []
        # Batches built but not yet written (a write failed): retried first, unchanged.
        self._sealed: dict[str, _Sealed] = {}
        self._outcomes: list[OutcomeUpdate] = []
        self._last_flush = time.monotonic()
        self.stats = ExporterStats()

    @property
    def buffered_rows(self) -> int:
        sealed = sum(b.rows for b in self._sealed.values())
        return (
            len(self._spans)
            + len(self._logs)
            + len(self._findings)
            + len(self._signatures)
            + len(self._outcomes)
            + sealed
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
        batches: tuple[tuple[str, list[Any], Callable[[list[Any]], pa.Table]], ...] = (
            ("otel_traces", self._spans, spans_table),
            ("otel_logs", self._logs, logs_table),
            ("mast_findings", self._findings, findings_table),
            ("mast_signatures", self._signatures, signatures_table),
        )
        for name, rows, build in batches:
            if name not in self._sealed:
                if not rows:
                    continue
                self._sealed[name] = _Sealed(build(rows), len(rows), uuid.uuid4().hex)
                rows.clear()
            sealed = self._sealed[name]
            started = time.perf_counter()
            try:
                insert_with_retry(
                    self.store,
                    name,
                    sealed.table,
                    sealed.token,
                    self.retry,
                    self._sleep,
                    on_retry=self._count_retry,
                )
            except Exception:
                self.stats.write_errors += 1
                errors = self.stats.write_errors_by_table
                errors[name] = errors.get(name, 0) + 1
                self.stats.write_seconds.observe(time.perf_counter() - started)
                raise
            del self._sealed[name]
            self.stats.last_write_seconds = time.perf_counter() - started
            self.stats.write_seconds.observe(self.stats.last_write_seconds)
            self.stats.batches_written += 1
            self.stats.rows_written[name] = self.stats.rows_written.get(name, 0) + sealed.rows
        # After the signatures: an outcome rewrites the stored signature of its run.
        self._write_outcomes()

    def _write_outcomes(self) -> None:
        # Imported here: signature versioning builds its rows with this module's tables.
        from collector.signatures import UnknownRun, record_outcome

        while self._outcomes:
            update = self._outcomes[0]
            try:
                record_outcome(
                    self.store, update.trace_id, update.outcome, update.score, self.retry
                )
            except UnknownRun:
                # The run closed too long ago to be in the store (or never stored here).
                self.stats.outcomes_without_run += 1
                log.warning("outcome for trace %s: no stored signature to update", update.trace_id)
            except Exception:
                self.stats.write_errors += 1
                raise
            self._outcomes.pop(0)

    def _count_retry(self, _exc: StoreError) -> None:
        self.stats.retries += 1

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
            "Fatal": pa.array([int(fatal_prior(f.mode)) for f in findings], pa.uint8()),
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


def signatures_table(
    signatures: list[RunSignature],
    versions: list[int] | None = None,
    signs: list[int] | None = None,
) -> pa.Table:
    """Signature rows. Each row's Version defaults to now (a later write replaces an earlier
    one); `versions` and `signs` let a replacement carry the cancelling copy of the version it
    replaces (see collector/signatures.py)."""
    now_ns = time.time_ns()
    if versions is None:
        versions = [now_ns] * len(signatures)
    if signs is None:
        signs = [1] * len(signatures)
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
            "Fatal": pa.array(
                [int(any(fatal_prior(m) for m in s.modes)) for s in signatures], pa.uint8()
            ),
            "Outcome": [s.outcome for s in signatures],
            "Score": pa.array([s.score for s in signatures], pa.float64()),
            "Version": pa.array(versions, pa.uint64()),
            "Sign": pa.array(signs, pa.int8()),
        }
    )
