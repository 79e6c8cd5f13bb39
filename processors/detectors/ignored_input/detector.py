"""FM-2.5's detector: each run's state gives every step to `instruction_reissued`
(instruction_reissued.py), and hand-offs and tool calls to the hand-off rules
(assignments.py), which judge the last assignments again when the run closes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory
from mast_otel.processors.detectors.ignored_input.assignments import Assignments
from mast_otel.processors.detectors.ignored_input.config import IgnoredInputConfig
from mast_otel.processors.detectors.ignored_input.context import IgnoredInputContext
from mast_otel.processors.detectors.ignored_input.instruction_reissued import (
    ReissuedInstructions,
)
from mast_otel.processors.model import Finding, Step, StepKind
from mast_otel.processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_LLM = StepKind.LLM


class IgnoredInput(Detector):
    mode = "FM-2.5"
    name = "ignored_input"
    version = "1.0"
    config: IgnoredInputConfig

    def __init__(self, config: Any, context: DetectorContext) -> None:
        super().__init__(config, context)
        self.context = IgnoredInputContext(self.config, self.classifier, self.report)

    def open(self, run: Run) -> DetectorRun:
        return _IgnoredInputRun(self.context)


class _IgnoredInputRun(DetectorRun):
    __slots__ = ("assignments", "reissued")
    kinds = frozenset({StepKind.HANDOFF, StepKind.TOOL, StepKind.LLM})

    def __init__(self, context: IgnoredInputContext) -> None:
        self.assignments = Assignments(context)
        self.reissued = ReissuedInstructions(context)

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        reissued = self.reissued.step(step, run)
        if step.kind is _LLM:
            return () if reissued is None else [reissued]
        findings = self.assignments.step(step, run)
        return findings if reissued is None else [reissued, *findings]

    def on_close(self, run: Run) -> Iterable[Finding]:
        return self.assignments.close(run)


FACTORY = DetectorFactory(
    type="ignored_input", mode="FM-2.5", config=IgnoredInputConfig, create=IgnoredInput
)
