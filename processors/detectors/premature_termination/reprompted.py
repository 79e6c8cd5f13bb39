"""FM-3.1's `reprompted`: the agent gave an empty answer (no text, no call, no output tokens,
in a run whose responses do record content) and went on only because a user turn that only
re-prompts (`reprompt_pattern`: "continue", "please answer", an empty message: a harness)
asked again. Decided when the run closes, on the first such re-prompt; reported at it.

- Fires: a coding agent runs the tests ("1 failed"), gives an empty response, the user turn
  "continue" follows, and the agent then patches, tests and concludes: reported at
  "continue", citing the empty answer.
- Near miss: the agent answers "The failure is in total(): it ignores discounts." and the user
  asks "Also add a test for an unknown code.": a real follow-up after a real answer. Nor is a
  blank response in a run none of whose responses carried text or calls (an instrumentation
  that records no content) an empty answer.
"""

from __future__ import annotations

from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.premature_termination.context import (
    PrematureTerminationContext,
)
from mast_otel.processors.model import Finding, Step
from mast_otel.processors.run import Run


class Reprompted:
    """Per run: the first re-prompt after an empty answer."""

    __slots__ = ("context", "reprompt")

    def __init__(self, context: PrematureTerminationContext) -> None:
        self.context = context
        # (the empty answer, the re-prompt).
        self.reprompt: tuple[Step, Step] | None = None

    def user_turn(self, empty: Step, step: Step) -> None:
        """A user's turn right after the empty answer `empty`."""
        if self.reprompt is None and self.context.reprompt.search(step.input_text.strip()[:200]):
            self.reprompt = (empty, step)

    def close(self, run: Run) -> list[Finding]:
        if self.reprompt is None:
            return []
        empty, prompt = self.reprompt
        return [
            self.context.report.finding(
                at=prompt,
                rule="reprompted",
                confidence=0.7,
                message=(
                    f"the agent gave an empty answer and went on only after a re-prompt "
                    f"({short(prompt.input_text, 40) or 'an empty message'!r})"
                ),
                evidence=[empty, prompt],
                values={"reprompt": short(prompt.input_text, 200)},
                run=run,
            )
        ]
