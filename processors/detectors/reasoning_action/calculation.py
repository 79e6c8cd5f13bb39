"""FM-2.6 reasoning-action mismatch: a figure told that is not what the agent's own
calculation gave.

- `told_other_than_calculated`: a call's argument is a calculation (`expression_pattern`:
  "(282 - 177) + (346 - 146) + (443 - 180) + 50 * 2") and its result is one number; the
  model's next words quote at least two of the calculation's operands as amounts
  (`value_pattern`: "$282", "$177"), so they speak of the same figures, and tell an amount
  that is none of the operands while never telling the result (nor its absolute value): it
  computed one thing and told the user another (left out terms, redid the sum by hand).
  Small whole numbers (`small_integer_max`: counts, multipliers) are no operands here.
  Fires: `calculate("(129 - 89) + (74 - 45) + 15 * 2")` returns 99.0, and the model tells
  "Desk: $129 - $89 = $40. Lamp: $74 - $45 = $29. The total you pay for the upgrade is
  $69.": the shipping left out, 99 never told.
  Near miss: "... With shipping the total is $99." tells the result; "Shipping is $15 for
  each of the 2 items, so $30 for shipping." quotes one operand only (2 is a count), which
  does not tie the words to the calculation."""

from __future__ import annotations

import json
import re

from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.reasoning_action.context import ReasoningActionContext
from mast_otel.processors.detectors.reasoning_common import Emit, numbers
from mast_otel.processors.model import Finding, Step, StepRef
from mast_otel.processors.run import Run

# A tool result that is one number (a calculator's answer), and the text of a reply read.
_ONE_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_REPLY_CHARS = 8_000
# A told amount within this of the result is the result, rounded.
_ROUNDING = 0.5


class Calculations:
    """One run's last calculation until the model next speaks: (the call, its expression,
    its operands, its result)."""

    __slots__ = ("pending", "rules")

    def __init__(self, context: ReasoningActionContext) -> None:
        self.rules = context.calculation
        self.pending: tuple[StepRef, str, frozenset[float], float] | None = None

    def tool(self, step: Step, run: Run) -> None:
        """A calculation whose result is one number."""
        expression = self.rules.expression
        if expression is None or step.failed or not step.tool_arguments:
            return
        result = step.tool_result.strip()
        if len(result) > 32 or not _ONE_NUMBER.fullmatch(result):
            return
        try:
            arguments = json.loads(step.tool_arguments[:4_000])
        except (ValueError, RecursionError):
            return
        if not isinstance(arguments, dict):
            return
        for value in arguments.values():
            if isinstance(value, str) and expression.match(value.strip()):
                operands = frozenset(
                    n for n in numbers(value) if not (n.is_integer() and n <= self.rules.small)
                )
                answer = float(result.replace(",", ""))
                self.pending = (run.ref(step), value.strip()[:200], operands, answer)
                return

    def model(self, step: Step, run: Run, emit: Emit) -> list[Finding]:
        """The model's first words after the calculation."""
        pending, value = self.pending, self.rules.value
        if pending is None or not step.output_text or value is None:
            return []
        self.pending = None
        where, expression, operands, answer = pending
        told: list[tuple[str, float]] = []
        for match in value.finditer(step.output_text[:_REPLY_CHARS]):
            found = numbers(match.group())
            if len(found) == 1:
                told.append((match.group().strip(), next(iter(found))))
        values = {v for _, v in told}
        if len(values & operands) < 2 or any(abs(abs(answer) - v) <= _ROUNDING for v in values):
            return []
        others = [(text, v) for text, v in told if v not in operands]
        if not others:
            return []
        text, figure = others[-1]
        return emit(
            step,
            "told_other_than_calculated",
            0.7,
            f"the model told {text} from the figures of its calculation "
            f"{where.tool_name}({short(expression, 100)}), which returned {answer:g}; "
            f"it never told {answer:g}",
            [where, step],
            {"expression": expression, "result": answer, "told": figure},
            run,
        )
