"""FM-3.3 Incorrect verification: the agent checked, and the check does not support its claim.

Decided when the run closes, only for runs whose final answer declares success:
- `claimed_despite_unhealthy`: the last check of the changed resource (or, with no change,
  the run's last read) shows it unhealthy (errors, crash loops, an alert still firing);
- `checked_too_early`: that unhealthy check came sooner than `min_settle_seconds` after the
  change, before the change could take effect, and nothing checked again;
- `wrong_target`: after the change the run only read other resources (another namespace,
  another deployment) than the one it changed.
One finding per run, at the check (or the change, for a wrong target).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from processors.detectors.base import Detector, DetectorContext, DetectorFactory, short
from processors.detectors.missing_verification import (
    CHANGE_LEDGERS,
    DEFAULT_CHECK_TOOL_PATTERN,
    MissingVerification,
)
from processors.detectors.signals import Health
from processors.detectors.verification import ChangeLedger
from processors.model import Finding, Step, StepKind, StepRef
from processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_UNHEALTHY = Health.UNHEALTHY

# The same notion of a system-wide check as FM-3.2's default.
_CHECK_TOOL = re.compile(DEFAULT_CHECK_TOOL_PATTERN, re.IGNORECASE)
_MAX_CHANGES = 256


@dataclass
class IncorrectVerificationConfig:
    """FM-3.3 incorrect verification: success declared while the last check shows trouble, or a
    check made too early."""

    # Run this detector.
    enabled: bool = True
    # A check sooner than this after the change may not see its effect yet.
    min_settle_seconds: float = 5.0

    def validate(self) -> None:
        """Every value of this section is valid."""


class IncorrectVerification(Detector):
    mode = "FM-3.3"
    name = "incorrect_verification"
    version = "1.0"
    config: IncorrectVerificationConfig

    def __init__(self, config: Any, context: DetectorContext) -> None:
        super().__init__(config, context)
        # FM-3.2's detector, when its ledgers are the same as this one's would be: each run's
        # ledger is then followed once, for both.
        self.ledger_source: MissingVerification | None = None
        # FM-3.2 is created first (the factories' order) and offers its ledgers when enabled.
        source = context.find(CHANGE_LEDGERS, MissingVerification)
        if source is not None:
            self.share_ledger_of(source)

    def share_ledger_of(self, source: MissingVerification) -> bool:
        """Read `source`'s ledger of each run if it follows calls exactly as this detector's
        would (same check-tool pattern and bound). Returns whether it does."""
        if not source.ledger_matches(_CHECK_TOOL, _MAX_CHANGES):
            return False
        source.share_ledger()
        self.ledger_source = source
        return True

    def open(self, run: Run) -> DetectorRun:
        if self.ledger_source is not None:
            ledger = self.ledger_source.take_ledger(run)
            if ledger is not None:
                return _SharedLedgerRun(self, ledger)
        return _IncorrectVerificationRun(self)


class _IncorrectVerificationRun(DetectorRun):
    __slots__ = ("config", "detector", "ledger")
    kinds = frozenset({StepKind.LLM, StepKind.TOOL})

    def __init__(self, detector: IncorrectVerification, ledger: ChangeLedger | None = None) -> None:
        self.detector = detector
        self.config = detector.config
        self.ledger = (
            ledger
            if ledger is not None
            else ChangeLedger(detector.classifier, detector.signals, _CHECK_TOOL, _MAX_CHANGES)
        )

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        self.ledger.observe(step, run)
        return ()

    def on_close(self, run: Run) -> Iterable[Finding]:
        ledger = self.ledger
        answer = ledger.final_answer
        if answer is None or not ledger.claims_success():
            return ()
        claim = short(answer.output_text)
        if not ledger.changes:
            last = ledger.last_read
            if last is not None and self.detector.signals.health(last.tool_result) is _UNHEALTHY:
                return [self._unhealthy(last, last.tool_result, None, answer, claim, run)]
            return ()
        change = ledger.changes[-1]
        check = change.last_check
        if change.checks and check is not None:
            if self.detector.signals.health(check.result) is not _UNHEALTHY:
                return ()
            return [self._unhealthy(check.ref, check.result, change.ref, answer, claim, run)]
        if change.other_reads:
            reads = change.other_reads
            return [
                self.detector.finding(
                    at=change.ref,
                    rule="wrong_target",
                    confidence=0.75,
                    message=(
                        f"the run changed {', '.join(sorted(change.targets))} but checked other "
                        f"resources, then declared success"
                    ),
                    evidence=[change.ref, *(r.ref for r in reads[-5:]), answer],
                    values={
                        "changed": sorted(change.targets),
                        "checked": sorted({t for r in reads for t in r.targets}),
                        "claim": claim,
                    },
                    run=run,
                )
            ]
        return ()

    def _unhealthy(
        self,
        check: Step | StepRef,
        check_result: str,
        change: StepRef | None,
        answer: Step,
        claim: str,
        run: Run,
    ) -> Finding:
        early = (
            change is not None
            and (check.start_ns - change.end_ns) / 1e9 < self.config.min_settle_seconds
        )
        evidence = [s for s in (change, check, answer) if s is not None]
        if early:
            assert change is not None
            delay = (check.start_ns - change.end_ns) / 1e9
            return self.detector.finding(
                at=check,
                rule="checked_too_early",
                confidence=0.75,
                message=(
                    f"{check.tool_name} checked {delay:.1f}s after the change, still saw it "
                    f"unhealthy, and the run declared success"
                ),
                evidence=evidence,
                values={
                    "seconds_after_change": round(delay, 3),
                    "settle_seconds": self.config.min_settle_seconds,
                    "check_result": short(check_result),
                    "claim": claim,
                },
                run=run,
            )
        return self.detector.finding(
            at=check,
            rule="claimed_despite_unhealthy",
            confidence=0.85,
            message=f"the run declared success while {check.tool_name} still showed a problem",
            evidence=evidence,
            values={"check_result": short(check_result), "claim": claim},
            run=run,
        )


class _SharedLedgerRun(_IncorrectVerificationRun):
    """FM-3.3's state when FM-3.2 follows the run's ledger: it reads no step itself."""

    __slots__ = ()
    kinds = frozenset()

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        return ()


FACTORY = DetectorFactory(
    type="incorrect_verification",
    mode="FM-3.3",
    config=IncorrectVerificationConfig,
    create=IncorrectVerification,
)
