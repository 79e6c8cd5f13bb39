"""Admission: the door receivers call (`consume_*`). A request is refused (retryable) when
the bounded queue or the spool is at its bound, else written ahead to the spool and queued;
the call returns, and the receiver acknowledges, only then."""

from __future__ import annotations

from typing import Any

from mast_otel.collector.consumer import Accepted, BatchTooLarge, RawRequest, Refused
from mast_otel.collector.pipeline_state import _Batch, _PipelineState
from mast_otel.collector.spool import RecordKind, SpoolEntry, SpoolFull
from mast_otel.processors.model import Finding
from mast_otel.processors.records import LogRecord, SpanRecord

_RECORD_KINDS: dict[tuple[str, str], RecordKind] = {
    ("traces", "protobuf"): RecordKind.TRACES_PROTOBUF,
    ("logs", "protobuf"): RecordKind.LOGS_PROTOBUF,
    ("traces", "json"): RecordKind.TRACES_JSON,
    ("logs", "json"): RecordKind.LOGS_JSON,
}


class _Admission(_PipelineState):
    """The consumer side, called by receivers (see the module)."""

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
        retry_after = self.config.pipeline.retry_after_s
        if self._stop.is_set():
            raise Refused("the collector is shutting down", retry_after)
        pipeline = self.config.pipeline
        reason = ""
        if self._queued_items and self._queued_items + items > pipeline.queue_max_items:
            reason = (
                f"pipeline queue is full ({self._queued_items} of {pipeline.queue_max_items} "
                "items waiting)"
            )
        elif self._queued_bytes and self._queued_bytes + request_bytes > pipeline.queue_max_bytes:
            reason = (
                f"pipeline queue is full ({self._queued_bytes} of {pipeline.queue_max_bytes} "
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
        limit = self.config.pipeline.queue_max_items
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
                    raise Refused(str(exc), self.config.pipeline.retry_after_s) from exc
            scan = raw is None or self.redactor.needs_scan(raw.data, raw.encoding)
            self._queue.put(_Batch(kind, items, entry, size=size, scan=scan))
        finally:
            with self._queue_lock:
                self._enqueuing -= 1
                self._enqueued.notify_all()

    @property
    def queue_depth(self) -> int:
        return self._queued_items

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
        self._queue.put(_Batch(kind, items, entry, replayed, stored, size, scan, now))

    def replay_finished(self) -> None:
        """The windows' clock is the clock again (after requests `put` with `now`)."""
        self._replay_now = None
