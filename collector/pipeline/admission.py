"""Admission: the door receivers call (`consume_*`). A request is refused (retryable) when
the bounded queue or the spool is at its bound, else written ahead to the spool and queued;
the call returns, and the receiver acknowledges, only then.

Admission keeps the queue's account: the items and request bytes it holds (given back as the
pipeline's thread takes each batch, `taken`) and the requests on their way into it, which a
stop waits for (`close`)."""

from __future__ import annotations

import threading
import time
from queue import Queue
from typing import Any

from mast_otel.collector.config import PipelineConfig
from mast_otel.collector.consumer import Accepted, BatchTooLarge, RawRequest, Refused
from mast_otel.collector.pipeline.batch import Batch
from mast_otel.collector.pipeline.stats import PipelineStats
from mast_otel.collector.spool import RecordKind, Spool, SpoolEntry, SpoolFull
from mast_otel.processors.model import Finding
from mast_otel.processors.records import LogRecord, SpanRecord
from mast_otel.processors.redact import Redactor

_RECORD_KINDS: dict[tuple[str, str], RecordKind] = {
    ("traces", "protobuf"): RecordKind.TRACES_PROTOBUF,
    ("logs", "protobuf"): RecordKind.LOGS_PROTOBUF,
    ("traces", "json"): RecordKind.TRACES_JSON,
    ("logs", "json"): RecordKind.LOGS_JSON,
}


