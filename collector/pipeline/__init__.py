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

The parts, one module and one object each, each given what it uses and keeping its own state:
admission (`admission`: the door, and the queue's account), the stages (`stages`), the tick
and the store's thread (`writes`), the replay (`replay`) and the spool's ledger (`ledger`);
what goes through the queue (`batch`) and what is counted (`stats`). `Pipeline` makes them,
wires them to one another, and runs the worker thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from queue import Empty, Queue
from typing import Any

from mast_otel.collector.config import Config
from mast_otel.collector.consumer import Accepted, RawRequest
from mast_otel.collector.judge import JudgeStage, OpenAICompatibleJudge
from mast_otel.collector.otlp.redact_request import RequestRedactor
from mast_otel.collector.pipeline.admission import Admission
from mast_otel.collector.pipeline.batch import Batch, Clock, WallClock
from mast_otel.collector.pipeline.ledger import SegmentLedger
from mast_otel.collector.pipeline.replay import Replay
from mast_otel.collector.pipeline.stages import Stages, bare_step
from mast_otel.collector.pipeline.stats import (
    PIPELINE_STAGES,
    PipelineStats,
    StopReport,
    windows_health,
)
from mast_otel.collector.pipeline.writes import Writes
from mast_otel.collector.spool import Recovered, Spool, SpoolEntry
from mast_otel.collector.store.exporter import Exporter
from mast_otel.processors.classify import ActionClassifier
from mast_otel.processors.detectors import build_detectors, detector_factory
from mast_otel.processors.limits import RecordLimits
from mast_otel.processors.model import Finding
from mast_otel.processors.records import LogRecord, SpanRecord
from mast_otel.processors.redact import Redactor
from mast_otel.processors.window import RunWindows, WindowOutput

__all__ = ["Pipeline", "PipelineStats", "SegmentLedger", "StopReport", "bare_step"]

log = logging.getLogger(__name__)


class Pipeline:
    """Makes the parts (see the module) and wires them: each is given, when it is made, the
    objects it uses (the queue, the spool and its ledger, the exporter, the windows, the
    counters) and the calls into the others it makes, and no part sets anything on another.
    The one set two parts share, the runs not yet verified in the store, is the stages' and
    handed to the writes, which let runs go once a write is confirmed. Its own methods are the
    pipeline's public face, and its thread is the worker."""

    def __init__(
        self,
        config: Config,
        exporter: Exporter,
        clock: Clock = time.monotonic,
        *,
        spool: Spool | None = None,
        recovered: Recovered | None = None,
        wall_clock: WallClock = time.time_ns,
        ledger: SegmentLedger | None = None,
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
        self.limits = RecordLimits(config.limits)
        self.redactor = Redactor(config.redaction)
        self.stats = PipelineStats()
        self.spool = spool
        # Requests are redacted before they are written ahead: no secret reaches the spool.
        self.request_redactor = (
            RequestRedactor(config.redaction, config.receivers.max_value_depth) if spool else None
        )
        self.stop_report: StopReport | None = None
        # CPU seconds of the pipeline's thread by stage (receivers count their own; see
        # `stage_cpu_seconds`).
        self.stage_seconds: dict[str, float] = dict.fromkeys(PIPELINE_STAGES, 0.0)
        # A worker process of a sharded collector reports to the spool's owner instead.
        self._ledger = ledger if ledger is not None else SegmentLedger(spool) if spool else None
        self._queue: Queue[Batch] = Queue()
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None

        self._admission = Admission(
            config.pipeline, self._queue, self._stop, spool, self.redactor, self.stats
        )
        self.judge: JudgeStage | None = None
        if config.judge.enabled:
            self.judge = JudgeStage(
                OpenAICompatibleJudge(config.judge), config.judge, self._admission.consume_findings
            )
        self._stages = Stages(
            config,
            windows=self.windows,
            limits=self.limits,
            redactor=self.redactor,
            exporter=exporter,
            stats=self.stats,
            stage_seconds=self.stage_seconds,
            ledger=self._ledger,
            judge=self.judge,
            clock=clock,
            wall_clock=wall_clock,
        )
        self._writes = Writes(
            config,
            clock=clock,
            exporter=exporter,
            windows=self.windows,
            stats=self.stats,
            stage_seconds=self.stage_seconds,
            spool=spool,
            ledger=self._ledger,
            batches=self._queue,
            unverified=self._stages.unverified,
            emit_closed=self._stages.emit_closed,
        )
        self._replay = (
            Replay(
                config,
                spool=spool,
                recovered=recovered,
                windows=self.windows,
                redactor=self.redactor,
                stats=self.stats,
                exporter=exporter,
                clock=clock,
                stopping=self._stop,
                process=self._stages.process,
                writes=self._writes,
            )
            if spool is not None
            else None
        )

    # -- the door receivers call (see `admission`) ----------------------------------------------

    def consume_spans(self, spans: list[SpanRecord], raw: RawRequest | None = None) -> Accepted:
        return self._admission.consume_spans(spans, raw)

    def consume_logs(self, logs: list[LogRecord], raw: RawRequest | None = None) -> Accepted:
        return self._admission.consume_logs(logs, raw)

    def consume_findings(self, findings: list[Finding]) -> None:
        """Findings made outside the worker (the semantic judge), stored by the worker."""
        self._admission.consume_findings(findings)

    def check_room(self, request_bytes: int) -> None:
        """Refuse a request before it is even parsed when it cannot be taken."""
        self._admission.check_room(request_bytes)

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
        """Queue records decoded and spooled elsewhere, or `kind="call"` with one callable to
        run on the pipeline's thread in turn (see `Admission.put`)."""
        self._admission.put(
            kind,
            items,
            entry,
            replayed=replayed,
            stored=stored,
            scan=scan,
            size=size,
            now=now,
        )

    def replay_finished(self) -> None:
        """The windows' clock is the clock again (after requests `put` with `now`)."""
        self._writes.follow(None)

    @property
    def queue_depth(self) -> int:
        return self._admission.queue_depth

    @property
    def queued_batches(self) -> int:
        return self._admission.queued_batches

    # -- the stages, driven directly by offline analysis (see `stages`) -------------------------

    def process_spans(
        self, spans: list[SpanRecord], now: float | None = None, *, source: Any = None
    ) -> None:
        self._stages.process_spans(spans, now, source=source)

    def process_logs(
        self, logs: list[LogRecord], now: float | None = None, *, source: Any = None
    ) -> None:
        self._stages.process_logs(logs, now, source=source)

    def close_finished(self) -> None:
        """Close the runs whose end has been seen now, without waiting out their grace."""
        self._stages.close_finished()

    def close_all(self, reason: str = "end_of_input") -> None:
        """Close every open run; `reason` is recorded for runs nothing else closed."""
        self._stages.close_all(reason)

    def tick(self, now: float) -> None:
        """Close idle runs, relieve the spool and write what is due (see `writes`)."""
        self._writes.tick(now)

    def close_runs_holding(self, segment: int) -> int:
        """Close and analyse the runs holding a spool segment; returns how many."""
        return self._writes.close_runs_holding(segment)

    def on_output(self, listener: Callable[[WindowOutput], None]) -> None:
        """Call `listener` with every batch of findings and closed-run signatures."""
        self._stages.on_output(listener)

    def after_export(self, stage: Callable[[float, bool], None]) -> None:
        """Call `stage(now, final)` on the pipeline's thread after each tick's export, and
        once more with `final=True` after the last flush at stop (the scale-out merge of runs
        split across replicas runs here, after this replica's own rows are written)."""
        self._writes.after_export(stage)

    # -- the worker ---------------------------------------------------------------------------

    def start(self) -> None:
        self._writes.start()
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
        self._admission.close(enqueue_wait_s)
        # Wake the pipeline's thread if it waits for a batch (up to a tick interval).
        self.put("call", [_nothing])
        if self._worker is not None:
            # The worker finishes the replay first (everything in the spool was accepted).
            self._worker.join()
        # Finish the write in progress; from here on everything runs on this thread.
        self._writes.stop()
        if self._replay is not None and self._replay.cut_short:
            # The segment being read, and those not reached.
            report.replay_segments_left = self._replay.spool.replay_segments_left + 1
            report.reason = "the store refused writes while the spool was replayed"
        self._drain_for_stop(report)
        if durable and keep_open:
            # Requests of these runs were left in the spool: close none, so each is rebuilt
            # and analysed whole at the next start.
            report.runs_left_open = self.windows.active_runs
        elif durable and self.config.durability.resume_open_runs:
            self._stages.emit_closed(self.windows.close_finished)
            report.runs_left_open = self.windows.active_runs
        else:
            self._stages.emit_closed(lambda: self.windows.close_all("shutdown"))
        if self.judge is not None:
            # Runs still waiting for the judge are judged no more; what it found so far stays.
            self.judge.stop()
            self._drain_for_stop(report)
        self._writes.last_flush(report)
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
                        self._writes.confirm()
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
            except Empty:
                return
            self._take(batch)

    def _run(self) -> None:
        if self._replay is not None and self._replay.pending:
            self._replay.run()
        interval = self.config.pipeline.tick_interval_s
        writes, batches = self._writes, self._queue
        while not self._stop.is_set():
            if self.exporter.full:
                # The store is behind: take nothing more until it catches up, so the queue
                # fills and receivers push back.
                self.stats.backpressure_ticks += 1
                self._stop.wait(interval)
            else:
                try:
                    batch = batches.get(timeout=writes.wait_s(interval))
                except Empty:
                    pass
                else:
                    self._take(batch)
            writes.maybe_tick()

    def _take(self, batch: Batch) -> None:
        self._admission.taken(batch)
        if batch.now is not None:
            self._writes.follow(batch.now)
        self._stages.process(batch, batch.now)

    # -- what it reports ----------------------------------------------------------------------

    def stage_cpu_seconds(self) -> dict[str, float]:
        """CPU seconds by stage, the store's own thread included."""
        stages = dict(self.stage_seconds)
        stages["store"] += self._writes.write_cpu_s
        return stages

    def health(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "queue_items": self._admission.queue_depth,
            "queue_max_items": self.config.pipeline.queue_max_items,
            "queue_bytes": self._admission.queued_bytes,
            "queue_max_bytes": self.config.pipeline.queue_max_bytes,
            "active_runs": self.windows.active_runs,
            "pipeline": {
                **vars(self.stats),
                "findings_by_mode": dict(self.stats.findings_by_mode),
            },
            "windows": windows_health(self.windows.stats),
            "limits": dict(self.limits.stats),
            "redaction": dict(self.redactor.stats),
            "durability": {"mode": self.config.durability.mode},
        }
        if self.spool is not None:
            status["durability"].update(self.spool.health())
        return status


def _nothing() -> None:
    return None
