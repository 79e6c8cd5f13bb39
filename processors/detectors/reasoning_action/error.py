"""FM-2.6 reasoning-action mismatch: a figure told that a failed call's error belies.

- `told_other_than_error_figure`: a call fails and its error states the figure of a quantity
  (`error_figure_pattern`: "total price is 1002, but paid 957", the quantity's words in group
  `what`, the figure in group `value`); the model's first words after it tell an amount
  (`value_pattern`) in a sentence naming a word of that quantity ("The correct total,
  including additional fees, is $1,047") and never tell the figure: the tool said what the
  total is, and the model told the user another. A later success of the same tool ends the
  watch (what it said may no longer hold), as do the model's first words, whatever they say.
  Fires: `purchase_tickets` fails with "Error: amount due is 184.50, but paid 160.00", and
  the model tells "The correct amount for both seats is $160.00; shall I retry?".
  Near miss: "The amount due is actually $184.50, not $160" tells the figure; "Each seat is
  $80. Let me check the booking fee ..." tells no amount of the quantity the error named;
  "... the amount charged is $160.00 plus fees." after a retry of `purchase_tickets`
  succeeded: the success ended the watch."""

from __future__ import annotations

import re

from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.reasoning_action.context import ReasoningActionContext
from mast_otel.processors.detectors.reasoning_common import SENTENCE, Emit, around, numbers, stem
from mast_otel.processors.model import Finding, Step, StepRef
from mast_otel.processors.run import Run

_ERROR_CHARS = 2_000
_REPLY_CHARS = 8_000
_WORD = re.compile(r"[A-Za-z]+")
# A told amount within this of the figure is the figure, rounded.
_ROUNDING = 0.5


class ErrorFigures:
    """One run's last failed call whose error stated a figure, until the model next speaks:
    (the call, its error's words, the quantity's stems, the figure)."""

    __slots__ = ("pending", "rules")

    def __init__(self, context: ReasoningActionContext) -> None:
        self.rules = context.error_figure
        self.pending: tuple[StepRef, str, frozenset[str], float] | None = None

    def tool(self, step: Step, run: Run) -> None:
        """A failed call whose error states a figure; a success of the same tool."""
        figure = self.rules.figure
        if figure is None:
            return
        if not step.failed:
            if self.pending is not None and self.pending[0].tool_name == step.tool_name:
                self.pending = None
            return
        error = (step.error or step.tool_result)[:_ERROR_CHARS]
        match = figure.search(error)
        if match is None:
            return
        found = numbers(match.group("value") or "")
        what = frozenset(stem(w) for w in _WORD.findall(match.group("what") or ""))
        if len(found) != 1 or not what:
            return
        self.pending = (run.ref(step), short(error, 120), what, next(iter(found)))

    def model(self, step: Step, run: Run, emit: Emit) -> list[Finding]:
        """The model's first words after the failed call."""
        pending, value = self.pending, self.rules.value
        if pending is None or not step.output_text or value is None:
            return []
        self.pending = None
        where, error, what, figure = pending
        text = step.output_text[:_REPLY_CHARS]
        if any(abs(n - figure) <= _ROUNDING for n in numbers(text)):
            return []
        for sentence in SENTENCE.split(text):
            if not what & {stem(w) for w in _WORD.findall(sentence)}:
                continue
            told = [m for m in value.finditer(sentence) if len(numbers(m.group())) == 1]
            if not told:
                continue
            amount = told[-1]
            start = text.find(sentence)
            said = around(text, start + amount.start(), start + amount.end())
            return emit(
                step,
                "told_other_than_error_figure",
                0.7,
                f"the model told {amount.group().strip(' ,.')} ({said!r}) after "
                f"{where.tool_name} failed with {error!r}; it never told {figure:g}",
                [where, step],
                {"error": error, "figure": figure, "told": next(iter(numbers(amount.group())))},
                run,
            )
        return []
