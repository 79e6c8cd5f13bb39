"""FM-2.6 reasoning-action mismatch: the detector and its per-run state.

The detector builds its context once (reasoning_context: the config's patterns compiled, the
shared services, its reporter). A run's state opens each rule's own state on that context and
hands every step to the rules in a fixed order, which is the order of their findings. It keeps
what the rules of compare.py read (the last model output with tool calls per agent, the
resources the run has named), and bounds the findings of a run (`max_findings_per_run`) in the
one function every rule words its findings with."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory
from mast_otel.processors.detectors.reasoning_action.amounts import Amounts
from mast_otel.processors.detectors.reasoning_action.calculation import Calculations
from mast_otel.processors.detectors.reasoning_action.claims import Claims
from mast_otel.processors.detectors.reasoning_action.claims_done_then_acts import (
    claims_done_then_acts,
)
from mast_otel.processors.detectors.reasoning_action.compare import announced, compare
from mast_otel.processors.detectors.reasoning_action.config import ReasoningActionConfig
from mast_otel.processors.detectors.reasoning_action.context import (
    ReasoningActionContext,
    reasoning_context,
)
from mast_otel.processors.detectors.reasoning_action.error import ErrorFigures
from mast_otel.processors.detectors.reasoning_action.fields import Fields
from mast_otel.processors.detectors.reasoning_action.groups import Groups
from mast_otel.processors.detectors.reasoning_action.inability import Inabilities
from mast_otel.processors.detectors.reasoning_action.promise import Promises
from mast_otel.processors.detectors.reasoning_action.report import Reports
from mast_otel.processors.detectors.reasoning_action.sign import Refunds
from mast_otel.processors.detectors.reasoning_action.unsupported_observation import (
    Observations,
)
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_MUTATING = ActionKind.MUTATING
_READ = ActionKind.READ
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL
_HUMAN = StepKind.HUMAN

# Resource names remembered per run (a bound on memory).
_MAX_WORDS = 50_000


class ReasoningAction(Detector):
    mode = "FM-2.6"
    name = "reasoning_action"
    version = "1.0"
    config: ReasoningActionConfig

    def __init__(self, config: Any, context: DetectorContext) -> None:
        super().__init__(config, context)
        self.context = reasoning_context(self.config, context, self.report)

    def open(self, run: Run) -> DetectorRun:
        return _ReasoningRun(self.context)


class _ReasoningRun(DetectorRun):
    __slots__ = (
        "amounts",
        "calculations",
        "claims",
        "config",
        "context",
        "errors",
        "fields",
        "findings",
        "groups",
        "inabilities",
        "names",
        "observations",
        "promises",
        "reasoning",
        "refunds",
        "reports",
    )

    def __init__(self, context: ReasoningActionContext) -> None:
        self.context = context
        self.config = context.config
        # The last model output with tool calls, per agent, and the resources the run has
        # named so far.
        self.reasoning: dict[str, Step] = {}
        self.names: set[str] = set()
        self.findings = 0
        self.observations = Observations(context)
        self.amounts = Amounts(context)
        self.claims = Claims(context)
        self.reports = Reports(context)
        self.fields = Fields(context)
        self.promises = Promises(context, self.fields)
        self.groups = Groups(context)
        self.inabilities = Inabilities(context.inability)
        self.refunds = Refunds(context)
        self.calculations = Calculations(context)
        self.errors = ErrorFigures(context)

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        if step.kind is _LLM:
            self.amounts.user(step.input_text)
            self.promises.said(step, run)
            return self._on_model(step, run)
        if step.kind is _TOOL and step.tool_name:
            self.amounts.tool(step, run)
            return self._on_tool(step, run)
        if step.kind is _HUMAN:
            self.promises.said(step, run)
            self.amounts.user(step.input_text or step.output_text)
        return ()

    def on_close(self, run: Run) -> Iterable[Finding]:
        findings = self.amounts.close(run, self._emit)
        findings.extend(announced(run, self.names, self.context.signals, self._emit))
        return findings

    def _on_model(self, step: Step, run: Run) -> list[Finding]:
        findings: list[Finding] = []
        findings.extend(self.reports.model(step, run, self._emit))
        findings.extend(self.refunds.model(step, run, self._emit))
        findings.extend(self.calculations.model(step, run, self._emit))
        findings.extend(self.errors.model(step, run, self._emit))
        findings.extend(self.fields.model(step, run, self._emit))
        findings.extend(self.groups.model(step, run, self._emit))
        self.amounts.model(step, run)
        findings.extend(self.claims.model(step, run, self._emit))
        self.inabilities.model(step, run)
        if step.tool_calls:
            self.reasoning[step.agent] = step
            findings.extend(claims_done_then_acts(step, run, self.context.signals, self._emit))
        else:
            self.reasoning.pop(step.agent, None)
        findings.extend(self.observations.model(step, run, self._emit))
        return findings

    def _on_tool(self, step: Step, run: Run) -> list[Finding]:
        action = self.context.classifier.classify(step.tool_name, step.tool_arguments)
        reasoning = self.reasoning.pop(step.agent, None)
        findings: list[Finding] = []
        if reasoning is not None:
            findings.extend(
                compare(
                    reasoning,
                    step,
                    action.kind,
                    action.targets,
                    self.names,
                    run,
                    self._emit,
                    self.context.change_verbs,
                )
            )
        self.refunds.tool(step, run, self.reports.tool(step, action.kind, run))
        self.groups.tool(step)
        self.calculations.tool(step, run)
        self.errors.tool(step, run)
        acts = action.kind is _MUTATING or action.kind is _READ
        findings.extend(self.inabilities.tool(step, acts, run, self._emit))
        findings.extend(self.promises.acted(step, action.kind is _MUTATING, run, self._emit))
        self.fields.tool(step, action.kind is _MUTATING and not step.failed, run)
        if len(self.names) < _MAX_WORDS:
            self.names |= action.targets
        if action.kind is _MUTATING and not step.failed:
            self.claims.changed(step)
        self.observations.tool(step)
        return findings

    def _emit(
        self,
        at: Step | StepRef,
        rule: str,
        confidence: float,
        message: str,
        evidence: list[Step | StepRef],
        values: dict[str, object],
        run: Run,
    ) -> list[Finding]:
        if self.findings >= self.config.max_findings_per_run:
            return []
        self.findings += 1
        return [
            self.context.report.finding(at, rule, confidence, message, evidence, dict(values), run)
        ]


FACTORY = DetectorFactory(
    type="reasoning_action", mode="FM-2.6", config=ReasoningActionConfig, create=ReasoningAction
)
