"""Per-run windows: the state kept for each agent run while it streams in.

A run is a trace (log-only agents get a trace id derived from their conversation). Steps are
held for a short grace period and released to the detectors in start-time order, so spans that
arrive slightly out of order are still seen in order. A run closes when its root span has
arrived (plus the grace period, for stragglers), when a span carries `mast.run.end`, when it has
been idle too long, or when the collector needs room (eviction), in which case it is closed and
analysed, never dropped.

Memory is bounded: at most `max_active_runs` runs, at most `max_steps_per_run` recent steps kept
per run for detectors to look back on (detectors still see every step as it is released), and a
bounded memory of recently closed runs to recognise late spans. Each bound is counted when hit.
Time is passed in by the caller (the pipeline's one clock), so this module has no clock.
"""

from __future__ import annotations

import heapq
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from mast_otel.processors import code_execution as code
from mast_otel.processors import conventions, release
from mast_otel.processors.conversation import RecoveryStats
from mast_otel.processors.dispatch import closing_plan, dispatch_plan, stamp_findings
from mast_otel.processors.judge import Transcript
from mast_otel.processors.model import Finding, OutcomeUpdate, RunSignature, Step
from mast_otel.processors.run import DetectorRun, DispatchPlan, Run, run_outcome


@dataclass
class WindowConfig:
    """Per-run state: how long a run waits for late spans, when it closes, what it keeps."""

    # How long a step waits for earlier-starting steps that may still arrive.
    grace_s: float = 0.5
    # A run with no new span for this long is closed.
    idle_timeout_s: float = 60.0
    # Runs open at once; past this the least recently active run is closed and analysed.
    max_active_runs: int = 20_000
    # Recent steps kept per run for detectors that look back.
    max_steps_per_run: int = 256
    # Steps waiting out their grace period in one run; past this they are released at once.
    max_pending_steps_per_run: int = 4_096
    # Closed runs remembered so that their late spans are recognised, not opened as new runs.
    closed_runs_remembered: int = 100_000
    # How long steps wait for an ancestor span that may name their agent (spans are exported
    # when they end, so an agent span arrives after its model and tool spans).
    agent_wait_s: float = 5.0
    # Message events sent as log records before their span arrived, kept for that many spans.
    max_early_events: int = 10_000

    def validate(self) -> None:
        for name in (
            "idle_timeout_s",
            "max_active_runs",
            "max_steps_per_run",
            "max_pending_steps_per_run",
            "closed_runs_remembered",
            "max_early_events",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"windows.{name} must be greater than 0")
        if self.grace_s < 0:
            raise ValueError("windows.grace_s must not be negative")
        if self.agent_wait_s < 0:
            raise ValueError("windows.agent_wait_s must not be negative")


# Opens the per-run state of every enabled detector.
OpenDetectors = Callable[[Run], list[DetectorRun]]


def _start_order(pending: tuple[float, Step]) -> tuple[int, int]:
    return pending[1].start_ns, pending[1].end_ns


@dataclass
class WindowStats:
    runs_opened: int = 0
    runs_closed: Counter[str] = field(default_factory=Counter)
    runs_evicted: int = 0
    steps_received: int = 0
    steps_duplicate: int = 0
    steps_late: int = 0
    steps_after_close: int = 0
    outcomes_after_close: int = 0
    steps_trimmed: int = 0
    pending_overflow: int = 0
    # Times a run's steps were released without waiting longer for an ancestor span that may
    # name their agent (it did not come within `agent_wait_s`).
    agent_wait_expired: int = 0
    # Message events joined to their span's step, and those that came too late or found none.
    events_joined: int = 0
    events_after_step: int = 0
    events_dropped: int = 0
    # What model calls' inputs showed that no span did (`processors.conversation`).
    recovery: RecoveryStats = field(default_factory=RecoveryStats)


@dataclass
class WindowOutput:
    findings: list[Finding] = field(default_factory=list)
    signatures: list[RunSignature] = field(default_factory=list)
    outcomes: list[OutcomeUpdate] = field(default_factory=list)
    # The closed runs' recent steps, when someone (a semantic judge) asked to read them.
    transcripts: list[Transcript] = field(default_factory=list)

    def extend(self, other: WindowOutput) -> None:
        self.findings.extend(other.findings)
        self.signatures.extend(other.signatures)
        self.outcomes.extend(other.outcomes)
        self.transcripts.extend(other.transcripts)


