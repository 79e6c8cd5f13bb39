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
import random
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from collector.store.backends import Store, StoreError
from processors.conventions import MODE_CODES, MODES_BY_CODE, fatal_prior
from processors.model import Finding, OutcomeUpdate, RunSignature
from processors.records import AttrValue, LogRecord, SpanRecord

if TYPE_CHECKING:
    from collector.config import StorageConfig

log = logging.getLogger(__name__)

_NS = pa.timestamp("ns", tz="UTC")
_MS = pa.timestamp("ms", tz="UTC")


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


def _map_array(maps: Iterable[dict[str, AttrValue]]) -> pa.Array:
    """A Map(String, String) column from attribute maps, built from flat key and value lists
    and offsets: pyarrow converts those in C, where a list of pairs per row costs a Python
    tuple per attribute."""
    offsets = [0]
    keys: list[str] = []
    values: list[str] = []
    for attributes in maps:
        keys.extend(attributes)
        values.extend(v if type(v) is str else attr_to_str(v) for v in attributes.values())
        offsets.append(len(keys))
    return pa.MapArray.from_arrays(
        pa.array(offsets, pa.int32()), pa.array(keys, pa.string()), pa.array(values, pa.string())
    )


def _map_lists(lists: Iterable[list[dict[str, AttrValue]]]) -> pa.Array:
    """A column of lists of attribute maps (events' or links' attributes)."""
    offsets = [0]
    flat: list[dict[str, AttrValue]] = []
    for maps in lists:
        flat.extend(maps)
        offsets.append(len(flat))
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), _map_array(flat))


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
    # Spans and log records not written because the store (or the same batch) had them.
    duplicates_dropped: int = 0
    # Rows that could not be encoded for the store (each logged with its ids), dropped so
    # one bad row cannot block every row behind it.
    rows_unwritable: int = 0
    store_checks: int = 0


# ClickHouse refuses an insert touching more than 100 partitions (max_partitions_per_insert_
# block); tables are partitioned by day (or month), so a batch spread over more days than this
# is written in several inserts.
_MAX_DAYS_PER_INSERT = 90
_DAY_NS = 86_400 * 1_000_000_000
# Trace ids per existence query: keeps the statement well under max_query_size.
_IDS_PER_QUERY = 2_000
# Candidate spans further apart than this in time are looked up by separate queries, so one
# span with a wild clock does not make the lookup scan the whole table.
_CLUSTER_GAP_NS = 3_600 * 1_000_000_000
_HEX_ID = re.compile(r"^[0-9a-f]{32}$")


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


@dataclass(slots=True)
class _Rows:
    """Rows by table: the exporter's buffer, and what one flush takes from it to write (each
    list then loses its rows as they are stored)."""

    spans: list[SpanRecord] = field(default_factory=list)
    # Per span: look it up in the store before writing it.
    span_checks: list[bool] = field(default_factory=list)
    logs: list[LogRecord] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    signatures: list[RunSignature] = field(default_factory=list)
    outcomes: list[OutcomeUpdate] = field(default_factory=list)

    def put_back(self, unwritten: _Rows) -> None:
        """Rows a failed flush did not write, ahead of these, in order."""
        self.spans[:0] = unwritten.spans
        self.span_checks[:0] = unwritten.span_checks
        self.logs[:0] = unwritten.logs
        self.findings[:0] = unwritten.findings
        self.signatures[:0] = unwritten.signatures
        self.outcomes[:0] = unwritten.outcomes

    def count(self) -> int:
        return (
            len(self.spans)
            + len(self.logs)
            + len(self.findings)
            + len(self.signatures)
            + len(self.outcomes)
        )


