"""FM-2.6 reasoning-action mismatch: money going back told to the user as money they pay.

- `refund_told_as_charge`: a calculation came out negative (a tool result that is one negative
  number: the new price is lower than the old), or a change added to its record an item with a
  negative amount (a payment line of money going back), and the model's next words tell the
  user they pay that amount (`user_pays_pattern`: "an additional $114", "$114 has been
  charged") with no word of money going back in the sentence (`money_back_pattern`: a
  refund, a saving): it turned the sign of what it computed or of what the result shows.
  Fires: `calculate("70 - 90")` returns -20.0 and the model tells "Moving to basic costs an
  additional $20 per month."; `update_order` adds a payment line of -35 and the model tells
  "Done. $35 has been charged to your credit card ending in 4.".
  Near miss: "Moving to basic saves you $20 a month." and "You'll get $20 back on your
  credit card." (money going back, told so); "costs an additional $20" when the calculation
  returned 20.0 (a real charge)."""

from __future__ import annotations

import re

from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.reasoning_action.context import ReasoningActionContext
from mast_otel.processors.detectors.reasoning_common import SENTENCE, Emit, numbers
from mast_otel.processors.model import Finding, Step, StepRef
from mast_otel.processors.run import Run

_NEGATIVE = re.compile(r"-\d[\d,]*(?:\.\d+)?")


class Refunds:
    """One run's money going back since the model last spoke: (where, what showed it, the
    amounts, as positive values)."""

    __slots__ = ("pending", "rules")

    def __init__(self, context: ReasoningActionContext) -> None:
        self.rules = context.sign
        self.pending: tuple[StepRef, str, frozenset[float]] | None = None

    def tool(self, step: Step, run: Run, added_back: frozenset[float]) -> None:
        """A calculation that came out negative, or a change that added money going back."""
        if self.rules.pays is None or step.failed:
            return
        text = step.tool_result.strip()
        if len(text) <= 32 and _NEGATIVE.fullmatch(text):
            back = frozenset(numbers(text))
            shown = f"{step.tool_name}({short(step.tool_arguments, 80)}) returned {text}"
        elif added_back:
            back = added_back
            amounts = ", ".join(f"-{v:g}" for v in sorted(added_back)[:4])
            shown = f"{step.tool_name}({short(step.tool_arguments, 120)}) added {amounts}"
        else:
            return
        self.pending = (run.ref(step), shown, back)

    def model(self, step: Step, run: Run, emit: Emit) -> list[Finding]:
        """The model's first words after money going back."""
        pending, pays, value = self.pending, self.rules.pays, self.rules.value
        if pending is None or not step.output_text or pays is None or value is None:
            return []
        self.pending = None
        where, shown, back = pending
        for sentence in SENTENCE.split(step.output_text[:8000]):
            if not pays.search(sentence) or self.rules.back.search(sentence):
                continue
            for match in value.finditer(sentence):
                told = numbers(match.group())
                if len(told) == 1 and told <= back:
                    return emit(
                        step,
                        "refund_told_as_charge",
                        0.75,
                        f"the model told the user they pay {match.group().strip()} "
                        f"({short(sentence.strip(), 140)!r}), but {shown}: that money goes "
                        "back to them",
                        [where, step],
                        {"said": short(sentence.strip()), "told": next(iter(told))},
                        run,
                    )
        return []
