"""FM-1.3's detector and its per-run state: the context its rules read, built once, and each
tool call handed to the rules in the order their findings are made (a streak of the same
call, a retry loop, a cycle), the agent's turns to the repeated-request rule, which decides at
the run's end."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory
from mast_otel.processors.detectors.step_repetition.config import StepRepetitionConfig
from mast_otel.processors.detectors.step_repetition.context import (
    StepRepetitionContext,
    step_repetition_context,
)
from mast_otel.processors.detectors.step_repetition.cycle import Cycle
from mast_otel.processors.detectors.step_repetition.near_duplicate_retry import (
    NearDuplicateRetry,
)
from mast_otel.processors.detectors.step_repetition.repeated_request import RepeatedRequest
from mast_otel.processors.detectors.step_repetition.same_call import SameCall
from mast_otel.processors.model import Finding, Step, StepKind
from mast_otel.processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_MUTATING = ActionKind.MUTATING
_TOOL = StepKind.TOOL
_LLM = StepKind.LLM
_HUMAN = StepKind.HUMAN


class StepRepetition(Detector):
    mode = "FM-1.3"
    name = "step_repetition"
    version = "1.0"
    config: StepRepetitionConfig

    def __init__(self, config: Any, context: DetectorContext) -> None:
        super().__init__(config, context)
        self.context = step_repetition_context(self.config, context, self.report)

    def open(self, run: Run) -> DetectorRun:
        return StepRepetitionRun(self.context)


class StepRepetitionRun(DetectorRun):
    """One run's state: the tool calls counted, and each rule's own state."""

    __slots__ = ("classifier", "cycle", "near_duplicate", "requests", "same_call", "tool_index")
    kinds = frozenset({StepKind.TOOL, StepKind.LLM, StepKind.HUMAN})

    def __init__(self, context: StepRepetitionContext) -> None:
        self.classifier = context.classifier
        self.tool_index = 0
        self.same_call = SameCall(context)
        self.near_duplicate = NearDuplicateRetry(context)
        self.cycle = Cycle(context)
        self.requests = RepeatedRequest(context)

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        if step.kind is _LLM:
            self.requests.agent_turn(step, run)
            return ()
        if step.kind is _HUMAN:
            self.same_call.user_turn()
            return ()
        if step.kind is not _TOOL or not step.tool_name:
            return ()
        self.requests.tool_called()
        classifier = self.classifier
        self.tool_index += 1
        index = self.tool_index
        key = classifier.canonical_call(step.tool_name, step.tool_arguments)
        result = classifier.result_fingerprint(step.tool_result)
        if step.failed:
            result = f"error:{classifier.result_fingerprint(step.error)}|{result}"
        mutating = classifier.classify(step.tool_name, step.tool_arguments).kind is _MUTATING
        findings: list[Finding] = []
        ref = run.ref(step)
        fresh, found = self.same_call.call(step, ref, key, result, mutating, index, run)
        if found is not None:
            findings.append(found)
        if step.failed and fresh:
            found = self.near_duplicate.failed(step, ref, index, run)
            if found is not None:
                findings.append(found)
        found = self.cycle.call(step, (key, result), ref, run)
        if found is not None:
            findings.append(found)
        return findings

    def on_close(self, run: Run) -> Iterable[Finding]:
        return self.requests.close(run)


FACTORY = DetectorFactory(
    type="step_repetition", mode="FM-1.3", config=StepRepetitionConfig, create=StepRepetition
)
