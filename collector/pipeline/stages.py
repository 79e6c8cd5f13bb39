"""The stages a batch goes through on the pipeline's thread: limits and redaction,
normalization into steps, the run windows and their detectors, and what they put out handed
to the exporter (`_emit`). Also driven directly, batch by batch, by offline analysis.

The CPU time of each stage is counted (`PIPELINE_STAGES`). The stages keep the runs opened
since the store last confirmed a write (`unverified`): their spans are looked up before they
are written, and the writes let them go once a write is confirmed."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from mast_otel.collector.config import Config
from mast_otel.collector.judge import JudgeStage
from mast_otel.collector.pipeline.batch import Batch, Clock, WallClock
from mast_otel.collector.pipeline.ledger import SegmentLedger
from mast_otel.collector.pipeline.stats import PipelineStats
from mast_otel.collector.pipeline.stats import thread_cpu as _cpu
from mast_otel.collector.store.exporter import Exporter
from mast_otel.processors import conventions
from mast_otel.processors.limits import RecordLimits
from mast_otel.processors.model import Step, StepKind, StepStatus
from mast_otel.processors.normalize import genai_messages, normalize_log, normalize_span
from mast_otel.processors.records import LogRecord, SpanRecord
from mast_otel.processors.redact import Redactor
from mast_otel.processors.window import RunWindows, WindowOutput

log = logging.getLogger(__name__)


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


class Stages:
    """The stages, over one batch at a time (see the module). Given what they read and feed:
    the windows, the limits and the redactor, the exporter, the counters and the CPU seconds
    by stage, the spool's ledger (None in memory mode), the judge (None when off) and the
    clocks. They keep who listens to what they put out (`on_output`)."""

    def __init__(
        self,
        config: Config,
        *,
        windows: RunWindows,
        limits: RecordLimits,
        redactor: Redactor,
        exporter: Exporter,
        stats: PipelineStats,
        stage_seconds: dict[str, float],
        ledger: SegmentLedger | None,
        judge: JudgeStage | None,
        clock: Clock,
        wall_clock: WallClock,
    ) -> None:
        self.config = config
        self.windows = windows
        self.limits = limits
        self.redactor = redactor
        self.exporter = exporter
        self.stats = stats
        self.stage_seconds = stage_seconds
        self.clock = clock
        self.wall_clock = wall_clock
        self._ledger = ledger
        self._judge = judge
        self._listeners: list[Callable[[WindowOutput], None]] = []
        # Runs opened since the store last confirmed a flush: their spans may have been stored
        # by an earlier process (or be re-sent copies), so they are looked up before writing.
        self.unverified: set[str] = set()
        self._skew_ns = int(config.limits.max_clock_skew_s * 1e9)

    def on_output(self, listener: Callable[[WindowOutput], None]) -> None:
        """Call `listener` with every batch of findings and closed-run signatures."""
        self._listeners.append(listener)

    def process(self, batch: Batch, now: float | None = None) -> None:
        """One batch off the queue. A failure is counted and logged; the spool's ledger is
        told the batch's record was processed all the same."""
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

    def process_spans(
        self, spans: list[SpanRecord], now: float | None = None, *, source: Any = None
    ) -> None:
        now = self.clock() if now is None else now
        batch: Batch | None = source
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
                self.unverified.add(trace_id)
            if self._ledger is not None and entry is not None and self.windows.is_open(trace_id):
                self._ledger.touched(trace_id, entry.segment)
            if not stored:
                export.append(record)
                checks.append(replayed or after_close or trace_id in self.unverified)
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
        batch: Batch | None = source
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
                message = genai_messages.message_event(record)
                if message is not None:
                    # A message event of a chat span: joined to that span's step.
                    event, body = message
                    self.windows.join_events(
                        record.trace_id,
                        record.span_id,
                        partial(
                            genai_messages.apply_message_event,
                            event=event,
                            body=body,
                            max_text=max_text,
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

    def emit_closed(self, produce: Callable[[], WindowOutput]) -> None:
        """Hand on what closing runs put out (`produce`, a call on the windows: a tick, a
        stop, the spool's relief). A failure is counted and logged, and closes nothing."""
        self._emit(self._guarded(produce))

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
        if self._judge is not None:
            for transcript in out.transcripts:
                self._judge.offer(transcript)
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