class ClickHouseExporter:
    """Buffers rows per table and writes them in columnar batches.

    Nothing is lost on a failed write: rows stay buffered and the write is retried with
    exponential backoff (`retry_initial_s` doubling up to `retry_max_s`). `full` tells the
    pipeline to stop taking batches once `max_buffered_rows` are waiting, which makes
    receivers refuse with a retryable status instead of growing memory without bound.

    Spans flagged for checking (those that may already be in the store: replayed after a
    crash, re-sent by a sender, or buffered across a failed write) are looked up by
    (TraceId, SpanId) before writing, and log records always are (they carry no id), so a
    retried or replayed request is stored once.
    """

    def __init__(
        self,
        store: Store,
        batch_max_rows: int,
        flush_interval_s: float,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        *,
        max_buffered_rows: int = 50_000,
        retry_initial_s: float = 0.5,
        retry_max_s: float = 30.0,
        eager_flush_interval_s: float = 0.0,
    ) -> None:
        self.store = store
        self.eager_flush_interval_s = eager_flush_interval_s
        self.batch_max_rows = batch_max_rows
        self.flush_interval_s = flush_interval_s
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self.max_buffered_rows = max_buffered_rows
        self.retry_initial_s = retry_initial_s
        self.retry_max_s = retry_max_s
        self._buffer = _Rows()
        # A flush takes the buffers under this lock and writes what it took, so rows may be
        # added (by the pipeline's thread) while another thread writes.
        self._lock = threading.Lock()
        self._writing = 0  # rows taken by the flush in progress
        self._last_flush = time.monotonic()
        self._failures = 0
        self._retry_at = 0.0
        self.stats = ExporterStats()

    @property
    def buffered_rows(self) -> int:
        """Rows not yet in the store: buffered, or taken by a write in progress."""
        return self._buffer.count() + self._writing

    @property
    def full(self) -> bool:
        """Past `max_buffered_rows`: take no more until the store catches up."""
        return self.buffered_rows >= self.max_buffered_rows

    @property
    def failing(self) -> bool:
        return self._failures > 0

    def add_spans(self, spans: list[SpanRecord], check: bool | list[bool] = False) -> None:
        """Buffer spans; `check` (one flag, or one per span) asks for a store lookup first."""
        checks = [check] * len(spans) if isinstance(check, bool) else check
        with self._lock:
            self._buffer.spans.extend(spans)
            self._buffer.span_checks.extend(checks)

    def add_logs(self, logs: list[LogRecord]) -> None:
        with self._lock:
            self._buffer.logs.extend(logs)

    def add_findings(self, findings: list[Finding]) -> None:
        with self._lock:
            self._buffer.findings.extend(findings)

    def add_signatures(self, signatures: list[RunSignature]) -> None:
        with self._lock:
            self._buffer.signatures.extend(signatures)

    def add_outcomes(self, outcomes: list[OutcomeUpdate]) -> None:
        with self._lock:
            self._buffer.outcomes.extend(outcomes)

    def flush(self, now: float, force: bool = False, idle: bool = False) -> bool:
        """Write what is due. Returns True when nothing is left buffered (everything handed
        over so far is in the store), False when rows wait for a later flush; raises when the
        store failed (rows stay buffered, the next attempt waits for the backoff).

        `idle` (the caller has nothing else waiting) makes run signatures due after
        `eager_flush_interval_s` instead of `flush_interval_s`: a closed run is queryable
        sooner when there is time to spare, while a busy collector keeps its large batches."""
        with self._lock:
            waiting = self._buffer.count()
            if not waiting:
                return True
            if not force and now < self._retry_at:
                return False
            elapsed = now - self._last_flush
            eager = idle and bool(self._buffer.signatures)
            due = elapsed >= self.flush_interval_s or (
                eager and 0 < self.eager_flush_interval_s <= elapsed
            )
            if not (force or due or waiting >= self.batch_max_rows):
                return False
            self._last_flush = now
            rows, self._buffer = self._buffer, _Rows()
            self._writing = rows.count()
        try:
            # Spans first: a finding or signature should never point at spans not yet stored.
            self._write_spans(rows)
            self._write_logs(rows)
            self._write_rows("mast_findings", rows.findings, findings_table, _finding_day)
            self._write_rows("mast_signatures", rows.signatures, signatures_table, _signature_day)
            # After the signatures: an outcome rewrites the stored signature of its run.
            self._write_outcomes(rows)
        except Exception:
            self.stats.write_errors += 1
            self._failures += 1
            delay = min(self.retry_max_s, self.retry_initial_s * 2 ** (self._failures - 1))
            self._retry_at = now + delay * random.uniform(0.8, 1.0)
            # A write reported failed may still have landed (a server that timed out after
            # committing): check every span it held before writing it again.
            rows.span_checks = [True] * len(rows.spans)
            with self._lock:
                self._buffer.put_back(rows)
            raise
        finally:
            self._writing = 0
        self._failures = 0
        self._retry_at = 0.0
        return True

    def _write_outcomes(self, rows: _Rows) -> None:
        # Imported here: signature versioning builds its rows with this module's tables.
        from collector.store.signatures import UnknownRun, record_outcome

        while rows.outcomes:
            update = rows.outcomes[0]
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
            rows.outcomes.pop(0)

    def _count_retry(self, _exc: StoreError) -> None:
        self.stats.retries += 1

    def close(self) -> None:
        self.flush(time.monotonic(), force=True)

    # -- writing ------------------------------------------------------------------------------

    def _write_spans(self, rows: _Rows) -> None:
        if not rows.spans:
            return
        spans, checks = rows.spans, rows.span_checks
        seen: set[tuple[str, str]] = set()
        unique: list[SpanRecord] = []
        unique_checks: list[bool] = []
        for span, check in zip(spans, checks, strict=True):
            key = (span.trace_id, span.span_id)
            if key in seen:
                self.stats.duplicates_dropped += 1
                continue
            seen.add(key)
            unique.append(span)
            unique_checks.append(check)
        candidates = [s for s, check in zip(unique, unique_checks, strict=True) if check]
        if candidates:
            stored = existing_spans(self.store, candidates)
            self.stats.store_checks += 1
            if stored:
                before = len(unique)
                unique = [s for s in unique if (s.trace_id, s.span_id) not in stored]
                self.stats.duplicates_dropped += before - len(unique)
        # What is left is checked and unique: if a later chunk fails, only the unwritten
        # rows stay buffered, still flagged for checking.
        rows.spans, rows.span_checks = unique, [True] * len(unique)
        self._write_rows("otel_traces", rows.spans, spans_table, _span_day)
        rows.span_checks = [True] * len(rows.spans)

    def _write_logs(self, rows: _Rows) -> None:
        if not rows.logs:
            return
        seen: set[tuple[Any, ...]] = set()
        unique: list[LogRecord] = []
        for record in rows.logs:
            key = log_key(record)
            if key in seen:
                self.stats.duplicates_dropped += 1
                continue
            seen.add(key)
            unique.append(record)
        stored = existing_logs(self.store, unique)
        self.stats.store_checks += 1
        if stored:
            before = len(unique)
            unique = [r for r in unique if log_key(r) not in stored]
            self.stats.duplicates_dropped += before - len(unique)
        rows.logs = unique
        self._write_rows("otel_logs", rows.logs, logs_table, _log_day)

    def _write_rows(
        self,
        table: str,
        rows: list[Any],
        build: Callable[[list[Any]], pa.Table],
        day_of: Callable[[Any], int],
    ) -> None:
        """Write `rows` (a buffer, emptied as its rows are written) in as few inserts as the
        partition limit allows."""
        if not rows:
            return
        for chunk in _by_partition(rows, day_of):
            data, good = self._encode(table, chunk, build)
            started = time.perf_counter()
            if data is not None:
                try:
                    # Transient errors are retried at once with the same deduplication token;
                    # past the attempts, the rows stay buffered for a later flush (with backoff
                    # and a store lookup, since a write reported failed may have landed).
                    insert_with_retry(
                        self.store,
                        table,
                        data,
                        uuid.uuid4().hex,
                        self.retry,
                        self._sleep,
                        on_retry=self._count_retry,
                    )
                except Exception:
                    errors = self.stats.write_errors_by_table
                    errors[table] = errors.get(table, 0) + 1
                    self.stats.write_seconds.observe(time.perf_counter() - started)
                    raise
            self.stats.last_write_seconds = time.perf_counter() - started
            self.stats.write_seconds.observe(self.stats.last_write_seconds)
            self.stats.batches_written += 1
            self.stats.rows_written[table] = self.stats.rows_written.get(table, 0) + good
            written = {id(row) for row in chunk}
            rows[:] = [row for row in rows if id(row) not in written]

    def _encode(
        self, table: str, rows: list[Any], build: Callable[[list[Any]], pa.Table]
    ) -> tuple[pa.Table | None, int]:
        """The Arrow batch for `rows`; a row that cannot be encoded is dropped (logged with
        its ids, counted) so it cannot hold back the rows around it."""
        try:
            return build(rows), len(rows)
        except (pa.ArrowException, ValueError, TypeError, OverflowError):
            pass
        good = []
        for row in rows:
            try:
                build([row])
            except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
                self.stats.rows_unwritable += 1
                log.error(
                    "dropping a %s row that cannot be encoded (trace %s, span %s): %s",
                    table,
                    getattr(row, "trace_id", ""),
                    getattr(row, "span_id", ""),
                    exc,
                )
            else:
                good.append(row)
        return (build(good) if good else None), len(good)


