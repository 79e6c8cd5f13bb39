"""One writer per table: each turns the rows it is given into Arrow batches and inserts them.

A writer has a narrow interface (`export(batch)`, `shutdown()`), as OpenTelemetry's span
exporters have: the buffer, the schedule and the backoff between failed flushes belong to the
exporter that calls it (`collector.store.batching`). `export` writes the batch's rows, taking
each out of the batch once it is stored, and raises when the store failed: what is left in the
batch is what was not written.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import pyarrow as pa

from mast_otel.collector.store.arrow import (
    findings_table,
    logs_table,
    signatures_table,
    spans_table,
)
from mast_otel.collector.store.backends import Store, StoreError
from mast_otel.collector.store.duplicates import existing_logs, existing_spans, log_key
from mast_otel.collector.store.retry import DAY_NS, RetryPolicy, by_partition, insert_with_retry
from mast_otel.collector.store.signatures import UnknownRun, record_outcome
from mast_otel.collector.store.stats import ExporterStats
from mast_otel.processors.model import Finding, OutcomeUpdate, RunSignature
from mast_otel.processors.records import LogRecord, SpanRecord

log = logging.getLogger(__name__)

Row = TypeVar("Row")

_UNENCODABLE = (pa.ArrowException, ValueError, TypeError, OverflowError)


@dataclass(slots=True)
class Batch(Generic[Row]):
    """Rows for one table and, per row, whether it may already be stored (replayed, re-sent,
    or left over from a write reported failed), so a writer that can look it up does."""

    rows: list[Row] = field(default_factory=list)
    checks: list[bool] = field(default_factory=list)

    def add(self, rows: list[Row], check: bool | list[bool]) -> None:
        self.rows.extend(rows)
        self.checks.extend([check] * len(rows) if isinstance(check, bool) else check)

    def put_back(self, unwritten: Batch[Row]) -> None:
        """Rows a failed write left, ahead of these, in order; all to be looked up first (a
        write reported failed may have landed)."""
        self.rows[:0] = unwritten.rows
        self.checks[:0] = [True] * len(unwritten.rows)

    def __len__(self) -> int:
        return len(self.rows)


class TableWriter(Protocol[Row]):
    table: str

    def export(self, batch: Batch[Row]) -> None: ...

    def shutdown(self) -> None: ...


class ArrowWriter(Generic[Row]):
    """Writes rows to one table as Arrow batches: one insert per at most
    `MAX_DAYS_PER_INSERT` days, each retried on transient errors with its deduplication
    token. A row that cannot be encoded is dropped (logged with its ids, counted) so it cannot
    hold back the rows around it."""

    def __init__(
        self,
        store: Store,
        table: str,
        build: Callable[[list[Row]], pa.Table],
        time_ns: Callable[[Row], int],
        retry: RetryPolicy,
        stats: ExporterStats,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.store = store
        self.table = table
        self.build = build
        self.time_ns = time_ns
        self.retry = retry
        self.stats = stats
        self._sleep = sleep

    def export(self, batch: Batch[Row]) -> None:
        self._write(batch)

    def shutdown(self) -> None:
        return None

    def _write(self, batch: Batch[Row]) -> None:
        rows = batch.rows
        if not rows:
            return
        table = self.table
        for chunk in by_partition(rows, self._day):
            data, good = self._encode(chunk)
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
            if len(chunk) == len(rows):
                batch.rows, batch.checks = [], []
                return
            written = {id(row) for row in chunk}
            kept = [i for i, row in enumerate(rows) if id(row) not in written]
            batch.rows = [rows[i] for i in kept]
            batch.checks = [batch.checks[i] for i in kept]
            rows = batch.rows

    def _day(self, row: Row) -> int:
        return self.time_ns(row) // DAY_NS

    def _count_retry(self, _exc: StoreError) -> None:
        self.stats.retries += 1

    def _encode(self, rows: list[Row]) -> tuple[pa.Table | None, int]:
        try:
            return self.build(rows), len(rows)
        except _UNENCODABLE:
            pass
        good = []
        for row in rows:
            try:
                self.build([row])
            except _UNENCODABLE as exc:
                self.stats.rows_unwritable += 1
                log.error(
                    "dropping a %s row that cannot be encoded (trace %s, span %s): %s",
                    self.table,
                    getattr(row, "trace_id", ""),
                    getattr(row, "span_id", ""),
                    exc,
                )
            else:
                good.append(row)
        return (self.build(good) if good else None), len(good)


class DeduplicatingWriter(ArrowWriter[Row]):
    """An `ArrowWriter` for received telemetry (spans, log records): a row whose key repeats
    within the batch is written once, and rows flagged as possibly stored are looked up in the
    store first (`lookup` returns the keys it holds) and not written again."""

    def __init__(
        self,
        store: Store,
        table: str,
        build: Callable[[list[Row]], pa.Table],
        time_ns: Callable[[Row], int],
        key: Callable[[Row], Hashable],
        lookup: Callable[[Store, list[Row]], set[Any]],
        retry: RetryPolicy,
        stats: ExporterStats,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(store, table, build, time_ns, retry, stats, sleep)
        self.key = key
        self.lookup = lookup

    def export(self, batch: Batch[Row]) -> None:
        if not batch.rows:
            return
        key = self.key
        seen: set[Hashable] = set()
        unique: list[Row] = []
        unique_checks: list[bool] = []
        for row, check in zip(batch.rows, batch.checks, strict=True):
            k = key(row)
            if k in seen:
                self.stats.duplicates_dropped += 1
                continue
            seen.add(k)
            unique.append(row)
            unique_checks.append(check)
        candidates = [r for r, check in zip(unique, unique_checks, strict=True) if check]
        if candidates:
            stored = self.lookup(self.store, candidates)
            self.stats.store_checks += 1
            if stored:
                before = len(unique)
                unique = [r for r in unique if key(r) not in stored]
                self.stats.duplicates_dropped += before - len(unique)
        # What is left is checked and unique: if a later chunk fails, only the unwritten rows
        # stay buffered, still flagged for checking.
        batch.rows, batch.checks = unique, [True] * len(unique)
        self._write(batch)


def _span_key(span: SpanRecord) -> tuple[str, str]:
    return (span.trace_id, span.span_id)


class OutcomeWriter:
    """Outcomes posted for closed runs: each rewrites the stored signature of its run (a new
    version, see `collector.store.signatures`). An outcome for a run with no stored signature
    is dropped with a warning and counted."""

    table = "mast_signatures"

    def __init__(self, store: Store, retry: RetryPolicy, stats: ExporterStats) -> None:
        self.store = store
        self.retry = retry
        self.stats = stats

    def export(self, batch: Batch[OutcomeUpdate]) -> None:
        while batch.rows:
            update = batch.rows[0]
            try:
                record_outcome(
                    self.store, update.trace_id, update.outcome, update.score, self.retry
                )
            except UnknownRun:
                # The run closed too long ago to be in the store (or never stored here).
                self.stats.outcomes_without_run += 1
                log.warning("outcome for trace %s: no stored signature to update", update.trace_id)
            except Exception:
                # Counted here and again by the exporter's failed flush, as it always was.
                self.stats.write_errors += 1
                raise
            batch.rows.pop(0)
            batch.checks.pop(0)

    def shutdown(self) -> None:
        return None


@dataclass(slots=True)
class TableWriters:
    """The writers of the exporter, one per kind of row; written in this order (spans first:
    a finding or signature should never point at spans not yet stored; outcomes after the
    signatures they rewrite)."""

    spans: TableWriter[SpanRecord]
    logs: TableWriter[LogRecord]
    findings: TableWriter[Finding]
    signatures: TableWriter[RunSignature]
    outcomes: TableWriter[OutcomeUpdate]

    @classmethod
    def for_store(
        cls,
        store: Store,
        retry: RetryPolicy,
        stats: ExporterStats,
        sleep: Callable[[float], None] = time.sleep,
    ) -> TableWriters:
        return cls(
            spans=DeduplicatingWriter(
                store,
                "otel_traces",
                spans_table,
                lambda s: s.start_ns,
                _span_key,
                existing_spans,
                retry,
                stats,
                sleep,
            ),
            logs=DeduplicatingWriter(
                store,
                "otel_logs",
                logs_table,
                lambda r: r.time_ns or r.observed_time_ns,
                log_key,
                existing_logs,
                retry,
                stats,
                sleep,
            ),
            findings=ArrowWriter(
                store, "mast_findings", findings_table, lambda f: f.time_ns, retry, stats, sleep
            ),
            signatures=ArrowWriter(
                store,
                "mast_signatures",
                signatures_table,
                lambda s: s.start_ns,
                retry,
                stats,
                sleep,
            ),
            outcomes=OutcomeWriter(store, retry, stats),
        )

    def in_order(self) -> tuple[TableWriter[Any], ...]:
        return (self.spans, self.logs, self.findings, self.signatures, self.outcomes)
