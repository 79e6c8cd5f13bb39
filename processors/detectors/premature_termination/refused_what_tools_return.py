"""FM-3.1's `refused_what_tools_return`: the agent told the user it cannot look up or give a
thing (`refusal_pattern`: "I'm unable to provide information about your gift card balances"),
and a later successful call returned it (its result names at least half of the thing's words,
read as FM-2.6's `inability_then_done` reads them): it gave up on a request its tools serve.
Refusing a way of looking ("using just the user ID") is no giving up. Reported at the refusal,
once per refusal, as soon as the call that returns the thing comes.

- Fires: a shop assistant answers "How much store credit do I have left?" with "I'm unable to
  provide information about your store credit balance. Sorry!", then, serving a return,
  `get_customer({"customer_id": "c-88"})` returns the customer with its `store_credit`
  balance: reported at the refusal, citing it and the call.
- Near miss: "I'm unable to look up store credit using just your email." refuses a way of
  looking (it asks for another identifier); "I'm unable to provide information about your
  loyalty tier." is a thing no result of the run holds; "I cannot provide a refund as store
  credit." refuses an action, not a look-up.
"""

from __future__ import annotations

from mast_otel.processors.detectors.premature_termination.context import (
    PrematureTerminationContext,
)
from mast_otel.processors.detectors.reasoning_action.inability import Belied, Inabilities
from mast_otel.processors.model import Finding, Step
from mast_otel.processors.run import Run


class RefusedWhatToolsReturn:
    """Per run: what the agent said it cannot look up or give, until a result shows it could."""

    __slots__ = ("context", "refusals")

    def __init__(self, context: PrematureTerminationContext) -> None:
        self.context = context
        self.refusals = Inabilities(context.refusal)

    @property
    def pending(self) -> bool:
        """Some refusal has not been belied yet."""
        return bool(self.refusals.pending)

    def model_call(self, step: Step, run: Run) -> None:
        self.refusals.model(step, run)

    def tool_call(self, step: Step, acts: bool, run: Run) -> list[Finding]:
        """The refusals a successful call (`acts`: a read or a change) belies."""
        return [self._finding(b, run) for b in self.refusals.belied(step, acts)]

    def _finding(self, belied: Belied, run: Run) -> Finding:
        return self.context.report.finding(
            at=belied.where,
            rule="refused_what_tools_return",
            confidence=0.65,
            message=(
                f"the agent told the user {belied.said!r}, yet {belied.call} returned it (its "
                f"result names {', '.join(belied.shown)}): it gave up on a request its tools "
                f"serve"
            ),
            evidence=[belied.where, belied.step],
            values={"said": belied.said, "call": belied.call, "named": belied.shown},
            run=run,
        )
