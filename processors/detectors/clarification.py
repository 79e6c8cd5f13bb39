"""FM-2.2 Fail to ask for clarification: the agent acts on a guess instead of asking.

Rules:
- `ambiguous_then_mutate`: a tool result left the target unclear (several candidates, not
  found, "which one": `signals.ambiguous_pattern`) and the agent's next move on the system is
  a mutating call, with no clarifying step in between (a user/human step, or a model turn that
  asks a question instead of calling a tool);
- `unnamed_target`: a mutating call on a resource that nothing the agent was given names: not
  the task, not a user message, not any earlier tool result (`check_unnamed_targets`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from processors import conventions
from processors.classify import ActionKind
from processors.detectors.base import Detector, DetectorFactory, short
from processors.detectors.signals import words
from processors.model import Finding, Step, StepKind
from processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_MUTATING = ActionKind.MUTATING
_AGENT = StepKind.AGENT
_HANDOFF = StepKind.HANDOFF
_HUMAN = StepKind.HUMAN
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL

# Words remembered per run from inputs and results (a bound on memory, not on correctness:
# past it, unnamed-target findings stop).
_MAX_WORDS = 50_000
_MAX_FINDINGS = 5


@dataclass
class ClarificationConfig:
    """FM-2.2 fail to ask for clarification: a change right after an ambiguous result, or on a
    target no input named."""

    # Run this detector.
    enabled: bool = True
    # Also report changes to a resource no input named (task, user, tool results).
    check_unnamed_targets: bool = True

    def validate(self) -> None:
        """Every value of this section is valid."""


class Clarification(Detector):
    mode = "FM-2.2"
    name = "clarification"
    version = "1.0"
    config: ClarificationConfig

    def open(self, run: Run) -> DetectorRun:
        return _ClarificationRun(self)


class _ClarificationRun(DetectorRun):
    __slots__ = (
        "config",
        "detector",
        "known",
        "last_learnt",
        "reported",
        "task_seen",
        "told",
        "unclear",
    )
    kinds = frozenset(
        {StepKind.HUMAN, StepKind.LLM, StepKind.AGENT, StepKind.HANDOFF, StepKind.TOOL}
    )

    def __init__(self, detector: Clarification) -> None:
        self.detector = detector
        self.config = detector.config
        self.unclear: Step | None = None
        self.known: set[str] = set()
        self.task_seen = False
        self.told = False  # has the agent been given any task text to judge targets by?
        self.reported = 0
        # Every model call of a run usually carries the same prompt: learnt once is enough.
        self.last_learnt = ""

    def _learn(self, text: str) -> None:
        if text == self.last_learnt:
            return
        self.last_learnt = text
        if len(self.known) < _MAX_WORDS:
            self.known |= words(text)

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        if not self.task_seen:
            task = run.attributes.get(conventions.TASK_DESCRIPTION)
            if isinstance(task, str):
                self._learn(task)
                self.task_seen = self.told = True
        if step.kind is _HUMAN:
            self.unclear = None
            self._learn(step.input_text)
            self.told = self.told or bool(step.input_text)
            return ()
        if step.kind in (_LLM, _AGENT, _HANDOFF):
            # What the agent is told (prompts, hand-offs) names things; its own output does not.
            self._learn(step.input_text)
            self.told = self.told or bool(step.input_text)
            if (
                step.kind is _LLM
                and not step.tool_calls
                and step.output_text.rstrip().endswith("?")
            ):
                self.unclear = None
            return ()
        if step.kind is not _TOOL or not step.tool_name:
            return ()
        action = self.detector.classifier.classify(step.tool_name, step.tool_arguments)
        findings: list[Finding] = []
        if action.kind is _MUTATING and not step.failed:
            if self.unclear is not None:
                findings.append(self._ambiguous(step, self.unclear, run))
                self.unclear = None
            elif (
                self.config.check_unnamed_targets
                and self.told
                and action.targets
                and len(self.known) < _MAX_WORDS
            ):
                unnamed = sorted(t for t in action.targets if t not in self.known)
                if unnamed and len(unnamed) == len(action.targets):
                    findings.append(self._unnamed(step, unnamed, run))
        elif action.kind is not _MUTATING:
            result = step.tool_result or step.error
            if self.detector.signals.ambiguous.found(result):
                self.unclear = step
            elif not step.failed:
                self._learn(result)
        findings = findings[: max(0, _MAX_FINDINGS - self.reported)]
        self.reported += len(findings)
        return findings

    def _ambiguous(self, step: Step, unclear: Step, run: Run) -> Finding:
        return self.detector.finding(
            at=step,
            rule="ambiguous_then_mutate",
            confidence=0.8,
            message=(
                f"{step.tool_name} changed the system right after {unclear.tool_name} left the "
                f"target unclear, without asking"
            ),
            evidence=[unclear, step],
            values={
                "unclear_result": short(unclear.tool_result or unclear.error),
                "action": short(step.tool_arguments),
            },
            run=run,
        )

    def _unnamed(self, step: Step, unnamed: list[str], run: Run) -> Finding:
        return self.detector.finding(
            at=step,
            rule="unnamed_target",
            confidence=0.6,
            message=(
                f"{step.tool_name} changed {', '.join(unnamed)}, which neither the task nor any "
                f"input or result named"
            ),
            evidence=[step],
            values={"targets": unnamed, "action": short(step.tool_arguments)},
            run=run,
        )


FACTORY = DetectorFactory(
    type="clarification", mode="FM-2.2", config=ClarificationConfig, create=Clarification
)