def _by_partition(rows: list[Any], day_of: Callable[[Any], int]) -> list[list[Any]]:
    days: dict[int, list[Any]] = {}
    for row in rows:
        days.setdefault(day_of(row), []).append(row)
    if len(days) <= _MAX_DAYS_PER_INSERT:
        return [rows]
    ordered = sorted(days)
    return [
        [row for day in ordered[i : i + _MAX_DAYS_PER_INSERT] for row in days[day]]
        for i in range(0, len(ordered), _MAX_DAYS_PER_INSERT)
    ]


def _span_day(span: SpanRecord) -> int:
    return span.start_ns // _DAY_NS


def _log_day(record: LogRecord) -> int:
    return (record.time_ns or record.observed_time_ns) // _DAY_NS


def _finding_day(finding: Finding) -> int:
    return finding.time_ns // _DAY_NS


def _signature_day(signature: RunSignature) -> int:
    return signature.start_ns // _DAY_NS


def existing_spans(store: Store, candidates: list[SpanRecord]) -> set[tuple[str, str]]:
    """(TraceId, SpanId) of the candidates already in the store. Looked up by trace id within
    the candidates' time range (clusters of it), which the table's bloom filter and partitions
    make cheap."""
    found: set[tuple[str, str]] = set()
    wanted = {(s.trace_id, s.span_id) for s in candidates}
    ordered = sorted(candidates, key=lambda s: s.start_ns)
    clusters: list[list[SpanRecord]] = [[]]
    for span in ordered:
        if clusters[-1] and span.start_ns - clusters[-1][-1].start_ns > _CLUSTER_GAP_NS:
            clusters.append([])
        clusters[-1].append(span)
    for cluster in clusters:
        traces = sorted({s.trace_id for s in cluster if _HEX_ID.match(s.trace_id)})
        low, high = cluster[0].start_ns, cluster[-1].start_ns
        for i in range(0, len(traces), _IDS_PER_QUERY):
            listed = ",".join(f"'{t}'" for t in traces[i : i + _IDS_PER_QUERY])
            rows = store.query(
                f"SELECT TraceId AS t, SpanId AS s FROM {store.database}.otel_traces "
                f"WHERE Timestamp >= fromUnixTimestamp64Nano(toInt64({low})) "
                f"AND Timestamp <= fromUnixTimestamp64Nano(toInt64({high})) "
                f"AND TraceId IN ({listed})"
            )
            for row in rows:
                key = (row["t"], row["s"])
                if key in wanted:
                    found.add(key)
    return found


