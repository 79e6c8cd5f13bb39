"""FM-3.2 No or incomplete verification: the agent changed the system and never looked.

Rule `unverified_change`: a successful mutating call (kubectl apply/patch/scale/rollout
restart, helm upgrade, ... as configured in `classification`) is not followed, before the run
ends, by a successful read-only call on the same resource: one whose arguments name a resource
the change named (a deployment, pod, service, namespace), or, when the read names nothing, a
tool whose name says it checks the system (alerts, health, status: `check_tool_pattern`).
When the run did read other resources after the change and then declared success, the check
looked in the wrong place: that is incorrect verification (FM-3.3), reported there instead.

Decided when the run closes, at the span of the unchecked change; at most
`max_findings_per_run` findings per run. The study's remedy: externalize verification, so that
tool evidence (a cleared alert, the changed state) is required before the agent may declare
success.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from processors.detectors.base import Detector, DetectorContext, DetectorFactory, short
from processors.detectors.verification import ChangeLedger
from processors.model import Finding, Step, StepKind
from processors.run import DetectorRun, Run


@dataclass
class MissingVerificationConfig:
    """FM-3.2 no or incomplete verification: a change never checked before the run ends."""

    # Run this detector.
    enabled: bool = True
    # Read-only calls with no resource named in their arguments still verify a change when
    # their tool's name says it checks the system (alerts, health, status, ...).
    check_tool_pattern: str = r"alert|health|status|verify|check|probe|metric|monitor"
    # Unchecked changes reported per run (the last ones, when a run leaves more unchecked).
    max_findings_per_run: int = 5
    # Mutating calls remembered per run awaiting their check.
    max_tracked_mutations: int = 256

    def validate(self) -> None:
        if self.max_findings_per_run < 1 or self.max_tracked_mutations < 1:
            raise ValueError(
                "detectors.missing_verification.max_findings_per_run and "
                "max_tracked_mutations must be at least 1"
            )
        try:
            re.compile(self.check_tool_pattern)
        except re.error as exc:
            raise ValueError(
                f"detectors.missing_verification.check_tool_pattern: invalid regular "
                f"expression ({exc})"
            ) from exc


# The name under which this detector offers its change ledgers to the detectors created after
# it (FM-3.3 reads them instead of following the same calls again).
CHANGE_LEDGERS = "change_ledgers"


class MissingVerification(Detector):
    mode = "FM-3.2"
    name = "missing_verification"
    version = "1.1"
    config: MissingVerificationConfig

    def __init__(self, config: Any, context: DetectorContext) -> None:
        super().__init__(config, context)
        # Compiled once, not at every run's opening.
        self.check_tool = re.compile(self.config.check_tool_pattern, re.IGNORECASE)
        # Set when FM-3.3 reads the same ledger (`share_ledger`): the run opened last and its
        # ledger, until FM-3.3 opens its state for that run and takes it.
        self.sharing = False
        self._opened: tuple[Run, ChangeLedger] | None = None
        context.offer(CHANGE_LEDGERS, self)

    def open(self, run: Run) -> DetectorRun:
        state = _MissingVerificationRun(self)
        if self.sharing:
            self._opened = (run, state.ledger)
        return state

    def share_ledger(self) -> None:
        """Let another detector read this detector's ledger of each run (`take_ledger`)
        instead of following the same steps into a ledger of its own."""
        self.sharing = True

    def take_ledger(self, run: Run) -> ChangeLedger | None:
        """The ledger of the run opened last, if it is `run` (else None: keep your own)."""
        opened, self._opened = self._opened, None
        if opened is None or opened[0] is not run:
            return None
        return opened[1]

    def ledger_matches(self, check_tool: re.Pattern[str], max_changes: int) -> bool:
        """Whether this detector's ledgers follow calls exactly as one with these settings."""
        return (
            self.check_tool.pattern == check_tool.pattern
            and self.check_tool.flags == check_tool.flags
            and self.config.max_tracked_mutations == max_changes
        )


class _MissingVerificationRun(DetectorRun):
    __slots__ = ("config", "detector", "ledger")
    kinds = frozenset({StepKind.LLM, StepKind.TOOL})

    def __init__(self, detector: MissingVerification) -> None:
        self.detector = detector
        self.config = detector.config
        self.ledger = ChangeLedger(
            detector.classifier,
            detector.signals,
            detector.check_tool,
            self.config.max_tracked_mutations,
        )

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        self.ledger.observe(step, run)
        return ()

    def on_close(self, run: Run) -> Iterable[Finding]:
        claimed = self.ledger.claims_success()
        unchecked = [
            c for c in self.ledger.changes if not c.checks and not (claimed and c.other_reads)
        ]
        findings = []
        for change in unchecked[-self.config.max_findings_per_run :]:
            step = change.ref
            reads = [read.ref for read in change.other_reads[-5:]]
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
                        "arguments": short(change.arguments),
                        "targets": sorted(change.targets),
                        "reads_after_on_other_resources": [s.tool_name for s in reads],
                        "run_closed_by": run.closed_by,
                    },
                    run=run,
                )
            )
        return findings


FACTORY = DetectorFactory(
    type="missing_verification",
    mode="FM-3.2",
    config=MissingVerificationConfig,
    create=MissingVerification,
)
