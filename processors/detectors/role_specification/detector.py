"""FM-1.2's detector: each run's state hands the role attributes of its steps to the rules
(roles.py), checks each tool call as it comes, and keeps the calls the check at close could
still report (policy.KeptCalls) to check them again against every role seen by then."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory
from mast_otel.processors.detectors.policy import KeptCalls
from mast_otel.processors.detectors.role_specification.config import RoleSpecificationConfig
from mast_otel.processors.detectors.role_specification.context import (
    RoleSpecificationContext,
    build_context,
)
from mast_otel.processors.detectors.role_specification.roles import Roles
from mast_otel.processors.model import Finding, Step, StepKind
from mast_otel.processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_MUTATING = ActionKind.MUTATING
_TOOL = StepKind.TOOL


class RoleSpecification(Detector):
    mode = "FM-1.2"
    name = "role_specification"
    version = "1.0"
    config: RoleSpecificationConfig

    def __init__(self, config: Any, context: DetectorContext) -> None:
        super().__init__(config, context)
        self.context = build_context(self.config, context, self.report)

    def open(self, run: Run) -> DetectorRun:
        return _RoleRun(self.context)


class _RoleRun(DetectorRun):
    __slots__ = ("classifier", "kept", "roles")

    def __init__(self, context: RoleSpecificationContext) -> None:
        self.classifier = context.classifier
        self.roles = Roles(context)
        # The calls kept for the check at close: those of each (agent, tool) and the changes
        # of each agent it can still report.
        self.kept = KeptCalls(
            context.config.max_findings_per_run,
            self.roles.reported,
            "tool_outside_role",
            "read_only_role_mutates",
        )

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        if step.agent and step.run_attributes:
            self.roles.learn(step)
        if step.kind is not _TOOL or not step.tool_name or not step.agent:
            return ()
        mutating = self.classifier.classify(step.tool_name, step.tool_arguments).kind is _MUTATING
        findings = self.roles.check(step, mutating, step.tool_arguments, run)
        self.kept.keep(step, mutating, run, (step.agent, step.tool_name), step.agent)
        return findings

    def on_close(self, run: Run) -> Iterable[Finding]:
        findings: list[Finding] = []
        for call in self.kept.calls:
            findings.extend(self.roles.check(call.ref, call.mutating, call.arguments, run))
        return findings


FACTORY = DetectorFactory(
    type="role_specification",
    mode="FM-1.2",
    config=RoleSpecificationConfig,
    create=RoleSpecification,
)
