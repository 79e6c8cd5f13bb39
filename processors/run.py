"""What is known about one agent run while it is open: its steps so far, its totals and
attributes, and the per-run state of each detector. Detectors read a run; the run windows
(processors/window.py) keep the runs, and import this module, never the reverse.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import InitVar, dataclass, field
from typing import Any, ClassVar

from mast_otel.processors import conventions
from mast_otel.processors.code_execution import ExecutedCode
from mast_otel.processors.conversation import Conversations
from mast_otel.processors.model import Finding, RunSignature, Step, StepKind, StepRef
from mast_otel.processors.normalize.ancestry import Ancestry
from mast_otel.processors.trail import RunAttribution, Trail

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_EVALUATION = StepKind.EVALUATION
_HANDOFF = StepKind.HANDOFF
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL
# How many of a model call's latest input messages are read for a teammate's named turn.
_NAMED_TURNS = 8


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


@dataclass(slots=True, eq=False, repr=False)
class Run:
    """What the collector knows about one run while it is open."""

    trace_id: str
    # Recent steps kept for detectors that look back (the window's length).
    max_steps: InitVar[int]
    # When the run was opened (its last activity until a step arrives).
    now: InitVar[float]
    window: deque[Step] = field(init=False)
    pending: list[tuple[float, Step]] = field(init=False, default_factory=list)
    span_ids: set[str] = field(init=False, default_factory=set)
    last_seen: float = field(init=False)
    close_at: float | None = field(init=False, default=None)
    closed_by: str = field(init=False, default="")
    root: Step | None = field(init=False, default=None)
    attributes: dict[str, Any] = field(init=False, default_factory=dict)
    # Bumped whenever `attributes` changes, so a detector can keep what it derives from them.
    attributes_version: int = field(init=False, default=0)
    detectors: list[DetectorRun] = field(init=False, default_factory=list)
    plan: DispatchPlan = field(init=False, default_factory=dict)
    closing: tuple[int, ...] = field(init=False, default=())
    # The last step digested by `ref`, so the detectors that remember it share one digest.
    ref_step: Step | None = field(init=False, default=None)
    ref_of: StepRef | None = field(init=False, default=None)
    mode_counts: Counter[str] = field(init=False, default_factory=Counter)
    start_ns: int = field(init=False, default=0)
    end_ns: int = field(init=False, default=0)
    steps_seen: int = field(init=False, default=0)
    llm_calls: int = field(init=False, default=0)
    tool_calls: int = field(init=False, default=0)
    errors: int = field(init=False, default=0)
    evaluations: int = field(init=False, default=0)
    input_tokens: int = field(init=False, default=0)
    output_tokens: int = field(init=False, default=0)
    models: Counter[str] = field(init=False, default_factory=Counter)
    agents: Counter[str] = field(init=False, default_factory=Counter)
    # The agents that spoke: made model calls, or wrote a named turn a model call's input
    # holds (a group chat's executor). Two or more make the run a team's.
    speakers: set[str] = field(init=False, default_factory=set)
    services: Counter[str] = field(init=False, default_factory=Counter)
    # Which agent each span belongs to (by its nearest agent ancestor), as spans arrive.
    ancestry: Ancestry = field(init=False, default_factory=Ancestry)
    conversation_id: str = field(init=False, default="")
    acting_agent: str = field(init=False, default="")
    # The run's conversations, recovered from its model calls' inputs (opened at the first).
    conversations: Conversations | None = field(init=False, default=None)
    expected_agent: str = field(init=False, default="")
    # The run's code runs (opened at the first span of an executor running code).
    code: ExecutedCode | None = field(init=False, default=None)
    # The turns and findings attribution reads at close.
    trail: Trail = field(init=False, default_factory=Trail)

    def __post_init__(self, max_steps: int, now: float) -> None:
        self.window = deque(maxlen=max_steps)
        self.last_seen = now

    def ref(self, step: Step) -> StepRef:
        """The digest of a step a detector wants to remember (shared by every detector that
        remembers the same step)."""
        if self.ref_step is step and self.ref_of is not None:
            return self.ref_of
        ref = StepRef(step)
        self.ref_step, self.ref_of = step, ref
        return ref

    def record(self, step: Step, recovered: bool = False) -> None:
        """Fold a released step into the run's totals and window; a step recovered from a
        model call's input (no span of its own) is not counted as one of the run's spans."""
        self.window.append(step)
        self.trail.add(step)
        if not recovered:
            self.steps_seen += 1
        if step.start_ns and (not self.start_ns or step.start_ns < self.start_ns):
            self.start_ns = step.start_ns
        self.end_ns = max(self.end_ns, step.end_ns)
        if step.kind is _LLM:
            self.llm_calls += 1
            if step.model:
                self.models[step.model] += 1
            if step.agent:
                self.speakers.add(step.agent)
                if len(self.speakers) == 1:
                    self._named_turns(step)
        elif step.kind is _TOOL:
            self.tool_calls += 1
        if step.failed:
            self.errors += 1
        if step.kind is _EVALUATION:
            self.evaluations += 1
        self.input_tokens += step.input_tokens or 0
        self.output_tokens += step.output_tokens or 0
        if step.agent:
            self.agents[step.agent] += 1
        if step.service:
            self.services[step.service] += 1
        if step.conversation_id and not self.conversation_id:
            self.conversation_id = step.conversation_id

    def _named_turns(self, step: Step) -> None:
        """Another agent's named turn among the latest of a model call's input (or, where the
        input names no one, a turn another agent gave: a group chat's): a teammate."""
        for message in step.input_history[-_NAMED_TURNS:]:
            if message.name and message.name != step.agent and message.role == "assistant":
                self.speakers.add(message.name)
                return
        if self.conversations is not None and self.conversations.turns.team:
            named = self.conversations.turns.named(step, _NAMED_TURNS)
            if named:
                self.speakers.add(named)

    def implied_handoff(self, step: Step) -> Step | None:
        """A hand-off no span spelled out: another agent starts acting (a sub-agent invoked
        under this one, an OpenInference agent span, a framework with no hand-off tool). It is
        shown to detectors as a HANDOFF step from the agent that acted last; the message is
        what the new agent was first told."""
        if step.kind is _HANDOFF:
            self.expected_agent = step.target_agent
            return None
        if step.kind not in (_LLM, _TOOL) or not step.agent:
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
            kind=_HANDOFF,
            start_ns=step.start_ns,
            end_ns=step.start_ns,
            dialect=step.dialect,
            service=step.service,
            agent=previous,
            target_agent=step.agent,
            input_text=step.input_text if step.kind is _LLM else "",
        )

    def signature(self) -> RunSignature:
        root = self.root
        outcome, score = run_outcome(self.attributes)
        blamed = (
            self.trail.attribution(root.agent if root else "")
            if outcome == "failure" or self.mode_counts
            else RunAttribution()
        )
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
            decisive_span_id=blamed.span_id,
            decisive_step=blamed.step,
            responsible_agent=blamed.agent,
            attribution_chain=blamed.chain,
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


def run_outcome(attributes: dict[str, Any]) -> tuple[str, float | None]:
    """(`success`, `failure` or "" for unknown; the score or None) from run attributes."""
    score = _as_float(attributes.get(conventions.RUN_SCORE))
    value = attributes.get(conventions.RUN_OUTCOME)
    if value is None:
        return "", score
    return conventions.outcome_of(str(value)), score