def log_key(record: LogRecord) -> tuple[Any, ...]:
    """What identifies a log record (OTLP logs carry no id): its time, source, trace context,
    event, body and attributes, as stored."""
    return (
        record.service_name,
        record.time_ns or record.observed_time_ns,
        record.trace_id,
        record.span_id,
        record.event_name,
        attr_to_str(record.body),
        tuple(sorted(_str_map(record.attributes))),
    )


def existing_logs(store: Store, records: list[LogRecord]) -> set[tuple[Any, ...]]:
    """Keys of the records already in the store, looked up by service and time (the table's
    primary key)."""
    if not records:
        return set()
    wanted = {log_key(r) for r in records}
    found: set[tuple[Any, ...]] = set()
    services = sorted({r.service_name for r in records})
    times = sorted(r.time_ns or r.observed_time_ns for r in records)
    clusters: list[list[int]] = [[]]
    for t in times:
        if clusters[-1] and t - clusters[-1][-1] > _CLUSTER_GAP_NS:
            clusters.append([])
        clusters[-1].append(t)
    listed = ",".join(_sql_string(s) for s in services)
    # Service names are sender-controlled: a huge one must not push the statement past the
    # server's max_query_size (the time range alone still finds the rows).
    where_service = f"ServiceName IN ({listed}) AND " if len(listed) < 32_768 else ""
    for cluster in clusters:
        rows = store.query(
            f"SELECT ServiceName AS service, toUnixTimestamp64Nano(Timestamp) AS ts, "
            f"TraceId AS trace_id, SpanId AS span_id, EventName AS event, Body AS body, "
            f"LogAttributes AS attributes FROM {store.database}.otel_logs "
            f"WHERE {where_service}"
            f"Timestamp >= fromUnixTimestamp64Nano(toInt64({cluster[0]})) "
            f"AND Timestamp <= fromUnixTimestamp64Nano(toInt64({cluster[-1]}))"
        )
        for row in rows:
            key = (
                row["service"],
                int(row["ts"]),
                row["trace_id"],
                row["span_id"],
                row["event"],
                row["body"],
                tuple(sorted(row["attributes"].items())),
            )
            if key in wanted:
                found.add(key)
    return found


