"""FM-2.2's detector and its per-run state: the context its rules read, built once, and each
step handed to the rules that read it. A user's turn and the agent's words feed what each rule
knows was said; a change goes to the first of `ambiguous_then_mutate`, `unasked_choice` and
`unnamed_target` that applies, then to `unmentioned_count` when none reported it; a read's
result feeds what was offered and named."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mast_otel.processors import conventions
from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory
from mast_otel.processors.detectors.clarification.ambiguous_then_mutate import (
    AmbiguousThenMutate,
)
from mast_otel.processors.detectors.clarification.config import ClarificationConfig
from mast_otel.processors.detectors.clarification.context import (
    MAX_FINDINGS,
    ClarificationContext,
    clarification_context,
)
from mast_otel.processors.detectors.clarification.unasked_choice import UnaskedChoice
from mast_otel.processors.detectors.clarification.unmentioned_count import UnmentionedCount
from mast_otel.processors.detectors.clarification.unnamed_target import UnnamedTarget
from mast_otel.processors.model import Finding, Step, StepKind
from mast_otel.processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_MUTATING = ActionKind.MUTATING
_AGENT = StepKind.AGENT
_HANDOFF = StepKind.HANDOFF
_HUMAN = StepKind.HUMAN
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL


class Clarification(Detector):
    mode = "FM-2.2"
    name = "clarification"
    version = "1.0"
    config: ClarificationConfig

    def __init__(self, config: Any, context: DetectorContext) -> None:
        super().__init__(config, context)
        self.context = clarification_context(self.config, context, self.report)

    def open(self, run: Run) -> DetectorRun:
        return ClarificationRun(self.context)


class ClarificationRun(DetectorRun):
    """One run's state: whether the agent has been given any task text to judge by, the
    findings made, and each rule's own state."""

    __slots__ = (
        "ambiguous",
        "choices",
        "classifier",
        "counts",
        "reported",
        "task_seen",
        "told",
        "unnamed",
    )
    kinds = frozenset({_HUMAN, _LLM, _AGENT, _HANDOFF, _TOOL})

    def __init__(self, context: ClarificationContext) -> None:
        self.classifier = context.classifier
        self.task_seen = False
        self.told = False  # has the agent been given any task text to judge targets by?
        self.reported = 0
        self.ambiguous = AmbiguousThenMutate(context)
        self.unnamed = UnnamedTarget(context)
        self.choices = UnaskedChoice(context)
        self.counts = UnmentionedCount(context)

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        if not self.task_seen:
            task = run.attributes.get(conventions.TASK_DESCRIPTION)
            if isinstance(task, str):
                self.unnamed.learn(task)
                self.choices.say(task)
                self.task_seen = self.told = True
        kind = step.kind
        if kind is _HUMAN:
            self.ambiguous.clarified()
            self.unnamed.learn(step.input_text)
            text = step.input_text or step.output_text
            self.choices.user_turn(text)
            self.counts.user_turn(text)
            self.told = self.told or bool(step.input_text)
            return ()
        if kind in (_LLM, _AGENT, _HANDOFF):
            # What the agent is told (prompts, hand-offs) names things; its own output does not.
            self.unnamed.learn(step.input_text)
            if kind is _LLM:
                self.choices.model_call(step)
                self.counts.agent_said(step.output_text)
            self.told = self.told or bool(step.input_text)
            if kind is _LLM and not step.tool_calls and step.output_text.rstrip().endswith("?"):
                self.ambiguous.clarified()
            return ()
        if kind is not _TOOL or not step.tool_name:
            return ()
        action = self.classifier.classify(step.tool_name, step.tool_arguments)
        mutating = action.kind is _MUTATING
        findings: list[Finding] = []
        if mutating and not step.failed:
            found = self.ambiguous.change(step, run)
            if found is None and self.told:
                choice = self.choices.unasked(step, run)
                if choice is not None:
                    found = self.choices.report_or_hold(step, choice, run)
                else:
                    found = self.unnamed.change(step, action.targets, run)
            if found is not None:
                findings.append(found)
            self.choices.changed(step.tool_result)
        # A count is assumed when the call is made, whatever the tool answers: a change refused
        # for another reason (a payment that does not add up) still carried the guess.
        if mutating and not findings:
            counted = self.counts.change(step, run)
            if counted is not None:
                findings.append(counted)
        elif not mutating:
            result = step.tool_result or step.error
            if not self.ambiguous.read(step, result) and not step.failed:
                self.unnamed.learn(result)
                self.choices.read(result)
        findings = findings[: max(0, MAX_FINDINGS - self.reported)]
        self.reported += len(findings)
        return findings

    def on_close(self, run: Run) -> Iterable[Finding]:
        findings = self.choices.close(run)
        findings = findings[: max(0, MAX_FINDINGS - self.reported)]
        self.reported += len(findings)
        return findings


FACTORY = DetectorFactory(
    type="clarification", mode="FM-2.2", config=ClarificationConfig, create=Clarification
)
