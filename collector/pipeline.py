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

The parts, one module each: admission (`pipeline_admission`), the stages (`pipeline_stages`),
the tick and the store's thread (`pipeline_writes`), the replay (`pipeline_replay`), the
spool's ledger (`pipeline_ledger`), and the state they share with what it reports
(`pipeline_state`). This module puts them together and runs the worker thread.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from mast_otel.collector.config import Config
from mast_otel.collector.judge import JudgeStage, OpenAICompatibleJudge
from mast_otel.collector.otlp.redact_request import RequestRedactor
from mast_otel.collector.pipeline_admission import _Admission
from mast_otel.collector.pipeline_ledger import _Ledger
from mast_otel.collector.pipeline_replay import _Replay
from mast_otel.collector.pipeline_stages import PIPELINE_STAGES
from mast_otel.collector.pipeline_state import Clock, PipelineStats, StopReport, WallClock, _Batch
from mast_otel.collector.spool import Recovered, Spool
from mast_otel.collector.store.exporter import Exporter
from mast_otel.processors.classify import ActionClassifier
from mast_otel.processors.detectors import build_detectors, detector_factory
from mast_otel.processors.limits import RecordLimits
from mast_otel.processors.redact import Redactor
from mast_otel.processors.window import RunWindows, WindowOutput

log = logging.getLogger(__name__)


class Pipeline(_Admission, _Replay):
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
        # Requests are redacted before they are written ahead: no secret reaches the spool.
        self.request_redactor = (
            RequestRedactor(config.redaction, config.receivers.max_value_depth) if spool else None
        )
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

    def stop(self, enqueue_wait_s: float = 30.0, *, keep_open: bool = False) -> StopReport:
        """Take no more, finish the replay, process what is queued, close every open run and
        write everything the store takes. With `durability.resume_open_runs`, only runs whose
        end was seen are closed; the others stay in the spool and resume at the next start;
        with `keep_open` (a worker whose stop left requests unprocessed in the spool) none is. In
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
        # Wake the pipeline's thread if it waits for a batch (up to a tick interval).
        self.put("call", [_nothing])
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
        if durable and keep_open:
            # Requests of these runs were left in the spool: close none, so each is rebuilt
            # and analysed whole at the next start.
            report.runs_left_open = self.windows.active_runs
        elif durable and self.config.durability.resume_open_runs:
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
                    batch = self._queue.get(timeout=self._wait_s(interval))
                except queue.Empty:
                    pass
                else:
                    self._take(batch)
            self._maybe_tick()

    def _take(self, batch: _Batch) -> None:
        with self._queue_lock:
            self._queued_items -= len(batch.items)
            self._queued_bytes -= batch.size
        if batch.now is not None:
            self._replay_now = batch.now
        self._process(batch, batch.now)


def _nothing() -> None:
    return None
