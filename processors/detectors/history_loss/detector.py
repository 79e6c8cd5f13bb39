"""FM-1.4's detector: each run's state holds the two rules' own, counts the summarizing steps
for `context_shrink` and gives it the model calls, and gives `reacquire` the tool calls."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory
from mast_otel.processors.detectors.history_loss.config import HistoryLossConfig
from mast_otel.processors.detectors.history_loss.context import HistoryLossContext, build_context
from mast_otel.processors.detectors.history_loss.context_shrink import ContextShrink
from mast_otel.processors.detectors.history_loss.reacquire import Reacquire
from mast_otel.processors.model import Finding, Step, StepKind
from mast_otel.processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL


class HistoryLoss(Detector):
    mode = "FM-1.4"
    name = "history_loss"
    version = "1.1"
    config: HistoryLossConfig

    def __init__(self, config: Any, context: DetectorContext) -> None:
        super().__init__(config, context)
        self.context = build_context(self.config, context, self.report)

    def open(self, run: Run) -> DetectorRun:
        return _HistoryLossRun(self.context)


class _HistoryLossRun(DetectorRun):
    __slots__ = ("reacquire", "shrink")
    kinds = frozenset({StepKind.LLM, StepKind.TOOL, StepKind.AGENT, StepKind.OTHER})

    def __init__(self, context: HistoryLossContext) -> None:
        self.shrink = ContextShrink(context)
        self.reacquire = Reacquire(context)

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        self.shrink.count_summary(step)
        if step.kind is _LLM:
            return self.shrink.model_call(step, run)
        if step.kind is _TOOL and step.tool_name:
            return self.reacquire.tool_call(step, run)
        return ()


FACTORY = DetectorFactory(
    type="history_loss", mode="FM-1.4", config=HistoryLossConfig, create=HistoryLoss
)
