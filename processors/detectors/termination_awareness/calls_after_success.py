"""FM-1.5's `calls_after_success`: after a successful change, a read of the changed resource
(a check, as FM-3.2 counts one: `classify.checks`) showed it healthy (`signals.health`), and
the agent made `calls_after_success` more tool calls regardless, before the user spoke again:
the problem was solved and it did not stop. A new change starts over.

- Fires: `kubectl rollout undo deployment/checkout -n shop`, then `kubectl rollout status`
  answers 'deployment "checkout" successfully rolled out', then three more calls (get pods,
  logs, get events): reported at the third, citing the check and the three.
- Near miss: the healthy check reads another deployment (`deployment/orders-api` after
  scaling `payments-api`) or another namespace: it checks nothing that changed. Or the agent
  answers "Rolled back: checkout is healthy again." and the user asks for the pods and
  events of payments: the calls after serve the user's new request.
"""

from __future__ import annotations

from collections.abc import Sequence

from mast_otel.processors.classify import ActionKind, Target, checks
from mast_otel.processors.detectors.signals import Health
from mast_otel.processors.detectors.termination_awareness.context import (
    TerminationAwarenessContext,
)
from mast_otel.processors.model import Finding, Step, StepRef
from mast_otel.processors.run import Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_MUTATING = ActionKind.MUTATING
_READ = ActionKind.READ
_HEALTHY = Health.HEALTHY


class CallsAfterSuccess:
    """Per run: what the last change touched, the healthy check of it, the calls since."""

    __slots__ = (
        "after_success",
        "changed_targets",
        "config",
        "context",
        "healthy_check",
        "reported",
    )

    def __init__(self, context: TerminationAwarenessContext) -> None:
        self.context = context
        self.config = context.config
        self.changed_targets: frozenset[Target] = frozenset()
        self.healthy_check: StepRef | None = None
        # Calls after a healthy check, up to the number that is reported.
        self.after_success: list[StepRef] = []
        self.reported = False

    def user_spoke(self) -> None:
        """The user answered: calls after a healthy check now serve what the user says next."""
        self.healthy_check = None
        self.after_success = []

    def tool_call(self, step: Step, ref: StepRef, run: Run) -> Sequence[Finding]:
        action = self.context.classifier.classify(step.tool_name, step.tool_arguments)
        if action.kind is _MUTATING and not step.failed:
            self.changed_targets = action.refs
            self.healthy_check = None
            self.after_success = []
        elif self.healthy_check is not None:
            if len(self.after_success) < self.config.calls_after_success:
                self.after_success.append(ref)
                if len(self.after_success) == self.config.calls_after_success:
                    return self._report(step, self.healthy_check, run)
        elif (
            self.changed_targets
            and action.kind is _READ
            and checks(self.changed_targets, action.refs)
            and self.context.signals.health(step.tool_result) is _HEALTHY
        ):
            self.healthy_check = ref
        return ()

    def _report(self, step: Step, check: StepRef, run: Run) -> list[Finding]:
        if self.reported:
            return []
        self.reported = True
        return [
            self.context.report.finding(
                step,
                "calls_after_success",
                0.7,
                f"{len(self.after_success)} more tool calls after a check showed "
                f"the problem solved",
                [check, *self.after_success],
                {"check": check.tool_name, "calls_after": len(self.after_success)},
                run,
            )
        ]