class RunWindows:
    """All open runs: add steps as they arrive, `tick` to release and close."""

    def __init__(
        self, config: WindowConfig, open_detectors: OpenDetectors, keep_transcripts: bool = False
    ) -> None:
        self.config = config
        self._open_detectors = open_detectors
        self.keep_transcripts = keep_transcripts
        # Least recently active first: idle closing and eviction pop from the front.
        self._runs: OrderedDict[str, Run] = OrderedDict()
        # Runs with steps waiting, by when their oldest waiting step arrived.
        self._pending: OrderedDict[str, float] = OrderedDict()
        self._close_due: list[tuple[float, str]] = []
        self._closed: OrderedDict[str, None] = OrderedDict()
        # Runs whose next steps wait for an ancestor span, by when they stop waiting.
        self._holding: dict[str, float] = {}
        # Message events (log records) that arrived before their span: (trace, span) → joins.
        self._early_events: OrderedDict[tuple[str, str], list[Callable[[Step], None]]] = (
            OrderedDict()
        )
        # Dispatch plans by the detectors' classes (the same for every run of one factory).
        self._plans: dict[tuple[type, ...], tuple[DispatchPlan, tuple[int, ...]]] = {}
        self.stats = WindowStats()

    @property
    def active_runs(self) -> int:
        return len(self._runs)

    def add(self, step: Step, now: float) -> WindowOutput:
        """Take one step. Returns what closing evicted runs produced (usually nothing)."""
        out = WindowOutput()
        self.stats.steps_received += 1
        trace_id = step.trace_id
        if trace_id in self._closed:
            outcome, score = run_outcome(step.run_attributes)
            if outcome or score is not None:
                self.stats.outcomes_after_close += 1
                out.outcomes.append(OutcomeUpdate(trace_id, outcome, score))
            else:
                self.stats.steps_after_close += 1
            return out
        run = self._runs.get(trace_id)
        if run is None:
            if len(self._runs) >= self.config.max_active_runs:
                _, oldest = next(iter(self._runs.items()))
                self.stats.runs_evicted += 1
                out.extend(self._close(oldest, "evicted"))
            run = Run(trace_id, self.config.max_steps_per_run, now)
            run.detectors = self._open_detectors(run)
            classes = tuple(type(d) for d in run.detectors)
            plans = self._plans.get(classes)
            if plans is None:
                plans = (dispatch_plan(run.detectors), closing_plan(run.detectors))
                self._plans[classes] = plans
            run.plan, run.closing = plans
            self._runs[trace_id] = run
            self.stats.runs_opened += 1
        else:
            self._runs.move_to_end(trace_id)
        if step.span_id in run.span_ids:
            self.stats.steps_duplicate += 1
            return out
        run.span_ids.add(step.span_id)
        run.last_seen = now
        if self._early_events:
            for join in self._early_events.pop((trace_id, step.span_id), ()):
                join(step)
                self.stats.events_joined += 1
        run.ancestry.add(step)
        if run.code is not None or step.operation in code.CODE_OPERATIONS:
            run.code = run.code or code.ExecutedCode()
            run.code.arrive(step)
        if trace_id in self._holding:
            # A span some steps may be waiting for: look again once its grace has passed.
            del self._holding[trace_id]
            self._pending.pop(trace_id, None)
            self._pending[trace_id] = now
        is_root = not step.parent_span_id
        if step.run_attributes:
            # The root span's attributes win over the same attribute on a child.
            attributes = run.attributes
            for key, value in step.run_attributes.items():
                if is_root or key not in attributes:
                    attributes[key] = value
            run.attributes_version += 1
        if is_root and run.root is None:
            run.root = step
            self._schedule_close(run, now + self.config.grace_s, "root_ended")
        if step.run_attributes.get(conventions.RUN_END) is True:
            self._schedule_close(run, now + self.config.grace_s, "explicit_end")
        if not run.pending and trace_id not in self._pending:
            self._pending[trace_id] = now
        run.pending.append((now, step))
        if len(run.pending) > self.config.max_pending_steps_per_run:
            self.stats.pending_overflow += 1
            out.findings.extend(self._release(run, None))
        return out

    def tick(self, now: float) -> WindowOutput:
        """Release steps past their grace period; close runs that are due or idle."""
        out = WindowOutput()
        horizon = now - self.config.grace_s
        while self._pending:
            trace_id, first_arrival = next(iter(self._pending.items()))
            if first_arrival > horizon:
                break
            run = self._runs[trace_id]
            out.findings.extend(self._release(run, horizon, now))
        if self._holding:
            for trace_id, until in list(self._holding.items()):
                if until <= now:
                    del self._holding[trace_id]
                    held = self._runs.get(trace_id)
                    if held is not None:
                        self.stats.agent_wait_expired += 1
                        out.findings.extend(self._release(held, horizon, None))
        while self._close_due and self._close_due[0][0] <= now:
            _, trace_id = heapq.heappop(self._close_due)
            due = self._runs.get(trace_id)
            # Entries are not removed when a close is moved earlier: skip the stale ones.
            if due is not None and due.close_at is not None and due.close_at <= now:
                out.extend(self._close(due, due.closed_by))
        idle_before = now - self.config.idle_timeout_s
        while self._runs:
            run = next(iter(self._runs.values()))
            if run.last_seen > idle_before:
                break
            out.extend(self._close(run, "idle"))
        return out

    def next_close_due(self) -> float | None:
        """When the earliest scheduled close falls due (a root span's grace ending, an explicit
        end), or None: the pipeline ticks then instead of at its next regular tick, so a run's
        signature does not wait out the tick interval on top of the grace period."""
        return self._close_due[0][0] if self._close_due else None

    def is_open(self, trace_id: str) -> bool:
        return trace_id in self._runs

    def seen(self, trace_id: str, span_id: str) -> bool:
        """Whether this open run already has this span (a duplicate delivery)."""
        run = self._runs.get(trace_id)
        return run is not None and span_id in run.span_ids

    def is_closed(self, trace_id: str) -> bool:
        """Whether this run was closed recently (its late spans are not analysed)."""
        return trace_id in self._closed

    def mark_closed(self, trace_id: str) -> None:
        """Remember a run as closed without having seen it (closed by an earlier process)."""
        if trace_id not in self._runs:
            self._closed[trace_id] = None
            if len(self._closed) > self.config.closed_runs_remembered:
                self._closed.popitem(last=False)

    def close_runs(self, trace_ids: Iterable[str], reason: str) -> WindowOutput:
        """Close these runs now, analysed as at any close (e.g. to free what they hold)."""
        out = WindowOutput()
        for trace_id in trace_ids:
            run = self._runs.get(trace_id)
            if run is not None:
                out.extend(self._close(run, reason))
        return out

    def close_finished(self) -> WindowOutput:
        """Close the runs whose end has been seen (root span or explicit end) without waiting
        out their grace period; runs still in progress stay open."""
        out = WindowOutput()
        for run in list(self._runs.values()):
            if run.close_at is not None:
                out.extend(self._close(run, run.closed_by))
        return out

    def close_all(self, reason: str = "shutdown") -> WindowOutput:
        """Close every open run (at shutdown, or at the end of an offline analysis)."""
        out = WindowOutput()
        for run in list(self._runs.values()):
            out.extend(self._close(run, run.closed_by or reason))
        return out

    def _schedule_close(self, run: Run, at: float, reason: str) -> None:
        if run.close_at is None or at < run.close_at:
            run.close_at = at
            run.closed_by = reason
            heapq.heappush(self._close_due, (at, run.trace_id))

    def join_events(self, trace_id: str, span_id: str, join: Callable[[Step], None]) -> None:
        """Apply what a message event (a log record naming its span) says to that span's step:
        now if the step is waiting, when it arrives if it has not yet."""
        run = self._runs.get(trace_id)
        if run is not None and span_id in run.span_ids:
            for _, step in run.pending:
                if step.span_id == span_id:
                    join(step)
                    self.stats.events_joined += 1
                    return
            self.stats.events_after_step += 1
            return
        if trace_id in self._closed:
            self.stats.events_after_step += 1
            return
        key = (trace_id, span_id)
        joins = self._early_events.get(key)
        if joins is None:
            if len(self._early_events) >= self.config.max_early_events:
                _, dropped = self._early_events.popitem(last=False)
                self.stats.events_dropped += len(dropped)
            joins = self._early_events[key] = []
        joins.append(join)

    def _release(self, run: Run, horizon: float | None, now: float | None = None) -> list[Finding]:
        """Hand waiting steps to the detectors in start order: those that arrived by
        `horizon`, or all of them when `horizon` is None. With `now`, steps whose agent may
        be named by an ancestor span not yet arrived wait for it (up to `agent_wait_s`), as
        code an executor may run waits for what says whether it ran (`code_execution`), and
        the steps after them in start order with them."""
        if horizon is None:
            ready, run.pending = run.pending, []
        else:
            ready = [p for p in run.pending if p[0] <= horizon]
            run.pending = [p for p in run.pending if p[0] > horizon]
        if len(ready) > 1:
            ready.sort(key=_start_order)
        if now is not None and ready:
            ancestry = run.ancestry
            for i, (arrived, step) in enumerate(ready):
                until = arrived + self.config.agent_wait_s
                if not ancestry.worth_waiting(step):
                    until = code.wait_until(step, ready, i, run.pending, run.code, until)
                if until > now:
                    run.pending = ready[i:] + run.pending
                    ready = ready[:i]
                    self._holding[run.trace_id] = until
                    break
        self._pending.pop(run.trace_id, None)
        if run.pending and run.trace_id not in self._holding:
            self._pending[run.trace_id] = min(p[0] for p in run.pending)
        findings: list[Finding] = []
        release.hand_over(run, ready, self.stats, findings)
        return findings

    def _close(self, run: Run, reason: str) -> WindowOutput:
        out = WindowOutput()
        out.findings.extend(self._release(run, None))
        release.at_close(run, out.findings)
        run.closed_by = reason
        if run.root is None and run.evaluations and run.evaluations == run.steps_seen:
            # Only a verdict on a run closed too long ago to remember: update, do not invent.
            outcome, score = run_outcome(run.attributes)
            out.outcomes.append(OutcomeUpdate(run.trace_id, outcome, score))
        else:
            detectors = run.detectors
            for i in run.closing:
                produced = detectors[i].on_close(run)
                if produced:
                    out.findings.extend(stamp_findings(run, produced))
            out.signatures.append(run.signature())
            if self.keep_transcripts:
                out.transcripts.append(Transcript(run.trace_id, tuple(run.window)))
        self._runs.pop(run.trace_id, None)
        self._holding.pop(run.trace_id, None)
        self._closed[run.trace_id] = None
        if len(self._closed) > self.config.closed_runs_remembered:
            self._closed.popitem(last=False)
        self.stats.runs_closed[reason] += 1
        return out
