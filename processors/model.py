"""The step model every detector reads, and the findings and signatures they produce."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class StepKind(StrEnum):
    LLM = "llm"
    TOOL = "tool"
    AGENT = "agent"
    HANDOFF = "handoff"
    HUMAN = "human"
    EVALUATION = "evaluation"
    OTHER = "other"


class StepStatus(StrEnum):
    OK = "ok"
    ERROR = "error"
    UNSET = "unset"


# Read for every step (`Step.failed`), looked up once: an enum member read through its class
# goes through the enum class at every use, a module name does not.
_ERROR = StepStatus.ERROR


@dataclass(slots=True, frozen=True)
class ToolCallRequest:
    """A tool call the model asked for in its output (not yet executed)."""

    name: str
    arguments: str = ""
    call_id: str = ""


@dataclass(slots=True, frozen=True)
class InputMessage:
    """One message of a model call's input, as much of it as recovering the conversation needs:
    its role (system, user, assistant, tool), its text, the call a tool message answers, the
    calls an assistant message asked for, and the name of its author where the message gives
    one (a team's agents: `name`)."""

    role: str
    text: str = ""
    call_id: str = ""
    calls: tuple[ToolCallRequest, ...] = ()
    name: str = ""


@dataclass(slots=True, frozen=True)
class ToolSpec:
    """A tool a model was offered: its name and the names of its parameters."""

    name: str
    parameters: tuple[str, ...] = ()


@dataclass(slots=True)
class Step:
    """One normalized span (or log event) of an agent run.

    Text fields are "" when the source did not say; numeric fields are None when unknown, so a
    detector can tell "zero tokens" from "not reported".
    """

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: StepKind
    start_ns: int
    end_ns: int
    dialect: str
    status: StepStatus = StepStatus.UNSET
    error: str = ""
    service: str = ""
    agent: str = ""
    model: str = ""
    conversation_id: str = ""
    operation: str = ""
    tool_name: str = ""
    tool_call_id: str = ""
    tool_arguments: str = ""
    tool_result: str = ""
    input_text: str = ""
    output_text: str = ""
    tool_calls: tuple[ToolCallRequest, ...] = ()
    # For an LLM call: the tools the model was offered, where the span says (definitions).
    tools_offered: tuple[ToolSpec, ...] = ()
    # For a hand-off or agent invocation: the agent that receives the work.
    target_agent: str = ""
    finish_reason: str = ""
    input_tokens: int | None = None
    output_tokens: int | None = None
    input_messages: int | None = None
    # For an LLM call: its input messages as sent (bounded: the opening system and user
    # messages and the most recent ones, see `normalize.history`). The run windows read from
    # them what is new since the conversation's previous call, then let them go.
    input_history: tuple[InputMessage, ...] = ()
    # mast.* policy and outcome attributes found on the span, by attribute name.
    run_attributes: dict[str, Any] = field(default_factory=dict)
    # For a tool call known only from the model's request: the run ended before anything showed
    # its result (instrumentation without tool spans sends a result only in the next model
    # call's input). Whether it succeeded is unknown.
    result_unknown: bool = False

    @property
    def is_root(self) -> bool:
        return not self.parent_span_id

    @property
    def duration_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)

    @property
    def failed(self) -> bool:
        return self.status is _ERROR


@dataclass(slots=True, eq=False, init=False)
class StepRef:
    """What a detector remembers of a step after the window has let it go: where the step is
    (span, times) and who ran which tool, the fields a finding and its cost need, without the
    step's texts. Names are interned: a run repeats the same few agents, models and tools.
    Made from the step (`StepRef(step)`); compared by identity, as the step it stands for."""

    span_id: str
    kind: StepKind
    start_ns: int
    end_ns: int
    service: str
    agent: str
    model: str
    tool_name: str

    def __init__(self, step: Step) -> None:
        self.span_id = step.span_id
        self.kind = step.kind
        self.start_ns = step.start_ns
        self.end_ns = step.end_ns
        self.service = sys.intern(step.service)
        self.agent = sys.intern(step.agent)
        self.model = sys.intern(step.model)
        self.tool_name = sys.intern(step.tool_name)


@dataclass(slots=True)
class Cost:
    """What a failing stretch spent, where the spans tell it."""

    seconds: float = 0.0
    llm_calls: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(slots=True)
class Finding:
    """A failure mode seen in a run: what, where, why, at what cost."""

    trace_id: str
    span_id: str
    mode: str
    detector: str
    detector_version: str
    rule: str
    confidence: float
    message: str
    evidence_span_ids: tuple[str, ...]
    evidence: dict[str, Any]
    time_ns: int
    cost: Cost = field(default_factory=Cost)
    service: str = ""
    agent: str = ""
    model: str = ""

    @property
    def finding_id(self) -> str:
        """Stable across re-analysis of the same run, so storing a finding twice is detectable."""
        from mast_otel.processors.ids import stable_hex

        return stable_hex(self.trace_id, self.span_id, self.mode, self.rule, length=32)


@dataclass(slots=True, frozen=True)
class OutcomeUpdate:
    """An outcome that arrived after its run closed (evaluators usually finish later)."""

    trace_id: str
    outcome: str  # "success", "failure" or "" (unchanged)
    score: float | None


@dataclass(slots=True)
class RunSignature:
    """One closed run: its failure vector over the fourteen modes and what it was."""

    trace_id: str
    service: str
    agent: str
    model: str
    start_ns: int
    end_ns: int
    close_reason: str
    steps: int
    llm_calls: int
    tool_calls: int
    errors: int
    input_tokens: int
    output_tokens: int
    mode_counts: dict[str, int]
    outcome: str = ""
    score: float | None = None
    conversation_id: str = ""
    # Attribution (processors/trail.py), for a failed run or one with findings: the decisive
    # step's span and position among the run's steps (-1: none), the responsible agent, and
    # the chain that led there (JSON: the finding, then the steps it traces back to).
    decisive_span_id: str = ""
    decisive_step: int = -1
    responsible_agent: str = ""
    attribution_chain: str = ""

    @property
    def modes(self) -> list[str]:
        return sorted(m for m, n in self.mode_counts.items() if n > 0)
