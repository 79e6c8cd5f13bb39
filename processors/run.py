"""What is known about one agent run while it is open: its steps so far, its totals and
attributes, and the per-run state of each detector. Detectors read a run; the run windows
(processors/window.py) keep the runs, and import this module, never the reverse.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable
from typing import Any, ClassVar

from processors import conventions
from processors.model import (
    KIND_EVALUATION,
    KIND_HANDOFF,
    KIND_LLM,
    KIND_TOOL,
    Finding,
    RunSignature,
    Step,
    StepKind,
    StepRef,
)


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


# For each kind of step, the positions of the detectors whose `on_step` reads it.
DispatchPlan = dict[StepKind, tuple[int, ...]]


class Run:
    """What the collector knows about one run while it is open."""

    __slots__ = (
        "acting_agent",
        "agents",
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
            service=(root.service if root and root.service else most_common(self.services)),
            agent=(root.agent if root and root.agent else most_common(self.agents)),
            model=most_common(self.models),
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


def most_common(counter: Counter[str]) -> str:
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
