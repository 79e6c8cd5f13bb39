"""The pipeline: receive → normalize → window → detect → export, one way.

Receivers call `consume_spans`/`consume_logs` from their own threads. In durable mode the
request's bytes are first written ahead to the spool (`collector.spool`), and the call returns
(the receiver acknowledges) only once they are on disk; in memory mode it returns once the batch
is queued. Either way the queue is bounded: past it, or past the spool's bound, the call raises
`Refused`, which receivers turn into OTLP's retryable status.

One worker thread takes batches off the queue, applies the limits and redaction rules, normalizes
each span into a step, feeds the run windows (which run the detectors), and hands spans,
findings and signatures to the exporter, whose writes run on a store thread of their own (one
at a time; the spool's ledger is told what each covered once it is done), so the worker goes on
analysing while the store inserts. After a crash it first replays the spool: rows the
store may lack are written (looked up first, so nothing is stored twice) and the runs that were
open are rebuilt from their first span. When the store falls behind, the worker stops taking
batches, so the queue and then the receivers push back instead of memory growing.

The same `process_*` methods serve the offline `analyze` command, driven synchronously.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from mast_otel.collector.config import Config
from mast_otel.collector.consumer import Accepted, BatchTooLarge, RawRequest, Refused
from mast_otel.collector.judge import JudgeStage, OpenAICompatibleJudge
from mast_otel.collector.otlp.decode import (
    OtlpDecodeError,
    decode_logs,
    decode_spans,
    parse_logs_request,
    parse_trace_request,
)
from mast_otel.collector.otlp.jsonpb import parse_logs_json, parse_trace_json
from mast_otel.collector.spool import RecordKind, Recovered, Spool, SpoolEntry, SpoolFull
from mast_otel.collector.store.exporter import Exporter
from mast_otel.processors import conventions
from mast_otel.processors.classify import ActionClassifier
from mast_otel.processors.detectors import build_detectors, detector_factory
from mast_otel.processors.limits import RecordLimits
from mast_otel.processors.model import Finding, Step, StepKind, StepStatus
from mast_otel.processors.normalize import genai, normalize_log, normalize_span
from mast_otel.processors.records import LogRecord, SpanRecord
from mast_otel.processors.redact import Redactor
from mast_otel.processors.window import RunWindows, WindowOutput

log = logging.getLogger(__name__)

Clock = Callable[[], float]
WallClock = Callable[[], int]

# The stages whose CPU time the pipeline reports: limits and redaction, normalization into
# steps, the windows and detectors, and the store's writes (encoding and inserts).
PIPELINE_STAGES = ("redact", "normalize", "detect", "store")
_cpu = time.thread_time

_ENCODINGS: dict[RecordKind, str] = {
    RecordKind.TRACES_PROTOBUF: "protobuf",
    RecordKind.LOGS_PROTOBUF: "protobuf",
    RecordKind.TRACES_JSON: "json",
    RecordKind.LOGS_JSON: "json",
}
_RECORD_KINDS: dict[tuple[str, str], RecordKind] = {
    ("traces", "protobuf"): RecordKind.TRACES_PROTOBUF,
    ("logs", "protobuf"): RecordKind.LOGS_PROTOBUF,
    ("traces", "json"): RecordKind.TRACES_JSON,
    ("logs", "json"): RecordKind.LOGS_JSON,
}


def bare_step(record: SpanRecord) -> Step:
    """A span no dialect recognises still belongs to its run: it keeps the run alive, may be
    its root, and may carry `mast.*` run attributes. Detectors ignore its kind."""
    return Step(
        trace_id=record.trace_id,
        span_id=record.span_id,
        parent_span_id=record.parent_span_id,
        name=record.name,
        kind=StepKind.OTHER,
        start_ns=record.start_ns,
        end_ns=record.end_ns,
        dialect="",
        status=StepStatus.ERROR if record.status_code == "Error" else StepStatus.UNSET,
        error=record.status_message,
        service=record.service_name,
        run_attributes={
            k: v for k, v in record.attributes.items() if k in conventions.RUN_ATTRIBUTES
        },
    )


@dataclass
class PipelineStats:
    spans_received: int = 0
    logs_received: int = 0
    spans_unrecognised: int = 0
    items_refused: int = 0
    requests_refused: int = 0
    spool_refusals: int = 0
    export_errors: int = 0
    processing_errors: int = 0
    findings: int = 0
    signatures: int = 0
    # The same span delivered again while its run is open: analysed and stored once.
    spans_duplicate: int = 0
    spans_end_before_start: int = 0
    # Start or end further from the collector's clock than limits.max_clock_skew_s.
    clock_skew: int = 0
    # Runs closed early because they held the oldest spool segment past its share.
    runs_closed_for_spool: int = 0
    # Ticks spent not taking batches because the store is behind.
    backpressure_ticks: int = 0
    replayed_requests: int = 0
    # Replayed spans already stored whose run is closed: skipped.
    replay_skipped: int = 0
    replay_decode_errors: int = 0
    outcomes_updated: int = 0
    findings_refused: int = 0
    # Findings by mode, for self-metrics (fatality is derived from the mode).
    findings_by_mode: dict[str, int] = field(default_factory=dict)


@dataclass
class StopReport:
    """What a stop left undone: empty when everything accepted before it is stored."""

    # Durable mode: spool records never replayed (the store refused writes while stopping).
    replay_segments_left: int = 0
    # Accepted requests not processed (the store refused writes while stopping); durable mode
    # keeps them in the spool.
    requests_left: int = 0
    # Rows the store refused at the last write (in the spool in durable mode, else lost).
    rows_unstored: int = 0
    # Runs still open, kept in the spool to resume (durability.resume_open_runs).
    runs_left_open: int = 0
    durable: bool = False
    reason: str = ""

    @property
    def complete(self) -> bool:
        return not (
            self.replay_segments_left
            or self.requests_left
            or self.rows_unstored
            or self.runs_left_open
        )

    def describe(self) -> str:
        if self.complete:
            return "everything accepted is stored"
        parts = []
        if self.replay_segments_left:
            parts.append(f"{self.replay_segments_left} spool segment(s) not replayed")
        if self.requests_left:
            parts.append(f"{self.requests_left} accepted request(s) not processed")
        if self.rows_unstored:
            parts.append(f"{self.rows_unstored} row(s) the store did not take")
        if self.runs_left_open:
            parts.append(f"{self.runs_left_open} open run(s) kept to resume")
        where = (
            "they stay in the spool and are stored at the next start"
            if self.durable
            else "they are lost (durability.mode is memory)"
        )
        because = f" ({self.reason})" if self.reason else ""
        return f"NOT everything accepted is stored: {', '.join(parts)}{because}; {where}"


@dataclass(slots=True)
class _Batch:
    kind: str
    items: list[Any]
    entry: SpoolEntry | None = None
    # Replayed from the spool: its rows may already be stored.
    replayed: bool = False
    # Replayed, and the journal says its rows are stored: feed the windows only.
    stored: bool = False
    # Request bytes it holds in the queue.
    size: int = 0
    # Whether its records' values must be scanned for secrets (see `Redactor.needs_scan`).
    scan: bool = True
    # When its request arrived, on the pipeline's clock (a request replayed by a worker).
    now: float | None = None


class _Ledger:
    """What each spool segment still waits for, from the pipeline's side: records whose rows
    are handed to the exporter but not yet confirmed stored, and runs holding the segments
    their records are in. Touched by the worker thread only."""

    def __init__(self, spool: Spool) -> None:
        self.spool = spool
        self.run_segments: dict[str, set[int]] = {}
        self._records: list[SpoolEntry] = []
        self._closes: list[tuple[str, set[int]]] = []

    def touched(self, trace_id: str, segment: int) -> None:
        held = self.run_segments.setdefault(trace_id, set())
        if segment not in held:
            held.add(segment)
            self.spool.hold(segment)

    def processed(self, entry: SpoolEntry) -> None:
        self._records.append(entry)

    def closed(self, trace_id: str) -> None:
        held = self.run_segments.pop(trace_id, None)
        if held:
            self._closes.append((trace_id, held))

    def mark(self) -> tuple[int, int]:
        """Where the ledger stands: what a write starting now covers, for `confirm`."""
        return len(self._records), len(self._closes)

    def confirm(self, upto: tuple[int, int] | None = None) -> None:
        """What was handed to the exporter (up to a `mark`, or all) is in the store: journal
        it, then let go."""
        records_n, closes_n = upto if upto is not None else self.mark()
        records, closes = self._records[:records_n], self._closes[:closes_n]
        if not records and not closes:
            self.spool.idle_rotate()
            return
        lines: dict[int, list[str]] = {}
        for entry in records:
            lines.setdefault(entry.segment, []).append(f"S {entry.seq}")
        for trace_id, segments in closes:
            for segment in segments:
                lines.setdefault(segment, []).append(f"C {trace_id}")
        self.spool.journal(lines)
        for entry in records:
            self.spool.release(entry.segment)
        for _, segments in closes:
            for segment in segments:
                self.spool.release(segment)
        del self._records[:records_n]
        del self._closes[:closes_n]
        self.spool.idle_rotate()

    def runs_holding(self, segment: int) -> list[str]:
        return [trace for trace, held in self.run_segments.items() if segment in held]


class Pipeline:
    def __init__(
        self,
        config: Config,
        exporter: Exporter,
        clock: Clock = time.monotonic,
        *,
        spool: Spool | None = None,
        recovered: Recovered | None = None,
        wall_clock: WallClock = time.time_ns,
        ledger: _Ledger | None = None,
    ) -> None:
        self.config = config
        self.exporter = exporter
        self.clock = clock
        self.wall_clock = wall_clock
        classifier = ActionClassifier(config.classification)
        detectors = build_detectors(config.detectors, classifier)
        self.windows = RunWindows(
            config.windows, detector_factory(detectors), keep_transcripts=config.judge.enabled
        )
        self.judge: JudgeStage | None = None
        if config.judge.enabled:
            self.judge = JudgeStage(
                OpenAICompatibleJudge(config.judge), config.judge, self.consume_findings
            )
        self.limits = RecordLimits(config.limits)
        self.redactor = Redactor(config.redaction)
        self.stats = PipelineStats()
        self.spool = spool
        # A worker process of a sharded collector reports to the spool's owner instead.
        self._ledger = ledger if ledger is not None else _Ledger(spool) if spool else None
        self._recovered = recovered
        self._queue: queue.Queue[_Batch] = queue.Queue()
        self._queued_items = 0
        self._queued_bytes = 0
        self._queue_lock = threading.Lock()
        # Requests between their room check and their place in the queue (writing to the
        # spool): a stop waits for them, so nothing acknowledged misses the last drain.
        self._enqueuing = 0
        self._enqueued = threading.Condition(self._queue_lock)
        self._stop = threading.Event()
        self.stop_report: StopReport | None = None
        self._replay_cut_short = False
        # While replaying: when the request being replayed arrived, on `clock` (see `_arrival`).
        self._replay_now: float | None = None
        self._worker: threading.Thread | None = None
        self._last_tick = 0.0
        self._listeners: list[Callable[[WindowOutput], None]] = []
        self._after_export: list[Callable[[float, bool], None]] = []
        # Runs opened since the store last confirmed a flush: their spans may have been stored
        # by an earlier process (or be re-sent copies), so they are looked up before writing.
        self._unverified: set[str] = set()
        self._skew_ns = int(config.limits.max_clock_skew_s * 1e9)
        # Writes run on a thread of their own once the pipeline runs on its own (`start`).
        self._store_writer: ThreadPoolExecutor | None = None
        self._write: Future[bool] | None = None
        self._write_cut = (0, 0)
        self._write_unverified: set[str] = set()
        # CPU seconds of the store's thread (added there, read by health).
        self._write_cpu_s = 0.0
        # CPU seconds of the pipeline's thread by stage (receivers count their own; see
        # `stage_cpu_seconds`).
        self.stage_seconds: dict[str, float] = dict.fromkeys(PIPELINE_STAGES, 0.0)

    # -- the consumer side, called by receivers ---------------------------------------------

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

    def close_runs_holding(self, segment: int) -> int:
        """Close and analyse the runs holding a spool segment (the spool is past its share,
        see `_relieve_spool`); returns how many."""
        runs = self._ledger.runs_holding(segment) if self._ledger is not None else []
        if runs and not self.exporter.failing:
            self.stats.runs_closed_for_spool += len(runs)
            self._emit(self._guarded(lambda: self.windows.close_runs(runs, "spool_full")))
            return len(runs)
        return 0

    # -- the worker ---------------------------------------------------------------------------

    def on_output(self, listener: Callable[[WindowOutput], None]) -> None:
        """Call `listener` with every batch of findings and closed-run signatures."""
        self._listeners.append(listener)

    def after_export(self, stage: Callable[[float, bool], None]) -> None:
        """Call `stage(now, final)` on the pipeline's thread after each tick's export, and
        once more with `final=True` after the last flush at stop (the scale-out merge of runs
        split across replicas runs here, after this replica's own rows are written)."""
        self._after_export.append(stage)

    def start(self) -> None:
        self._store_writer = ThreadPoolExecutor(1, thread_name_prefix="mast-store")
        self._worker = threading.Thread(target=self._run, name="mast-pipeline", daemon=True)
        self._worker.start()
        if self.judge is not None:
            self.judge.start()

    def stop(self, enqueue_wait_s: float = 30.0) -> StopReport:
        """Take no more, finish the replay, process what is queued, close every open run and
        write everything the store takes. With `durability.resume_open_runs`, only runs whose
        end was seen are closed; the others stay in the spool and resume at the next start. In
        durable mode what the store refuses stays in the spool too. Returns (and keeps in
        `stop_report`) what was left undone, if anything."""
        # A worker process of a sharded collector has a ledger and no spool of its own.
        durable = self._ledger is not None
        report = StopReport(durable=durable)
        with self._queue_lock:
            self._stop.set()
            # Requests already past their room check finish their write to the spool and
            # reach the queue before the last drain (the receivers have stopped taking more).
            deadline = time.monotonic() + enqueue_wait_s
            while self._enqueuing and time.monotonic() < deadline:
                self._enqueued.wait(0.1)
        if self._worker is not None:
            # The worker finishes the replay first (everything in the spool was accepted).
            self._worker.join()
        if self._store_writer is not None:
            # Finish the write in progress; from here on everything runs on this thread.
            if self._write is not None:
                self._finish_write(self._write)
            self._store_writer.shutdown()
            self._store_writer = None
        if self._replay_cut_short:
            assert self.spool is not None
            # The segment being read, and those not reached.
            report.replay_segments_left = self.spool.replay_segments_left + 1
            report.reason = "the store refused writes while the spool was replayed"
        self._drain_for_stop(report)
        if durable and self.config.durability.resume_open_runs:
            self._emit(self._guarded(self.windows.close_finished))
            report.runs_left_open = self.windows.active_runs
        else:
            self._emit(self._guarded(lambda: self.windows.close_all("shutdown")))
        if self.judge is not None:
            # Runs still waiting for the judge are judged no more; what it found so far stays.
            self.judge.stop()
            self._drain_for_stop(report)
        try:
            if self.exporter.flush(self.clock(), force=True):
                self._confirm()
        except Exception as exc:
            self.stats.export_errors += 1
            report.rows_unstored = getattr(self.exporter, "buffered_rows", 0) or 1
            report.reason = f"the store refused the last writes: {exc}"
            log.error("the store refused the last writes (%s)", exc)
        for stage in self._after_export:
            try:
                stage(self.clock(), True)
            except Exception:
                log.exception("a stage after export failed at stop")
        self.stop_report = report
        return report

    def _drain_for_stop(self, report: StopReport) -> None:
        """Process every queued batch. When the store's buffer is full, write it out here
        first; if the store refuses, what is still queued is left (in the spool, in durable
        mode) and counted in `report`."""
        while True:
            if self.exporter.full:
                try:
                    if self.exporter.flush(self.clock(), force=True):
                        self._confirm()
                except Exception as exc:
                    self.stats.export_errors += 1
                    left = self._queue.qsize()
                    if left:
                        report.requests_left += left
                        report.reason = f"the store refused writes while stopping: {exc}"
                        log.error(
                            "the store refused writes while stopping (%s): %d queued "
                            "request(s) not processed",
                            exc,
                            left,
                        )
                    return
            try:
                batch = self._queue.get_nowait()
            except queue.Empty:
                return
            self._take(batch)

    def _run(self) -> None:
        if self.spool is not None and self.spool.replaying:
            self._replay()
        interval = self.config.pipeline.tick_interval_s
        while not self._stop.is_set():
            if self.exporter.full:
                # The store is behind: take nothing more until it catches up, so the queue
                # fills and receivers push back.
                self.stats.backpressure_ticks += 1
                self._stop.wait(interval)
            else:
                try:
                    batch = self._queue.get(timeout=interval)
                except queue.Empty:
                    pass
                else:
                    self._take(batch)
            self._maybe_tick()

    def _maybe_tick(self) -> None:
        now = self.clock()
        if now - self._last_tick >= self.config.pipeline.tick_interval_s:
            self._last_tick = now
            self.tick(now)

    def _take(self, batch: _Batch) -> None:
        with self._queue_lock:
            self._queued_items -= len(batch.items)
            self._queued_bytes -= batch.size
        if batch.now is not None:
            self._replay_now = batch.now
        self._process(batch, batch.now)

    def _process(self, batch: _Batch, now: float | None = None) -> None:
        try:
            if batch.kind == "spans":
                self.process_spans(batch.items, now, source=batch)
            elif batch.kind == "logs":
                self.process_logs(batch.items, now, source=batch)
            elif batch.kind == "call":
                batch.items[0]()
            else:
                self.stats.findings += len(batch.items)
                for finding in batch.items:
                    self.redactor.finding(finding)
                self.exporter.add_findings(batch.items)
        except Exception:
            # A bug must not take the collector down with every run in flight.
            self.stats.processing_errors += 1
            log.exception("processing a batch of %d %s failed", len(batch.items), batch.kind)
        if self._ledger is not None and batch.entry is not None:
            self._ledger.processed(batch.entry)

    # -- replay -------------------------------------------------------------------------------

    def _replay(self) -> None:
        """Re-read what the previous process left in the spool, before any new request."""
        assert self.spool is not None
        recovered = self._recovered or Recovered()
        for trace_id in recovered.closed:
            self.windows.mark_closed(trace_id)
        started = time.monotonic()
        log.info(
            "replaying %d spool segment(s), %d bytes, left by the previous run",
            recovered.segments,
            recovered.bytes,
        )
        depth = self.config.receivers.max_value_depth
        told = False
        for entry, kind, payload in self.spool.replay():
            if self._stop.is_set() and not told:
                # Everything in the spool was acknowledged: a stop finishes the replay.
                told = True
                log.info(
                    "stopping: the replay goes on to the end of the spool (%d segment(s) "
                    "left) so that everything accepted is stored",
                    self.spool.replay_segments_left + 1,
                )
            try:
                batch = _decode(kind, payload, depth)
                batch.scan = self.redactor.needs_scan(payload, _ENCODINGS[kind])
            except OtlpDecodeError as exc:
                # Written only after decoding once, so this means the limits changed (depth)
                # or the disk corrupted it past the checksum: nothing to rebuild.
                self.stats.replay_decode_errors += 1
                log.error("cannot decode spooled request %d: %s", entry.seq, exc)
                batch = _Batch("spans", [])
            batch.entry = entry
            batch.replayed = True
            batch.stored = entry.seq in recovered.stored
            self.stats.replayed_requests += 1
            # The windows' clock follows the requests' arrival while they are replayed, so a
            # run is not closed as idle before its later requests are replayed.
            self._replay_now = self._arrival(entry)
            self._process(batch, self._replay_now)
            if not self._wait_for_room():
                log.error(
                    "stopping while the store refuses writes: the replay ends here and the "
                    "rest of the spool is replayed at the next start"
                )
                self._replay_cut_short = True
                break
            self._maybe_tick()
        self._replay_now = None
        log.info(
            "replay done: %d request(s) in %.1f s, %d run(s) rebuilt and open",
            self.stats.replayed_requests,
            time.monotonic() - started,
            self.windows.active_runs,
        )

    def _arrival(self, entry: SpoolEntry) -> float:
        """When a replayed request arrived, on the pipeline's clock, at the latest: its
        segment's last write. A rebuilt run's idle time counts from there, not from the
        restart, so runs whose end never came close once idle past `windows.idle_timeout_s`
        instead of holding their segments (and being replayed again) at every restart."""
        now = self.clock()
        written = self.spool.written_at(entry.segment) if self.spool is not None else None
        if written is None:
            return now
        return now - min(max(0.0, time.time() - written), self.config.windows.idle_timeout_s)

    def _wait_for_room(self) -> bool:
        """Wait while the store's buffer is full (the writes go on on the store's thread).
        False when stopping and the store refuses writes: the replay gives up for now."""
        interval = self.config.pipeline.tick_interval_s
        while self.exporter.full:
            if self._stop.is_set() and self.exporter.failing:
                return False
            self._maybe_tick()
            time.sleep(interval)
        return True

    # -- the stages, also driven directly by offline analysis ---------------------------------

    def process_spans(
        self, spans: list[SpanRecord], now: float | None = None, *, source: Any = None
    ) -> None:
        now = self.clock() if now is None else now
        batch: _Batch | None = source
        entry = batch.entry if batch is not None else None
        replayed = batch is not None and batch.replayed
        stored = batch is not None and batch.stored
        scan = batch is None or batch.scan
        self.stats.spans_received += len(spans)
        max_text = self.config.pipeline.max_step_text
        wall = self.wall_clock()
        out = WindowOutput()
        export: list[SpanRecord] = []
        checks: list[bool] = []
        redact = normalize = detect = 0.0
        windows = self.windows
        for record in spans:
            if stored and windows.is_closed(record.trace_id):
                # Replayed, its rows stored and its run closed and stored: nothing to do. Most
                # of what a restart replays is this (spool files kept by a few open runs).
                self.stats.replay_skipped += 1
                continue
            try:
                started = _cpu()
                self.limits.span(record)
                self.redactor.span(record, scan)
                redacted = _cpu()
                step = normalize_span(record, max_text=max_text)
                if step is None:
                    self.stats.spans_unrecognised += 1
                    step = bare_step(record)
                normalized = _cpu()
                redact += redacted - started
                normalize += normalized - redacted
                self._place_in_time(step, record.start_ns, record.end_ns, wall)
                trace_id = step.trace_id
                duplicate = self.windows.seen(trace_id, step.span_id)
                after_close = self.windows.is_closed(trace_id)
                opened = not after_close and not self.windows.is_open(trace_id)
                out.extend(self.windows.add(step, now))
                detect += _cpu() - normalized
            except Exception:
                self.stats.processing_errors += 1
                log.exception(
                    "analysing span %s of trace %s failed", record.span_id, record.trace_id
                )
                duplicate, after_close, opened = False, True, False
                trace_id = record.trace_id
            if duplicate:
                self.stats.spans_duplicate += 1
                continue
            if opened:
                self._unverified.add(trace_id)
            if self._ledger is not None and entry is not None and self.windows.is_open(trace_id):
                self._ledger.touched(trace_id, entry.segment)
            if not stored:
                export.append(record)
                checks.append(replayed or after_close or trace_id in self._unverified)
        stages = self.stage_seconds
        stages["redact"] += redact
        stages["normalize"] += normalize
        stages["detect"] += detect
        started = _cpu()
        if export:
            self.exporter.add_spans(export, checks)
        self._emit(out)
        stages["store"] += _cpu() - started

    def process_logs(
        self, logs: list[LogRecord], now: float | None = None, *, source: Any = None
    ) -> None:
        now = self.clock() if now is None else now
        batch: _Batch | None = source
        entry = batch.entry if batch is not None else None
        stored = batch is not None and batch.stored
        scan = batch is None or batch.scan
        self.stats.logs_received += len(logs)
        max_text = self.config.pipeline.max_step_text
        wall = self.wall_clock()
        out = WindowOutput()
        stages = self.stage_seconds
        for record in logs:
            try:
                started = _cpu()
                self.limits.log(record)
                self.redactor.log(record, scan)
                redacted = _cpu()
                message = genai.message_event(record)
                if message is not None:
                    # A message event of a chat span: joined to that span's step.
                    event, body = message
                    self.windows.join_events(
                        record.trace_id,
                        record.span_id,
                        partial(
                            genai.apply_message_event, event=event, body=body, max_text=max_text
                        ),
                    )
                    stages["redact"] += redacted - started
                    stages["normalize"] += _cpu() - redacted
                    continue
                step = normalize_log(record, max_text=max_text)
                normalized = _cpu()
                stages["redact"] += redacted - started
                stages["normalize"] += normalized - redacted
                if step is None:
                    continue
                moment = record.time_ns or record.observed_time_ns
                self._place_in_time(step, moment, moment, wall)
                out.extend(self.windows.add(step, now))
                if (
                    self._ledger is not None
                    and entry is not None
                    and self.windows.is_open(step.trace_id)
                ):
                    self._ledger.touched(step.trace_id, entry.segment)
                stages["detect"] += _cpu() - normalized
            except Exception:
                self.stats.processing_errors += 1
                log.exception("analysing a log record failed")
        started = _cpu()
        if not stored:
            # Log records carry no id: the exporter looks every one up before writing.
            self.exporter.add_logs(logs)
        self._emit(out)
        stages["store"] += _cpu() - started

    def _place_in_time(self, step: Step, start_ns: int, end_ns: int, wall_ns: int) -> None:
        """Count impossible times and clocks far off. The span is stored as sent and its step
        keeps its times: the run's window orders steps by start time only within the grace
        period, so a skewed step is released with the others and holds nothing back (and
        offline analysis of old files keeps their order)."""
        if end_ns < start_ns:
            self.stats.spans_end_before_start += 1
        skew = self._skew_ns
        if abs(start_ns - wall_ns) > skew or abs(end_ns - wall_ns) > skew:
            self.stats.clock_skew += 1

    def tick(self, now: float) -> None:
        started = _cpu()
        windows_now = now if self._replay_now is None else self._replay_now
        self._emit(self._guarded(lambda: self.windows.tick(windows_now)))
        self._relieve_spool()
        ticked = _cpu()
        self.stage_seconds["detect"] += ticked - started
        if self._store_writer is None:
            self._flush(now)
        else:
            self._flush_behind(now)
        self.stage_seconds["store"] += _cpu() - ticked

    def _flush(self, now: float) -> None:
        """Write what is due on this thread (offline use, and tests driving ticks)."""
        try:
            if self.exporter.flush(now, idle=self._queue.empty()):
                self._confirm()
        except Exception as exc:
            self._write_failed(exc)
        self._after_writes(now)

    def _flush_behind(self, now: float) -> None:
        """Write on the store's own thread while this one goes on processing: an insert holds
        the GIL for a fraction of its time (chDB and the ClickHouse client release it while
        the store works), so the pipeline keeps its core. One write at a time; what it covers
        is confirmed to the spool's ledger when it is done."""
        write = self._write
        if write is not None:
            if not write.done():
                return
            self._finish_write(write)
            self._after_writes(now)
        assert self._store_writer is not None
        self._write_cut = self._ledger.mark() if self._ledger is not None else (0, 0)
        self._write_unverified = set(self._unverified)
        self._write = self._store_writer.submit(self._timed_flush, now, self._queue.empty())

    def _timed_flush(self, now: float, idle: bool) -> bool:
        """A flush on the store's thread, its CPU counted to the store stage."""
        started = _cpu()
        try:
            return self.exporter.flush(now, idle=idle)
        finally:
            self._write_cpu_s += _cpu() - started

    def _finish_write(self, write: Future[bool]) -> None:
        self._write = None
        try:
            if write.result():
                self._confirm(self._write_cut, self._write_unverified)
        except Exception as exc:
            self._write_failed(exc)

    def _write_failed(self, exc: Exception) -> None:
        # Rows stay buffered (and the requests in the spool) and are written later.
        self.stats.export_errors += 1
        log.error("writing to the store failed (%s); will retry with backoff", exc)

    def _after_writes(self, now: float) -> None:
        for stage in self._after_export:
            try:
                stage(now, False)
            except Exception:
                log.exception("a stage after export failed; it runs again at the next tick")

    def _confirm(
        self, upto: tuple[int, int] | None = None, unverified: set[str] | None = None
    ) -> None:
        """Rows handed to the exporter (up to a ledger mark, or all) are in the store."""
        if unverified is None:
            self._unverified.clear()
        else:
            self._unverified -= unverified
        if self._ledger is not None:
            self._ledger.confirm(upto)

    def _relieve_spool(self) -> None:
        """Past its share of the spool, close the runs that alone hold its oldest segment, so
        a few endless runs cannot fill the spool and make every sender wait."""
        spool, ledger = self.spool, self._ledger
        if spool is None or ledger is None or self.exporter.failing:
            return
        threshold = (
            self.config.durability.max_spool_bytes * self.config.durability.run_eviction_ratio
        )
        if spool.bytes <= threshold:
            return
        oldest = spool.oldest_held()
        if oldest is None:
            return
        runs = ledger.runs_holding(oldest)
        if runs and spool.refs(oldest) == len(runs):
            self.stats.runs_closed_for_spool += len(runs)
            self._emit(self._guarded(lambda: self.windows.close_runs(runs, "spool_full")))

    def _guarded(self, produce: Callable[[], WindowOutput]) -> WindowOutput:
        try:
            return produce()
        except Exception:
            self.stats.processing_errors += 1
            log.exception("closing runs failed")
            return WindowOutput()

    def close_finished(self) -> None:
        """Close the runs whose end has been seen (root span or explicit end) now, without
        waiting out their grace period (offline input that holds each run whole)."""
        self._emit(self.windows.close_finished())

    def close_all(self, reason: str = "end_of_input") -> None:
        """Close every open run; `reason` is recorded for runs nothing else closed."""
        self._emit(self.windows.close_all(reason))

    def _emit(self, out: WindowOutput) -> None:
        if self._ledger is not None:
            for signature in out.signatures:
                self._ledger.closed(signature.trace_id)
        if self.judge is not None:
            for transcript in out.transcripts:
                self.judge.offer(transcript)
        if out.outcomes:
            self.stats.outcomes_updated += len(out.outcomes)
            self.exporter.add_outcomes(out.outcomes)
        if not out.findings and not out.signatures:
            return
        self.stats.findings += len(out.findings)
        by_mode = self.stats.findings_by_mode
        for finding in out.findings:
            by_mode[finding.mode] = by_mode.get(finding.mode, 0) + 1
        self.stats.signatures += len(out.signatures)
        # Detectors quote what the (redacted) steps carried; this is the last guard before
        # the store, for what a detector or a rule change could let through.
        for finding in out.findings:
            self.redactor.finding(finding)
        for signature in out.signatures:
            self.redactor.signature(signature)
        if out.findings:
            self.exporter.add_findings(out.findings)
        if out.signatures:
            self.exporter.add_signatures(out.signatures)
        for listener in self._listeners:
            listener(out)

    def stage_cpu_seconds(self) -> dict[str, float]:
        """CPU seconds by stage, the store's own thread included."""
        stages = dict(self.stage_seconds)
        stages["store"] += self._write_cpu_s
        return stages

    def health(self) -> dict[str, Any]:
        w = self.windows.stats
        status: dict[str, Any] = {
            "queue_items": self._queued_items,
            "queue_max_items": self.config.pipeline.queue_max_items,
            "queue_bytes": self._queued_bytes,
            "queue_max_bytes": self.config.pipeline.queue_max_bytes,
            "active_runs": self.windows.active_runs,
            "pipeline": {
                **vars(self.stats),
                "findings_by_mode": dict(self.stats.findings_by_mode),
            },
            "windows": {
                "runs_opened": w.runs_opened,
                "runs_closed": dict(w.runs_closed),
                "runs_evicted": w.runs_evicted,
                "steps_received": w.steps_received,
                "steps_duplicate": w.steps_duplicate,
                "steps_late": w.steps_late,
                "steps_after_close": w.steps_after_close,
                "outcomes_after_close": w.outcomes_after_close,
                "steps_trimmed": w.steps_trimmed,
                "pending_overflow": w.pending_overflow,
                "agent_wait_expired": w.agent_wait_expired,
                "events_joined": w.events_joined,
                "events_after_step": w.events_after_step,
                "events_dropped": w.events_dropped,
            },
            "limits": dict(self.limits.stats),
            "redaction": dict(self.redactor.stats),
            "durability": {"mode": self.config.durability.mode},
        }
        if self.spool is not None:
            status["durability"].update(self.spool.health())
        return status


def _decode(kind: RecordKind, payload: bytes, depth: int) -> _Batch:
    if kind in (RecordKind.TRACES_PROTOBUF, RecordKind.TRACES_JSON):
        request = (
            parse_trace_request(payload)
            if kind is RecordKind.TRACES_PROTOBUF
            else parse_trace_json(payload)
        )
        return _Batch("spans", decode_spans(request, max_value_depth=depth).records)
    logs_request = (
        parse_logs_request(payload)
        if kind is RecordKind.LOGS_PROTOBUF
        else parse_logs_json(payload)
    )
    return _Batch("logs", decode_logs(logs_request, max_value_depth=depth).records)
