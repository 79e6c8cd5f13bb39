"""The pipeline: receive → normalize → window → detect → export, one way.

Receivers call `consume_spans`/`consume_logs` from their own threads; the batch goes on a
bounded queue and the call returns at once (or raises `Refused` when the queue is full, which
receivers turn into OTLP's retryable status). One worker thread takes batches off the queue,
normalizes each span into a step, feeds the run windows (which run the detectors), and hands
spans, findings and signatures to the exporter. The same `process_*` methods serve the offline
`analyze` command, driven synchronously.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from collector.config import Config
from collector.consumer import Accepted, Refused
from collector.exporters.base import Exporter
from collector.judge import JudgeStage, OpenAICompatibleJudge
from processors import conventions
from processors.classify import ActionClassifier
from processors.detectors import build_detectors, detector_factory
from processors.model import Finding, Step, StepKind, StepStatus
from processors.normalize import normalize_log, normalize_span
from processors.records import LogRecord, SpanRecord
from processors.window import RunWindows, WindowOutput

log = logging.getLogger(__name__)

Clock = Callable[[], float]


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
    export_errors: int = 0
    findings: int = 0
    signatures: int = 0
    outcomes_updated: int = 0
    findings_refused: int = 0
    # Findings by mode, for self-metrics (fatality is derived from the mode).
    findings_by_mode: dict[str, int] = field(default_factory=dict)


class Pipeline:
    def __init__(self, config: Config, exporter: Exporter, clock: Clock = time.monotonic) -> None:
        self.config = config
        self.exporter = exporter
        self.clock = clock
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
        self.stats = PipelineStats()
        self._queue: queue.Queue[tuple[str, list[Any]]] = queue.Queue()
        self._queued_items = 0
        self._queue_lock = threading.Lock()
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None
        self._last_tick = 0.0
        self._listeners: list[Callable[[WindowOutput], None]] = []
        self._after_export: list[Callable[[float, bool], None]] = []

    # -- the consumer side, called by receivers ---------------------------------------------

    def consume_spans(self, spans: list[SpanRecord]) -> Accepted:
        self._enqueue("spans", spans)
        return Accepted()

    def consume_logs(self, logs: list[LogRecord]) -> Accepted:
        self._enqueue("logs", logs)
        return Accepted()

    def consume_findings(self, findings: list[Finding]) -> None:
        """Findings made outside the worker (the semantic judge), stored by the worker."""
        try:
            self._enqueue("findings", findings)
        except Refused:
            self.stats.findings_refused += len(findings)

    def _enqueue(self, kind: str, items: list[Any]) -> None:
        if not items:
            return
        with self._queue_lock:
            if self._stop.is_set():
                raise Refused("the collector is shutting down", self.config.pipeline.retry_after_s)
            limit = self.config.pipeline.queue_max_items
            if self._queued_items + len(items) > limit and self._queued_items > 0:
                self.stats.items_refused += len(items)
                raise Refused(
                    f"pipeline queue is full ({self._queued_items} of {limit} items waiting)",
                    self.config.pipeline.retry_after_s,
                )
            self._queued_items += len(items)
        self._queue.put((kind, items))

    @property
    def queue_depth(self) -> int:
        return self._queued_items

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
        self._worker = threading.Thread(target=self._run, name="mast-pipeline", daemon=True)
        self._worker.start()
        if self.judge is not None:
            self.judge.start()

    def stop(self) -> None:
        """Take no more, process everything queued, close every open run, flush the store."""
        with self._queue_lock:
            self._stop.set()
        if self._worker is not None:
            self._worker.join()
        self._drain()
        self._emit(self.windows.close_all("shutdown"))
        if self.judge is not None:
            # Runs still waiting for the judge are judged no more; what it found so far stays.
            self.judge.stop()
            self._drain()
        self.exporter.flush(self.clock(), force=True)
        for stage in self._after_export:
            stage(self.clock(), True)

    def _run(self) -> None:
        interval = self.config.pipeline.tick_interval_s
        while not self._stop.is_set():
            try:
                kind, items = self._queue.get(timeout=interval)
            except queue.Empty:
                pass
            else:
                self._process(kind, items)
            now = self.clock()
            if now - self._last_tick >= interval:
                self._last_tick = now
                self.tick(now)

    def _drain(self) -> None:
        while True:
            try:
                kind, items = self._queue.get_nowait()
            except queue.Empty:
                return
            self._process(kind, items)

    def _process(self, kind: str, items: list[Any]) -> None:
        with self._queue_lock:
            self._queued_items -= len(items)
        try:
            if kind == "spans":
                self.process_spans(items)
            elif kind == "logs":
                self.process_logs(items)
            else:
                self.stats.findings += len(items)
                self.exporter.add_findings(items)
        except Exception:
            # A bug in a detector must not take the collector down with every run in flight.
            log.exception("processing a batch of %d %s failed", len(items), kind)

    # -- the stages, also driven directly by offline analysis ---------------------------------

    def process_spans(self, spans: list[SpanRecord], now: float | None = None) -> None:
        now = self.clock() if now is None else now
        self.stats.spans_received += len(spans)
        max_text = self.config.pipeline.max_step_text
        out = WindowOutput()
        for record in spans:
            step = normalize_span(record, max_text=max_text)
            if step is None:
                self.stats.spans_unrecognised += 1
                step = bare_step(record)
            out.extend(self.windows.add(step, now))
        self.exporter.add_spans(spans)
        self._emit(out)

    def process_logs(self, logs: list[LogRecord], now: float | None = None) -> None:
        now = self.clock() if now is None else now
        self.stats.logs_received += len(logs)
        max_text = self.config.pipeline.max_step_text
        out = WindowOutput()
        for record in logs:
            step = normalize_log(record, max_text=max_text)
            if step is not None:
                out.extend(self.windows.add(step, now))
        self.exporter.add_logs(logs)
        self._emit(out)

    def tick(self, now: float) -> None:
        self._emit(self.windows.tick(now))
        try:
            self.exporter.flush(now)
        except Exception:
            # Rows stay buffered and are written at the next flush.
            self.stats.export_errors += 1
            log.exception("writing to the store failed; will retry")
        for stage in self._after_export:
            try:
                stage(now, False)
            except Exception:
                log.exception("a stage after export failed; it runs again at the next tick")

    def close_all(self, reason: str = "end_of_input") -> None:
        """Close every open run; `reason` is recorded for runs nothing else closed."""
        self._emit(self.windows.close_all(reason))

    def _emit(self, out: WindowOutput) -> None:
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
        if out.findings:
            self.exporter.add_findings(out.findings)
        if out.signatures:
            self.exporter.add_signatures(out.signatures)
        for listener in self._listeners:
            listener(out)

    def health(self) -> dict[str, Any]:
        w = self.windows.stats
        return {
            "queue_items": self._queued_items,
            "queue_max_items": self.config.pipeline.queue_max_items,
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
            },
        }
