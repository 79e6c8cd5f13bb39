"""The store exporter: a buffer-and-retry loop around one writer per table.

Rows are buffered per table and handed to the table's writer (`collector.store.writers`) as
one batch when `batch_max_rows` are waiting or `flush_interval_s` has passed, never a write
per span. Each insert is retried as it is (same rows, same deduplication token) on transient
errors; a flush that still fails keeps its rows buffered and the next one waits for an
exponential backoff. The buffer is bounded: past `max_buffered_rows`, `full` tells the
pipeline to hold off. The split is the one OpenTelemetry makes between a batch processor and
the exporter it drives.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mast_otel.collector.store.backends import Store
from mast_otel.collector.store.retry import RetryPolicy
from mast_otel.collector.store.stats import ExporterStats
from mast_otel.collector.store.writers import Batch, TableWriters
from mast_otel.processors.model import Finding, OutcomeUpdate, RunSignature
from mast_otel.processors.records import LogRecord, SpanRecord

if TYPE_CHECKING:
    from mast_otel.collector.config import StorageConfig


@dataclass(slots=True)
class _Rows:
    """Rows by table: the exporter's buffer, and what one flush takes from it to write (each
    batch then loses its rows as they are stored)."""

    spans: Batch[SpanRecord] = field(default_factory=Batch)
    logs: Batch[LogRecord] = field(default_factory=Batch)
    findings: Batch[Finding] = field(default_factory=Batch)
    signatures: Batch[RunSignature] = field(default_factory=Batch)
    outcomes: Batch[OutcomeUpdate] = field(default_factory=Batch)

    def in_order(self) -> tuple[Batch[Any], ...]:
        return (self.spans, self.logs, self.findings, self.signatures, self.outcomes)

    def put_back(self, unwritten: _Rows) -> None:
        """Rows a failed flush did not write, ahead of these, in order."""
        for batch, left in zip(self.in_order(), unwritten.in_order(), strict=True):
            batch.put_back(left)

    def count(self) -> int:
        return sum(len(batch) for batch in self.in_order())


class ClickHouseExporter:
    """Buffers rows per table and has each table's writer store them in columnar batches.

    Nothing is lost on a failed write: rows stay buffered and the write is retried with
    exponential backoff (`retry_initial_s` doubling up to `retry_max_s`). `full` tells the
    pipeline to stop taking batches once `max_buffered_rows` are waiting, which makes
    receivers refuse with a retryable status instead of growing memory without bound.

    Spans flagged for checking (those that may already be in the store: replayed after a
    crash, re-sent by a sender, or buffered across a failed write) are looked up by
    (TraceId, SpanId) before writing, and log records always are (they carry no id), so a
    retried or replayed request is stored once.
    """

    @classmethod
    def of(cls, store: Store, storage: StorageConfig, *, eager: bool = True) -> ClickHouseExporter:
        """The exporter the `storage` section configures, writing to `store` (`eager`: write a
        waiting signature early when nothing is queued; offline analysis, which flushes
        itself, does without)."""
        return cls(
            store,
            storage.batch_max_rows,
            storage.flush_interval_s,
            RetryPolicy.of(storage),
            max_buffered_rows=storage.max_buffered_rows,
            retry_initial_s=storage.retry_initial_s,
            retry_max_s=storage.retry_max_s,
            eager_flush_interval_s=storage.eager_flush_interval_s if eager else 0.0,
        )

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
        writers: TableWriters | None = None,
    ) -> None:
        self.store = store
        self.eager_flush_interval_s = eager_flush_interval_s
        self.batch_max_rows = batch_max_rows
        self.flush_interval_s = flush_interval_s
        self.retry = retry or RetryPolicy()
        self.max_buffered_rows = max_buffered_rows
        self.retry_initial_s = retry_initial_s
        self.retry_max_s = retry_max_s
        self.stats = ExporterStats()
        self.writers = writers or TableWriters.for_store(store, self.retry, self.stats, sleep)
        self._buffer = _Rows()
        # A flush takes the buffers under this lock and writes what it took, so rows may be
        # added (by the pipeline's thread) while another thread writes.
        self._lock = threading.Lock()
        self._writing = 0  # rows taken by the flush in progress
        self._last_flush = time.monotonic()
        self._failures = 0
        self._retry_at = 0.0

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
        with self._lock:
            self._buffer.spans.add(spans, check)

    def add_logs(self, logs: list[LogRecord]) -> None:
        with self._lock:
            self._buffer.logs.add(logs, True)

    def add_findings(self, findings: list[Finding]) -> None:
        with self._lock:
            self._buffer.findings.add(findings, False)

    def add_signatures(self, signatures: list[RunSignature]) -> None:
        with self._lock:
            self._buffer.signatures.add(signatures, False)

    def add_outcomes(self, outcomes: list[OutcomeUpdate]) -> None:
        with self._lock:
            self._buffer.outcomes.add(outcomes, False)

    def signatures_due_at(self) -> float | None:
        """When the run signatures waiting in the buffer become due for an eager write (on
        the clock `flush` is given), or None when none wait: the pipeline ticks then, so a
        closed run is written as soon as the eager interval allows, not at the tick after."""
        if self.eager_flush_interval_s <= 0 or not self._buffer.signatures.rows:
            return None
        return max(self._last_flush + self.eager_flush_interval_s, self._retry_at)

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
            eager = idle and bool(self._buffer.signatures.rows)
            due = elapsed >= self.flush_interval_s or (
                eager and 0 < self.eager_flush_interval_s <= elapsed
            )
            if not (force or due or waiting >= self.batch_max_rows):
                return False
            self._last_flush = now
            rows, self._buffer = self._buffer, _Rows()
            self._writing = rows.count()
        try:
            # In the writers' order: spans first (a finding or signature should never point at
            # spans not yet stored), outcomes after the signatures they rewrite.
            for writer, batch in zip(self.writers.in_order(), rows.in_order(), strict=True):
                writer.export(batch)
        except Exception:
            self.stats.write_errors += 1
            self._failures += 1
            delay = min(self.retry_max_s, self.retry_initial_s * 2 ** (self._failures - 1))
            self._retry_at = now + delay * random.uniform(0.8, 1.0)
            # A write reported failed may still have landed (a server that timed out after
            # committing): every row it held is checked before it is written again.
            with self._lock:
                self._buffer.put_back(rows)
            raise
        finally:
            self._writing = 0
        self._failures = 0
        self._retry_at = 0.0
        return True

    def close(self) -> None:
        self.flush(time.monotonic(), force=True)
        for writer in self.writers.in_order():
            writer.shutdown()
