"""FM-3.2 No or incomplete verification: the agent changed the system and never looked.

Rule `unverified_change`: a successful mutating call (kubectl apply/patch/scale/rollout
restart, helm upgrade, ... as configured in `classification`) is not followed, before the run
ends, by a successful read-only call on the same resource: one whose arguments name a resource
the change named (a deployment, pod, service, namespace), or, when the read names nothing, a
tool whose name says it checks the system (alerts, health, status: `check_tool_pattern`).

Decided when the run closes, at the span of the unchecked change; at most
`max_findings_per_run` findings per run. The study's remedy: externalize verification, so that
tool evidence (a cleared alert, the changed state) is required before the agent may declare
success.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from processors.classify import ActionKind
from processors.detectors.base import Detector, short
from processors.detectors.config import MissingVerificationConfig
from processors.model import Finding, Step, StepKind
from processors.window import DetectorRun, Run


@dataclass(slots=True)
class _Change:
    step: Step
    targets: frozenset[str]
    verified_by: Step | None = None
    followed_by: list[Step] = field(default_factory=list)


class MissingVerification(Detector):
    mode = "FM-3.2"
    name = "missing_verification"
    version = "1.0"
    config: MissingVerificationConfig

    def open(self, run: Run) -> DetectorRun:
        return _MissingVerificationRun(self)


class _MissingVerificationRun(DetectorRun):
    def __init__(self, detector: MissingVerification) -> None:
        self.detector = detector
        self.config = detector.config
        self.check_tool = re.compile(self.config.check_tool_pattern, re.IGNORECASE)
        self.unverified: list[_Change] = []
        self.dropped = 0

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        if step.kind is not StepKind.TOOL or not step.tool_name or step.failed:
            return ()
        action = self.detector.classifier.classify(step.tool_name, step.tool_arguments)
        if action.kind is ActionKind.MUTATING:
            self.unverified.append(_Change(step, action.targets))
            if len(self.unverified) > self.config.max_tracked_mutations:
                self.unverified.pop(0)
                self.dropped += 1
        elif action.kind is ActionKind.READ and self.unverified:
            generic = not action.targets and bool(self.check_tool.search(step.tool_name))
            still = []
            for change in self.unverified:
                if generic or not change.targets or change.targets & action.targets:
                    change.verified_by = step
                else:
                    change.followed_by.append(step)
                    still.append(change)
            self.unverified = still
        return ()

    def on_close(self, run: Run) -> Iterable[Finding]:
        findings = []
        for change in self.unverified[-self.config.max_findings_per_run :]:
            step = change.step
            reads = change.followed_by[-5:]
            what = ", ".join(sorted(change.targets)) or "the system"
            findings.append(
                self.detector.finding(
                    at=step,
                    rule="unverified_change",
                    confidence=0.85 if not reads else 0.75,
                    message=(
                        f"{step.tool_name} changed {what} and the run ended without checking "
                        f"the result"
                    ),
                    evidence=[step, *reads],
                    values={
                        "tool": step.tool_name,
                        "arguments": short(step.tool_arguments),
                        "targets": sorted(change.targets),
                        "reads_after_on_other_resources": [s.tool_name for s in reads],
                        "run_closed_by": run.closed_by,
                    },
                    run=run,
                )
            )
        return findings
