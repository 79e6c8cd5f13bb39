"""FM-1.5's detector: each run's state remembers the run's last model, tool or user step and
gives each step to the rules that read it: every step but a user's turn to the limits
(limits.py); model calls to the final answer's rule (calls_after_final_answer.py); tool calls
to that rule, to the healthy check's (calls_after_success.py) and to the ending's (ending.py),
which judges how the run ended when it closes. A user's turn reopens the conversation for the
final answer's rule and the healthy check's."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory
from mast_otel.processors.detectors.termination_awareness.calls_after_final_answer import (
    CallsAfterFinalAnswer,
)
from mast_otel.processors.detectors.termination_awareness.calls_after_success import (
    CallsAfterSuccess,
)
from mast_otel.processors.detectors.termination_awareness.config import (
    TerminationAwarenessConfig,
)
from mast_otel.processors.detectors.termination_awareness.context import (
    TerminationAwarenessContext,
)
from mast_otel.processors.detectors.termination_awareness.ending import Ending
from mast_otel.processors.detectors.termination_awareness.limits import Limits
from mast_otel.processors.model import Finding, Step, StepKind
from mast_otel.processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL
_HUMAN = StepKind.HUMAN


class TerminationAwareness(Detector):
    mode = "FM-1.5"
    name = "termination_awareness"
    version = "1.0"
    config: TerminationAwarenessConfig

    def __init__(self, config: Any, context: DetectorContext) -> None:
        super().__init__(config, context)
        self.context = TerminationAwarenessContext(
            self.config, self.classifier, self.signals, self.report
        )

    def open(self, run: Run) -> DetectorRun:
        return _TerminationRun(self.context)


class _TerminationRun(DetectorRun):
    __slots__ = ("after_final", "after_success", "ending", "last_step", "limits")
    kinds = frozenset({StepKind.LLM, StepKind.TOOL, StepKind.AGENT, StepKind.OTHER, StepKind.HUMAN})

    def __init__(self, context: TerminationAwarenessContext) -> None:
        self.limits = Limits(context)
        self.after_final = CallsAfterFinalAnswer(context)
        self.after_success = CallsAfterSuccess(context)
        self.ending = Ending(context)
        # The last LLM, tool or user step (hand-offs and agents are not answers or calls).
        self.last_step: Step | None = None

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        kind = step.kind
        if kind is _LLM or kind is _TOOL or kind is _HUMAN:
            self.last_step = step
        if kind is _HUMAN:
            # The user answered: the text-only turns before were turns of the conversation,
            # and calls after a healthy check now serve what the user says next.
            if step.input_text.strip():
                self.after_final.user_spoke()
                self.after_success.user_spoke()
            return ()
        findings = self.limits.step(step, run)
        if kind is _LLM:
            self.after_final.model_call(step, run)
            return findings
        if kind is not _TOOL or not step.tool_name:
            return findings
        ref = run.ref(step)
        self.ending.tool_call(step, ref)
        if self.after_final.final_answer:  # no call comes after an answer before there is one
            findings.extend(self.after_final.tool_call(step, ref, run))
        found = self.after_success.tool_call(step, ref, run)
        if found:
            findings.extend(found)
        return findings

    def on_close(self, run: Run) -> Iterable[Finding]:
        return [*self.after_final.close(run), *self.ending.close(run, self.last_step)]


FACTORY = DetectorFactory(
    type="termination_awareness",
    mode="FM-1.5",
    config=TerminationAwarenessConfig,
    create=TerminationAwareness,
)