class Admission:
    """The consumer side, called by receivers (see the module). Given the queue the pipeline's
    thread takes batches from, the event a stop sets, the spool (None in memory mode), the
    redactor (which tells whether a request needs its values scanned) and the counters."""

    def __init__(
        self,
        config: PipelineConfig,
        batches: Queue[Batch],
        stopping: threading.Event,
        spool: Spool | None,
        redactor: Redactor,
        stats: PipelineStats,
    ) -> None:
        self.config = config
        self.spool = spool
        self.redactor = redactor
        self.stats = stats
        self._queue = batches
        self._stop = stopping
        self._queued_items = 0
        self._queued_bytes = 0
        self._queue_lock = threading.Lock()
        # Requests between their room check and their place in the queue (writing to the
        # spool): a stop waits for them, so nothing acknowledged misses the last drain.
        self._enqueuing = 0
        self._enqueued = threading.Condition(self._queue_lock)

    def consume_spans(self, spans: list[SpanRecord], raw: RawRequest | None = None) -> Accepted:
        self._enqueue("spans", spans, raw)
        return Accepted()

    def consume_logs(self, logs: list[LogRecord], raw: RawRequest | None = None) -> Accepted:
        self._enqueue("logs", logs, raw)
        return Accepted()

    def consume_findings(self, findings: list[Finding]) -> None:
        """Findings made outside the worker (the semantic judge), stored by the worker. They
        are not spooled: after a crash the judge's verdicts on runs in flight are not
        repeated."""
        try:
            self._enqueue("findings", findings, None)
        except Refused:
            self.stats.findings_refused += len(findings)

    def check_room(self, request_bytes: int) -> None:
        """Refuse a request before it is even parsed when it cannot be taken (queue or spool
        at its bound, shutting down): under overload, refusing costs next to nothing."""
        with self._queue_lock:
            self._refuse_if_full(0, request_bytes)

    def _refuse_if_full(self, items: int, request_bytes: int) -> None:
        """Raise Refused (counted) if `items` and `request_bytes` more would pass a bound;
        the caller holds the queue lock."""
        retry_after = self.config.retry_after_s
        if self._stop.is_set():
            raise Refused("the collector is shutting down", retry_after)
        config = self.config
        reason = ""
        if self._queued_items and self._queued_items + items > config.queue_max_items:
            reason = (
                f"pipeline queue is full ({self._queued_items} of {config.queue_max_items} "
                "items waiting)"
            )
        elif self._queued_bytes and self._queued_bytes + request_bytes > config.queue_max_bytes:
            reason = (
                f"pipeline queue is full ({self._queued_bytes} of {config.queue_max_bytes} "
                "request bytes waiting)"
            )
        elif self.spool is not None and (self.spool.bytes + request_bytes > self.spool.max_bytes):
            self.stats.spool_refusals += 1
            reason = (
                f"write-ahead spool is full ({self.spool.bytes} of {self.spool.max_bytes} "
                "bytes): the store is behind or unreachable"
            )
        if reason:
            self.stats.items_refused += items
            self.stats.requests_refused += 1
            raise Refused(reason, retry_after)

    def _enqueue(self, kind: str, items: list[Any], raw: RawRequest | None) -> None:
        if not items:
            return
        size = len(raw.data) if raw is not None else 0
        limit = self.config.queue_max_items
        if kind != "findings" and len(items) > limit:
            # Even an empty queue could not hold it: taking it would pass the bound, and
            # refusing it as retryable would have the sender retry it forever.
            raise BatchTooLarge(
                f"the request holds {len(items)} {kind}, more than the whole pipeline queue "
                f"(pipeline.queue_max_items = {limit}): send smaller batches"
            )
        with self._queue_lock:
            self._refuse_if_full(len(items), size)
            # Room is reserved before the (slow) write to disk, so the bounds hold.
            self._queued_items += len(items)
            self._queued_bytes += size
            self._enqueuing += 1
        try:
            entry = None
            if self.spool is not None and raw is not None:
                try:
                    entry = self.spool.append(_RECORD_KINDS[(raw.signal, raw.encoding)], raw.data)
                except SpoolFull as exc:
                    with self._queue_lock:
                        self._queued_items -= len(items)
                        self._queued_bytes -= size
                        self.stats.items_refused += len(items)
                        self.stats.requests_refused += 1
                        self.stats.spool_refusals += 1
                    raise Refused(str(exc), self.config.retry_after_s) from exc
            scan = raw is None or self.redactor.needs_scan(raw.data, raw.encoding)
            self._queue.put(Batch(kind, items, entry, size=size, scan=scan))
        finally:
            with self._queue_lock:
                self._enqueuing -= 1
                self._enqueued.notify_all()

    @property
    def queue_depth(self) -> int:
        return self._queued_items

    @property
    def queued_bytes(self) -> int:
        return self._queued_bytes

    @property
    def queued_batches(self) -> int:
        return self._queue.qsize()

    def put(
        self,
        kind: str,
        items: list[Any],
        entry: SpoolEntry | None = None,
        *,
        replayed: bool = False,
        stored: bool = False,
        scan: bool = True,
        size: int = 0,
        now: float | None = None,
    ) -> None:
        """Queue records decoded and spooled elsewhere (a worker process of a sharded
        collector, which bounds what it takes), or `kind="call"` with one callable to run on
        the pipeline's thread in turn. `now`: when a replayed request arrived, on the
        pipeline's clock; the windows' clock follows it until `replay_finished`."""
        with self._queue_lock:
            self._queued_items += len(items)
            self._queued_bytes += size
        self._queue.put(Batch(kind, items, entry, replayed, stored, size, scan, now))

    def taken(self, batch: Batch) -> None:
        """The pipeline's thread took `batch` off the queue: its room is free again."""
        with self._queue_lock:
            self._queued_items -= len(batch.items)
            self._queued_bytes -= batch.size

    def close(self, enqueue_wait_s: float) -> None:
        """Take no more: every request from here on is refused. Requests already past their
        room check finish their write to the spool and reach the queue before the last drain
        (the receivers have stopped taking more); this waits up to `enqueue_wait_s` for
        them."""
        with self._queue_lock:
            self._stop.set()
            deadline = time.monotonic() + enqueue_wait_s
            while self._enqueuing and time.monotonic() < deadline:
                self._enqueued.wait(0.1)