def _sql_string(value: str) -> str:
    """A ClickHouse string literal (quotes and backslashes escaped)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


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
            "ResourceAttributes": _map_array(s.resource_attributes for s in spans),
            "ScopeName": [s.scope_name for s in spans],
            "ScopeVersion": [s.scope_version for s in spans],
            "SpanAttributes": _map_array(s.attributes for s in spans),
            "Duration": pa.array([max(0, s.end_ns - s.start_ns) for s in spans], pa.uint64()),
            "StatusCode": [s.status_code for s in spans],
            "StatusMessage": [s.status_message for s in spans],
            "Events.Timestamp": pa.array(
                [[e.time_ns for e in s.events] for s in spans], pa.list_(_NS)
            ),
            "Events.Name": pa.array(
                [[e.name for e in s.events] for s in spans], pa.list_(pa.string())
            ),
            "Events.Attributes": _map_lists([e.attributes for e in s.events] for s in spans),
            "Links.TraceId": pa.array(
                [[x.trace_id for x in s.links] for s in spans], pa.list_(pa.string())
            ),
            "Links.SpanId": pa.array(
                [[x.span_id for x in s.links] for s in spans], pa.list_(pa.string())
            ),
            "Links.TraceState": pa.array(
                [[x.trace_state for x in s.links] for s in spans], pa.list_(pa.string())
            ),
            "Links.Attributes": _map_lists([x.attributes for x in s.links] for s in spans),
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
            "ResourceAttributes": _map_array(r.resource_attributes for r in logs),
            "ScopeName": [r.scope_name for r in logs],
            "ScopeVersion": [r.scope_version for r in logs],
            "LogAttributes": _map_array(r.attributes for r in logs),
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
