"""FM-2.4's detector: each run's state gives every step first to `unpriced_consent`
(unpriced_consent.py); hand-offs, tool calls and the model calls of agents that were handed
work then go to the hand-off rules (handoffs.py). An error a sender left out of a hand-off is
reported at the receiver's next model call, unless that call's input shows the failure."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory
from mast_otel.processors.detectors.withholding.config import WithholdingConfig
from mast_otel.processors.detectors.withholding.context import WithholdingContext, build_context
from mast_otel.processors.detectors.withholding.handoffs import Handoffs
from mast_otel.processors.detectors.withholding.unpriced_consent import Consents
from mast_otel.processors.model import Finding, Step, StepKind
from mast_otel.processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_HANDOFF = StepKind.HANDOFF
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL


class Withholding(Detector):
    mode = "FM-2.4"
    name = "withholding"
    version = "1.0"
    config: WithholdingConfig

    def __init__(self, config: Any, context: DetectorContext) -> None:
        super().__init__(config, context)
        self.context = build_context(self.config, context, self.report)

    def open(self, run: Run) -> DetectorRun:
        return _WithholdingRun(self.context)


class _WithholdingRun(DetectorRun):
    __slots__ = ("consents", "handoffs")
    kinds = frozenset({StepKind.HANDOFF, StepKind.TOOL, StepKind.LLM, StepKind.HUMAN})

    def __init__(self, context: WithholdingContext) -> None:
        self.handoffs = Handoffs(context)
        self.consents = Consents(context)

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        if step.kind is _LLM and step.agent in self.handoffs.unseen_errors:
            unseen = self.handoffs.unseen_error(step)
            if unseen is not None:
                return [unseen, *self.on_step(step, run)]
        unpriced = self.consents.step(step, run)
        if unpriced is not None:
            return [unpriced]
        if step.kind is _HANDOFF and step.target_agent:
            return self.handoffs.handoff(step, run)
        if step.kind is _LLM and step.agent in self.handoffs.handed:
            self.handoffs.model_call(step)
        if step.kind is not _TOOL or not step.tool_name:
            return ()
        return self.handoffs.tool_call(step, run)

    def on_close(self, run: Run) -> Iterable[Finding]:
        return self.handoffs.close()


FACTORY = DetectorFactory(
    type="withholding", mode="FM-2.4", config=WithholdingConfig, create=Withholding
)
