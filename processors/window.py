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
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from processors import conventions
from processors.judge import Transcript
from processors.model import (
    KIND_EVALUATION,
    KIND_HANDOFF,
    KIND_LLM,
    KIND_TOOL,
    Finding,
    OutcomeUpdate,
    RunSignature,
    Step,
    StepKind,
    StepRef,
)
from processors.normalize.ancestry import Ancestry


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


class DetectorRun:
    """One detector's state for one run. Subclasses override what they need, and say in
    `kinds` which kinds of step `on_step` reads (None: every kind), so the window does not
    call it for the others."""

    __slots__ = ()

    kinds: ClassVar[frozenset[StepKind] | None] = None

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        return ()

    def on_close(self, run: Run) -> Iterable[Finding]:
        return ()


# Opens the per-run state of every enabled detector.
DetectorFactory = Callable[["Run"], list[DetectorRun]]

# For each kind of step, the positions of the detectors whose `on_step` reads it.
DispatchPlan = dict[StepKind, tuple[int, ...]]


def dispatch_plan(detectors: Iterable[DetectorRun]) -> DispatchPlan:
    """Which detectors each kind of step goes to, in the detectors' order."""
    listed = list(detectors)
    return {
        kind: tuple(i for i, d in enumerate(listed) if d.kinds is None or kind in d.kinds)
        for kind in StepKind
    }


def closing_plan(detectors: Iterable[DetectorRun]) -> tuple[int, ...]:
    """The positions of the detectors that decide anything when a run closes."""
    return tuple(i for i, d in enumerate(detectors) if type(d).on_close is not DetectorRun.on_close)


class Run:
    """What the collector knows about one run while it is open."""

    __slots__ = (
        "acting_agent",
        "agents",
        "ancestry",
        "attributes",
        "attributes_version",
        "close_at",
        "closed_by",
        "closing",
        "conversation_id",
        "detectors",
        "end_ns",
        "errors",
        "evaluations",
        "expected_agent",
        "input_tokens",
        "last_seen",
        "llm_calls",
        "mode_counts",
        "models",
        "output_tokens",
        "pending",
        "plan",
        "ref_of",
        "ref_step",
        "root",
        "services",
        "span_ids",
        "start_ns",
        "steps_seen",
        "tool_calls",
        "trace_id",
        "window",
    )

    def __init__(self, trace_id: str, max_steps: int, now: float) -> None:
        self.trace_id = trace_id
        self.window: deque[Step] = deque(maxlen=max_steps)
        self.pending: list[tuple[float, Step]] = []
        self.span_ids: set[str] = set()
        self.last_seen = now
        self.close_at: float | None = None
        self.closed_by = ""
        self.root: Step | None = None
        self.attributes: dict[str, Any] = {}
        # Bumped whenever `attributes` changes, so a detector can keep what it derives from them.
        self.attributes_version = 0
        self.detectors: list[DetectorRun] = []
        self.plan: DispatchPlan = {}
        self.closing: tuple[int, ...] = ()
        # The last step digested by `ref`, so the detectors that remember it share one digest.
        self.ref_step: Step | None = None
        self.ref_of: StepRef | None = None
        self.mode_counts: Counter[str] = Counter()
        self.start_ns = 0
        self.end_ns = 0
        self.steps_seen = 0
        self.llm_calls = 0
        self.tool_calls = 0
        self.errors = 0
        self.evaluations = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.models: Counter[str] = Counter()
        self.agents: Counter[str] = Counter()
        self.services: Counter[str] = Counter()
        self.conversation_id = ""
        self.acting_agent = ""
        self.expected_agent = ""
        self.ancestry = Ancestry()

    def ref(self, step: Step) -> StepRef:
        """The digest of a step a detector wants to remember (shared by every detector that
        remembers the same step)."""
        if self.ref_step is step and self.ref_of is not None:
            return self.ref_of
        ref = StepRef(step)
        self.ref_step, self.ref_of = step, ref
        return ref

    def record(self, step: Step) -> None:
        """Fold a released step into the run's totals and window."""
        self.window.append(step)
        self.steps_seen += 1
        if step.start_ns and (not self.start_ns or step.start_ns < self.start_ns):
            self.start_ns = step.start_ns
        self.end_ns = max(self.end_ns, step.end_ns)
        if step.kind is KIND_LLM:
            self.llm_calls += 1
            if step.model:
                self.models[step.model] += 1
        elif step.kind is KIND_TOOL:
            self.tool_calls += 1
        if step.failed:
            self.errors += 1
        if step.kind is KIND_EVALUATION:
            self.evaluations += 1
        self.input_tokens += step.input_tokens or 0
        self.output_tokens += step.output_tokens or 0
        if step.agent:
            self.agents[step.agent] += 1
        if step.service:
            self.services[step.service] += 1
        if step.conversation_id and not self.conversation_id:
            self.conversation_id = step.conversation_id

    def implied_handoff(self, step: Step) -> Step | None:
        """A hand-off no span spelled out: another agent starts acting (a sub-agent invoked
        under this one, an OpenInference agent span, a framework with no hand-off tool). It is
        shown to detectors as a HANDOFF step from the agent that acted last; the message is
        what the new agent was first told."""
        if step.kind is KIND_HANDOFF:
            self.expected_agent = step.target_agent
            return None
        if step.kind not in (KIND_LLM, KIND_TOOL) or not step.agent:
            return None
        previous, self.acting_agent = self.acting_agent, step.agent
        if step.agent == self.expected_agent:
            self.expected_agent = ""  # the hand-off a span announced has happened
            return None
        if not previous or previous == step.agent:
            return None
        return Step(
            trace_id=step.trace_id,
            # Shown at the new agent's first step: findings must point at spans that exist.
            span_id=step.span_id,
            parent_span_id=step.parent_span_id,
            name=f"handoff from {previous} to {step.agent}",
            kind=KIND_HANDOFF,
            start_ns=step.start_ns,
            end_ns=step.start_ns,
            dialect=step.dialect,
            service=step.service,
            agent=previous,
            target_agent=step.agent,
            input_text=step.input_text if step.kind is KIND_LLM else "",
        )

    def signature(self) -> RunSignature:
        root = self.root
        outcome, score = run_outcome(self.attributes)
        return RunSignature(
            trace_id=self.trace_id,
            service=(root.service if root and root.service else _most_common(self.services)),
            agent=(root.agent if root and root.agent else _most_common(self.agents)),
            model=_most_common(self.models),
            start_ns=self.start_ns,
            end_ns=self.end_ns,
            close_reason=self.closed_by,
            steps=self.steps_seen,
            llm_calls=self.llm_calls,
            tool_calls=self.tool_calls,
            errors=self.errors,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            mode_counts=dict(self.mode_counts),
            outcome=outcome,
            score=score,
            conversation_id=self.conversation_id,
        )


