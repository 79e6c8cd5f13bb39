"""FM-2.2's rule `unnamed_target`: a change to a resource nothing the agent was given names.

`unnamed_target` (with `check_unnamed_targets`): a mutating call that went through, whose
targets (the resources the classifier finds in its arguments) are all named by nothing the
agent was given: not the task, not a user message, not what its prompts and hand-offs told it,
not any earlier tool result that changed nothing. The agent's own output names nothing. Only
once the agent has been given some task text to judge by; words are remembered up to a bound,
past which the rule stops.

Fires: the task "checkout in namespace shop is failing", then `kubectl rollout restart
deployment/payments -n billing`: nothing named payments.

Near miss: under the same task, `kubectl rollout restart deployment/checkout -n shop`: the task
named checkout.
"""

from __future__ import annotations

from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.clarification.context import MAX_WORDS, ClarificationContext
from mast_otel.processors.detectors.signals import named, words
from mast_otel.processors.model import Finding, Step
from mast_otel.processors.run import Run


class UnnamedTarget:
    """The words of what the agent was given, to tell a target nothing named."""

    __slots__ = ("known", "last_learnt", "on", "report")

    def __init__(self, context: ClarificationContext) -> None:
        self.on = context.config.check_unnamed_targets
        self.report = context.report
        self.known: set[str] = set()
        # Every model call of a run usually carries the same prompt: learnt once is enough.
        self.last_learnt = ""

    def learn(self, text: str) -> None:
        """Words the agent was given (a task, a user's turn, a prompt, a result)."""
        if text == self.last_learnt:
            return
        self.last_learnt = text
        if len(self.known) < MAX_WORDS:
            self.known |= words(text)

    def change(self, step: Step, targets: frozenset[str], run: Run) -> Finding | None:
        """A change that went through, on `targets`: the finding when nothing named any."""
        if not self.on or not targets or len(self.known) >= MAX_WORDS:
            return None
        unnamed = sorted(t for t in targets if not named(t, self.known))
        if not unnamed or len(unnamed) != len(targets):
            return None
        return self.report.finding(
            at=step,
            rule="unnamed_target",
            confidence=0.6,
            message=(
                f"{step.tool_name} changed {', '.join(unnamed)}, which neither the task nor any "
                f"input or result named"
            ),
            evidence=[step],
            values={"targets": unnamed, "action": short(step.tool_arguments)},
            run=run,
        )
