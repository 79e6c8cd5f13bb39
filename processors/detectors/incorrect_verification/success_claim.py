"""FM-3.3's rules on the run's final claim of success against its last check.

The run's ledger (verification.py: each change, the reads after it, the final answer) says what
the run checked; these rules are decided when the run closes, only for runs whose final answer
declares success (`Signals.claims_success`). One finding per run, at the check (or the change,
for a wrong target).

`claimed_despite_unhealthy`: the last check of the last change (or, with no change, the run's
last read) shows the resource unhealthy (errors, crash loops, an alert still firing), at least
`min_settle_seconds` after the change.

    Fires: `kubectl set resources deployment/checkout ... -n shop` ("updated"), half a minute
    later `kubectl get pods -n shop` ("checkout-2 0/1 CrashLoopBackOff"), then "The issue is
    resolved."
    Near miss: the same steps ending "The pods still crash; the fix did not work.": no success
    is declared.

`checked_too_early`: that unhealthy check came sooner than `min_settle_seconds` after the
change, before the change could take effect, and nothing checked again.

    Fires: the same change and the same CrashLoopBackOff read a second after it, then "The
    issue is resolved.": the check could not yet see the change's effect.
    Near miss: the read half a minute after the change: the change had time, and the finding is
    `claimed_despite_unhealthy`.

`wrong_target`: after the last change the run only read other resources (another namespace,
another deployment) than the one it changed, and declared success.

    Fires: `restart_deployment {"name": "checkout", "namespace": "shop"}`, then `kubectl_get
    {"name": "payments", "namespace": "billing"}` ("payments-1 1/1 Running"), then "Resolved:
    the service is running again."
    Near miss: the same steps ending "I restarted checkout." (no claim of success): the change
    is unverified, FM-3.2's `unverified_change`.
"""

from __future__ import annotations

from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.incorrect_verification.context import (
    IncorrectVerificationContext,
)
from mast_otel.processors.detectors.signals import Health
from mast_otel.processors.detectors.verification import ChangeLedger
from mast_otel.processors.model import Finding, Step, StepRef
from mast_otel.processors.run import Run

_UNHEALTHY = Health.UNHEALTHY


class SuccessClaim:
    """Per run: the run's ledger, read at close against the final answer's claim."""

    __slots__ = ("context", "ledger")

    def __init__(self, context: IncorrectVerificationContext, ledger: ChangeLedger) -> None:
        self.context = context
        self.ledger = ledger

    def close(self, run: Run) -> list[Finding]:
        ledger = self.ledger
        answer = ledger.final_answer
        if answer is None or not ledger.claims_success():
            return []
        claim = short(answer.output_text)
        signals = self.context.signals
        if not ledger.changes:
            last = ledger.last_read
            if last is not None and signals.health(last.tool_result) is _UNHEALTHY:
                return [self._unhealthy(last, last.tool_result, None, answer, claim, run)]
            return []
        change = ledger.changes[-1]
        check = change.last_check
        if change.checks and check is not None:
            if signals.health(check.result) is not _UNHEALTHY:
                return []
            return [
                self._unhealthy(
                    check.ref, check.result, change.ref, answer, claim, run, change.targets
                )
            ]
        if change.other_reads:
            reads = change.other_reads
            return [
                self.context.report.finding(
                    at=change.ref,
                    rule="wrong_target",
                    confidence=0.75,
                    message=(
                        f"the run changed {', '.join(sorted(change.targets))} but checked only "
                        f"{', '.join(sorted({t for r in reads for t in r.targets})) or 'others'}"
                        f", then declared success"
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
        return []

    def _unhealthy(
        self,
        check: Step | StepRef,
        check_result: str,
        change: StepRef | None,
        answer: Step,
        claim: str,
        run: Run,
        targets: frozenset[str] = frozenset(),
    ) -> Finding:
        # What the check read, named: the changed resource, else the first line it showed.
        what = (
            ", ".join(sorted(targets)) or short(check_result.strip().splitlines()[0], 80)
            if (targets or check_result.strip())
            else ""
        )
        settle = self.context.config.min_settle_seconds
        early = change is not None and (check.start_ns - change.end_ns) / 1e9 < settle
        evidence = [s for s in (change, check, answer) if s is not None]
        report = self.context.report
        if early:
            assert change is not None
            delay = (check.start_ns - change.end_ns) / 1e9
            return report.finding(
                at=check,
                rule="checked_too_early",
                confidence=0.75,
                message=(
                    f"{check.tool_name} checked {what} {delay:.1f}s after the change, still "
                    f"saw it unhealthy, and the run declared success"
                ),
                evidence=evidence,
                values={
                    "seconds_after_change": round(delay, 3),
                    "settle_seconds": settle,
                    "check_result": short(check_result),
                    "claim": claim,
                },
                run=run,
            )
        return report.finding(
            at=check,
            rule="claimed_despite_unhealthy",
            confidence=0.85,
            message=(
                f"the run declared success while {check.tool_name} still showed a problem"
                + (f" ({what})" if what else "")
            ),
            evidence=evidence,
            values={"check_result": short(check_result), "claim": claim},
            run=run,
        )
