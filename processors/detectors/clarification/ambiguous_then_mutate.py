"""FM-2.2's rule `ambiguous_then_mutate`: a change made right after a result that left the
target unclear.

`ambiguous_then_mutate`: a tool result left the target unclear (several candidates, not found,
"which one": `signals.ambiguous_pattern`) and the agent's next change to the system (a mutating
call that went through) follows with no clarifying step in between: no user or human step, and
no model turn that asks a question instead of calling a tool. Reported at the change, with the
unclear result as evidence.

Fires: `find_deployment({"name": "checkout"})` answers "2 matches: shop/checkout,
staging/checkout; more than one deployment has this name", and the agent's next call is
`kubectl set resources deployment/checkout --limits=memory=256Mi -n shop`.

Near miss: after the same two matches the agent asks "There are two checkout deployments, in
shop and staging: which one?", the user answers "The one in shop.", and then it makes the
change: the question settled which one.
"""

from __future__ import annotations

from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.clarification.context import ClarificationContext
from mast_otel.processors.model import Finding, Step
from mast_otel.processors.run import Run


class AmbiguousThenMutate:
    """The last result that left the target unclear, until a clarifying step or a change."""

    __slots__ = ("ambiguous", "report", "unclear")

    def __init__(self, context: ClarificationContext) -> None:
        self.ambiguous = context.signals.ambiguous
        self.report = context.report
        self.unclear: Step | None = None

    def clarified(self) -> None:
        """A user turn, or a model turn that asks a question: the target is no longer a
        guess."""
        self.unclear = None

    def read(self, step: Step, result: str) -> bool:
        """A call that changed nothing: whether its result (or error) left the target
        unclear."""
        if self.ambiguous.found(result):
            self.unclear = step
            return True
        return False

    def change(self, step: Step, run: Run) -> Finding | None:
        """A change that went through: the finding when it follows an unclear result."""
        unclear = self.unclear
        if unclear is None:
            return None
        self.unclear = None
        return self.report.finding(
            at=step,
            rule="ambiguous_then_mutate",
            confidence=0.8,
            message=(
                f"{step.tool_name}({short(step.tool_arguments, 100)}) changed the system right "
                f"after {unclear.tool_name} left the target unclear "
                f"({short(unclear.tool_result or unclear.error, 100)!r}), without asking"
            ),
            evidence=[unclear, step],
            values={
                "unclear_result": short(unclear.tool_result or unclear.error),
                "action": short(step.tool_arguments),
            },
            run=run,
        )
