"""FM-2.5 Ignored other agent's input: the receiving agent does not act on what it was told.

Rules, around each hand-off:
- `instruction_ignored`: the hand-off message names resources to act on, and the receiver,
  having made at least `min_receiver_calls` tool calls, never touched any of them (checked when
  the receiver hands off again or the run closes);
- `repeated_failed_action`: the hand-off message says something failed, and the receiver
  makes the very call the sender saw fail;
- `instruction_reissued` (ignored_input_reissued.py): in a team's run, an agent gives the same
  instruction `reissued_instruction_count` times while no teammate makes a tool call.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from mast_otel.processors.detectors.base import Detector, DetectorFactory, short
from mast_otel.processors.detectors.ignored_input_reissued import ReissuedInstructions
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_HANDOFF = StepKind.HANDOFF
_TOOL = StepKind.TOOL
_LLM = StepKind.LLM

_FAILURE_WORDS = ("fail", "error", "did not work", "didn't work", "denied", "forbidden")
# The receiver's first calls a finding cites; later ones are only counted.
_CITED_CALLS = 10


@dataclass(slots=True)
class _Assignment:
    handoff: Step
    targets: frozenset[str]
    failed_calls: set[str]
    calls: list[StepRef] = field(default_factory=list)
    call_count: int = 0
    touched: bool = False


@dataclass
class IgnoredInputConfig:
    """FM-2.5 ignored other agent's input: the receiver never acts on what the hand-off told it."""

    # Run this detector.
    enabled: bool = True
    # The receiver must have made at least this many tool calls for "never acted on it".
    min_receiver_calls: int = 2
    # In a team's run: the times one agent gives the same instruction, with no teammate making
    # a tool call in between, that show it was ignored (0 turns the rule off).
    reissued_instruction_count: int = 3

    def validate(self) -> None:
        """Every value of this section is valid."""


class IgnoredInput(Detector):
    mode = "FM-2.5"
    name = "ignored_input"
    version = "1.0"
    config: IgnoredInputConfig

    def open(self, run: Run) -> DetectorRun:
        return _IgnoredInputRun(self)


class _IgnoredInputRun(DetectorRun):
    __slots__ = ("assignments", "config", "detector", "failed_by_agent", "reissued", "reported")
    kinds = frozenset({StepKind.HANDOFF, StepKind.TOOL, StepKind.LLM})

    def __init__(self, detector: IgnoredInput) -> None:
        self.detector = detector
        self.config = detector.config
        self.failed_by_agent: dict[str, set[str]] = {}
        self.assignments: dict[str, _Assignment] = {}  # receiver → what it was handed
        self.reported: set[str] = set()
        self.reissued = ReissuedInstructions(self.config.reissued_instruction_count)

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        classifier = self.detector.classifier
        findings: list[Finding] = []
        found = self.reissued.step(step, run)
        if found is not None:
            others = ", ".join(found.answered_by) or "no teammate"
            findings.append(
                self.detector.finding(
                    at=found.given[-1],
                    rule="instruction_reissued",
                    confidence=0.7,
                    message=(
                        f"{found.agent} gave the same instruction {len(found.given)} times "
                        f"({found.text!r}); {others} answered without a single tool call"
                    ),
                    evidence=found.given,
                    values={
                        "sender": found.agent,
                        "receivers": found.answered_by,
                        "instruction": found.text,
                        "times": len(found.given),
                    },
                    run=run,
                )
            )
        if step.kind is _LLM:
            return findings
        if step.kind is _HANDOFF and step.target_agent:
            previous = self.assignments.pop(step.agent, None)
            if previous is not None:
                findings.extend(self._judge(previous, run))
            message = step.input_text
            says_failed = any(w in message.lower() for w in _FAILURE_WORDS)
            self.assignments[step.target_agent] = _Assignment(
                handoff=step,
                targets=classifier.classify("", message).targets,
                failed_calls=set(self.failed_by_agent.get(step.agent, ()))
                if says_failed
                else set(),
            )
            return findings
        if step.kind is not _TOOL or not step.tool_name:
            return findings
        key = classifier.canonical_call(step.tool_name, step.tool_arguments)
        if step.failed:
            self.failed_by_agent.setdefault(step.agent, set()).add(key)
        assignment = self.assignments.get(step.agent)
        if assignment is None:
            return findings
        assignment.call_count += 1
        if len(assignment.calls) < _CITED_CALLS:
            assignment.calls.append(run.ref(step))
        targets = classifier.classify(step.tool_name, step.tool_arguments).targets
        if targets & assignment.targets:
            assignment.touched = True
        if key in assignment.failed_calls and f"repeat:{key}" not in self.reported:
            self.reported.add(f"repeat:{key}")
            findings.append(
                self.detector.finding(
                    at=step,
                    rule="repeated_failed_action",
                    confidence=0.8,
                    message=(
                        f"{step.agent} repeated {step.tool_name}, which "
                        f"{assignment.handoff.agent} said had failed"
                    ),
                    evidence=[assignment.handoff, step],
                    values={
                        "sender": assignment.handoff.agent,
                        "receiver": step.agent,
                        "call": short(step.tool_arguments),
                        "handoff_message": short(assignment.handoff.input_text),
                    },
                    run=run,
                )
            )
        return findings

    def on_close(self, run: Run) -> Iterable[Finding]:
        findings: list[Finding] = []
        for assignment in self.assignments.values():
            findings.extend(self._judge(assignment, run))
        return findings

    def _judge(self, assignment: _Assignment, run: Run) -> list[Finding]:
        handoff = assignment.handoff
        if (
            not assignment.targets
            or assignment.touched
            or assignment.call_count < self.config.min_receiver_calls
            or handoff.span_id in self.reported
        ):
            return []
        self.reported.add(handoff.span_id)
        return [
            self.detector.finding(
                at=handoff,
                rule="instruction_ignored",
                confidence=0.7,
                message=(
                    f"{handoff.target_agent} never acted on "
                    f"{', '.join(sorted(assignment.targets))}, which {handoff.agent} handed it"
                ),
                evidence=[handoff, *assignment.calls[:5]],
                values={
                    "sender": handoff.agent,
                    "receiver": handoff.target_agent,
                    "named_targets": sorted(assignment.targets),
                    "receiver_calls": [s.tool_name for s in assignment.calls[:10]],
                    "handoff_message": short(handoff.input_text),
                },
                run=run,
            )
        ]


FACTORY = DetectorFactory(
    type="ignored_input", mode="FM-2.5", config=IgnoredInputConfig, create=IgnoredInput
)