def _start_order(pending: tuple[float, Step]) -> tuple[int, int]:
    return pending[1].start_ns, pending[1].end_ns


def _most_common(counter: Counter[str]) -> str:
    return counter.most_common(1)[0][0] if counter else ""


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


_SUCCESS_WORDS = frozenset({"success", "succeeded", "pass", "passed", "resolved", "ok", "true"})
_FAILURE_WORDS = frozenset({"failure", "failed", "fail", "unresolved", "error", "false"})


def run_outcome(attributes: dict[str, Any]) -> tuple[str, float | None]:
    """(`success`, `failure` or "" for unknown; the score or None) from run attributes."""
    score = _as_float(attributes.get(conventions.RUN_SCORE))
    value = attributes.get(conventions.RUN_OUTCOME)
    if value is None:
        return "", score
    word = str(value).strip().lower()
    if word in _SUCCESS_WORDS:
        return "success", score
    if word in _FAILURE_WORDS:
        return "failure", score
    return "", score


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
        self, config: WindowConfig, open_detectors: DetectorFactory, keep_transcripts: bool = False
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
        be named by an ancestor span not yet arrived wait for it (up to `agent_wait_s`),
        and the steps after them in start order with them."""
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
                if ancestry.worth_waiting(step) and arrived + self.config.agent_wait_s > now:
                    run.pending = ready[i:] + run.pending
                    ready = ready[:i]
                    self._holding[run.trace_id] = arrived + self.config.agent_wait_s
                    break
        self._pending.pop(run.trace_id, None)
        if run.pending and run.trace_id not in self._holding:
            self._pending[run.trace_id] = min(p[0] for p in run.pending)
        findings: list[Finding] = []
        window, detectors, plan, stats = run.window, run.detectors, run.plan, self.stats
        ancestry = run.ancestry
        for _, step in ready:
            if not step.agent:
                ancestry.fill(step)
            if window:
                if step.start_ns < window[-1].start_ns:
                    stats.steps_late += 1
                if len(window) == window.maxlen:
                    stats.steps_trimmed += 1
            implied = run.implied_handoff(step)
            if implied is not None:
                for i in plan[KIND_HANDOFF]:
                    produced = detectors[i].on_step(implied, run)
                    if produced:
                        findings.extend(self._stamp(run, produced))
            run.record(step)
            for i in plan[step.kind]:
                produced = detectors[i].on_step(step, run)
                if produced:  # most steps produce nothing: skip the bookkeeping
                    findings.extend(self._stamp(run, produced))
        return findings

    def _close(self, run: Run, reason: str) -> WindowOutput:
        out = WindowOutput()
        out.findings.extend(self._release(run, None))
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
                    out.findings.extend(self._stamp(run, produced))
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

    @staticmethod
    def _stamp(run: Run, findings: Iterable[Finding]) -> list[Finding]:
        """Fill in the run-level context of findings and keep them for the signature."""
        stamped = []
        for finding in findings:
            if not finding.service:
                finding.service = _most_common(run.services)
            if not finding.model:
                finding.model = _most_common(run.models)
            if not finding.agent:
                finding.agent = _most_common(run.agents)
            run.mode_counts[finding.mode] += 1
            stamped.append(finding)
        return stamped
