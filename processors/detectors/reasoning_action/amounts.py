"""FM-2.6 reasoning-action mismatch: amounts nothing gave the agent.

- `unsupported_value`: the model tells an amount (`value_pattern`, such as "$1,234.50") that
  appears in no tool result, no user message and not in the run's instructions, and is not
  derived from them by simple arithmetic: the sum or difference of two values of one source
  (one tool result, one user message, one model message showing its work: "$123 + $167 =
  $290"), the sum or difference of an amount the model told before and a value seen (the
  total it told, less a gift card's balance), the total of a field over a list of a JSON
  result, or a value seen times a count the run states (the length of a list of records in
  a result: two passengers, three flights), or the result of the agent's own working, in
  its words or its scratchpad's arguments, that checks out ("$402 + $306 + $308 = $1,016",
  every operand supported). Numbers are compared as numbers: 1,234.50 is
  1234.5. A sum of two values from different sources is no support by itself: with
  hundreds of values seen, nearly any amount is one.
  Fires: an invoice result holds lines of 1200.5 and 34 and a credit of 100, and the model
  tells "INV-7 comes to $1,234.50 ...; after your $100 credit you owe $1,134.50. With the
  late fee the balance is $1,310.": nothing holds or derives $1,310. So does "You owe $125
  today" when 125 is a visit's fee of 85 from one result plus a voucher of 40 from another.
  Near miss: the $1,234.50 (the lines' total) and $1,134.50 (the total told, less the
  credit) of that same answer; "For both of you the fees come to $170" when the result
  lists two patients and a fee of 85 (a value times a count).
- `unsupported_operand`: the agent computes with a number nothing gave it: a call's argument
  is an arithmetic expression (`expression_pattern`, "(122 + 127) * 2 * 1.5") with an operand
  no tool result, user message or instruction holds (small whole numbers, counts, excepted).
  Fires: `calculate("730 * 0.096 * 1.35")`, 730 hours a month from the instructions and the
  hourly 0.096 from `get_price`: 1.35 comes from nowhere.
  Near miss: `calculate("730 * 0.096 * 2")` for two instances: 2 is a small whole number
  (`small_integer_max`), and every other operand was given.

Amounts are decided at the run's close: the instructions may arrive last."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations, product

from mast_otel.processors import conventions
from mast_otel.processors.detectors.reasoning_action.context import ReasoningActionContext
from mast_otel.processors.detectors.reasoning_common import (
    Emit,
    around,
    list_counts,
    list_totals,
    numbers,
)
from mast_otel.processors.model import Finding, Step, StepRef
from mast_otel.processors.run import Run

# Below this, a value read to the cent is exact in whole cents as a float (2**53 / 100).
_EXACT_CENTS = 1e13
# Sources remembered per run to derive only the new pairs of a grown one.
_SOURCES_KEPT = 4
# A sum written out: "$402 + $306 - 8 = $700" (terms, then the result).
_AMOUNT = r"\$?\s?\d[\d,]*(?:\.\d+)?"
_WORKING = re.compile(
    rf"(?P<terms>{_AMOUNT}(?:\s*[-+]\s*{_AMOUNT})+)\s*=\s*\$?\s?(?P<result>\d[\d,]*(?:\.\d+)?)"
)
_TERM = re.compile(r"(?:^|([-+]))\s*\$?\s?(\d[\d,]*(?:\.\d+)?)")


@dataclass(slots=True)
class Told:
    """An amount the model told, decided at close (the instructions may arrive last)."""

    step: StepRef
    text: str  # as written ("$1,234.50")
    value: float
    said: str
    # For an operand of a calculation: the call's tool name (else "").
    tool: str = ""


@lru_cache(maxsize=16)
def _pairs(source: frozenset[float]) -> frozenset[float]:
    """The sums and differences of every two values of a source, as `Amounts._derive` makes
    them (a result repeated across runs is paired once: the last few are kept)."""
    values = sorted(source)
    if values and values[-1] < _EXACT_CENTS:
        cents = [round(v * 100) for v in values]
        pairs = list(combinations(cents, 2))
        return frozenset([(a + b) / 100 for a, b in pairs] + [abs(b - a) / 100 for a, b in pairs])
    out = set()
    for i, a in enumerate(values):
        for b in values[i + 1 :]:
            out.add(round(a + b, 2))
            out.add(round(b - a, 2))
    return frozenset(out)


class Amounts:
    """One run's values seen and amounts told."""

    __slots__ = (
        "config",
        "counts",
        "derived",
        "derived_from",
        "rules",
        "seen",
        "stated",
        "told",
        "user_text",
    )

    def __init__(self, context: ReasoningActionContext) -> None:
        self.rules = context.amounts
        self.config = context.config
        # Values seen in tool results and user messages (None once past the bound), the
        # amounts told that none supported yet, and the last user message read.
        self.seen: set[float] | None = set()
        self.told: list[Told] = []
        self.user_text = ""
        # Sums and differences of two values of one source, and the counts the run states.
        self.derived: set[float] = set()
        self.counts: set[int] = set()
        # The last sources whose pairs are in `derived`: a model's input grows call by call,
        # and only the pairs its new values make are new.
        self.derived_from: list[frozenset[float]] = []
        # Amounts the model told (its running figures: a total, a balance).
        self.stated: set[float] = set()

    def user(self, text: str) -> None:
        """A user message (or a model call's input): its numbers are given."""
        if text and text != self.user_text:
            self.user_text = text
            self.learn(text)

    def tool(self, step: Step, run: Run) -> None:
        """A tool call: its operands are checked, its result's numbers and totals are given."""
        self._operands(step, run)
        self.working(step.tool_arguments)
        self.learn(step.tool_result or step.error)
        if self.seen is not None and self.rules.value is not None:
            self.seen |= list_totals(step.tool_result)
            self.counts |= list_counts(step.tool_result, self.config.max_count)

    def learn(self, text: str) -> None:
        if self.seen is None or not text or self.rules.value is None:
            return
        found = numbers(text)
        self.seen |= found
        self._derive(found)
        if len(self.seen) + len(self.derived) > self.config.max_values_per_run:
            self.seen = None  # past the bound: the rule stops for this run
            self.told.clear()

    def _derive(self, found: frozenset[float]) -> None:
        """The sums and differences of two values of one source (past
        `max_source_values` values a source gives none: its pairs would support anything)."""
        if len(found) > self.config.max_source_values:
            return
        source = frozenset(found)
        done = max((s for s in self.derived_from if s <= source), key=len, default=frozenset())
        if len(done) == len(source):
            return
        self.derived_from = [*self.derived_from[-(_SOURCES_KEPT - 1) :], source]
        if len(done) * 4 <= len(source) or max(source) >= _EXACT_CENTS:
            # Little of it paired already (or values too large for whole cents): all its
            # pairs, shared with the runs that saw the same values (those of `done` are in
            # `derived` already, so nothing changes).
            self.derived |= _pairs(source)
            return
        # Values are read to the cent (`numbers`): in whole cents the sums and differences are
        # exact integers, and `cents / 100` is the float `round(a + b, 2)` gives. Only the
        # pairs with a value new since `done` are new.
        fresh = [round(v * 100) for v in sorted(source - done)]
        pairs = [*combinations(fresh, 2), *product(fresh, [round(v * 100) for v in done])]
        self.derived.update([(a + b) / 100 for a, b in pairs])
        self.derived.update([abs(b - a) / 100 for a, b in pairs])

    def working(self, text: str) -> None:
        """Sums written out ("a + b - c = d") whose operands are all supported and whose
        arithmetic checks out: their results are derived."""
        if self.seen is None or not text or "=" not in text:
            return
        for match in _WORKING.finditer(text[:20_000]):
            terms = _TERM.findall(match.group("terms"))
            total, ok = 0.0, True
            for sign, digits in terms:
                value = round(float(digits.replace(",", "")), 2)
                ok = ok and self.supported(value, self.seen)
                total += -value if sign == "-" else value
            result = round(float(match.group("result").replace(",", "")), 2)
            if ok and len(terms) >= 2 and abs(total - result) < 0.01:
                self.derived.add(result)

    def supported(self, value: float, seen: set[float]) -> bool:
        if value in seen or value in self.derived:
            return True
        if any(round(value / count, 2) in seen for count in self.counts):
            return True
        return any(
            round(value - a, 2) in seen or round(a - value, 2) in seen
            for a in self.stated
            if a != value
        )

    def model(self, step: Step, run: Run) -> None:
        """Amounts in a model output that nothing seen so far supports: held for close."""
        pattern = self.rules.value
        if pattern is None or self.seen is None or not step.output_text:
            return
        # The model's own working ("$123 + $167 = $290") derives its result.
        self._derive(numbers(step.output_text))
        self.working(step.output_text)
        for match in pattern.finditer(step.output_text):
            values = numbers(match.group())
            if len(values) != 1:
                continue
            value = next(iter(values))
            if self.supported(value, self.seen):
                if len(self.stated) < self.config.max_source_values:
                    self.stated.add(value)  # a figure the model may compute on
                continue
            if any(t.value == value and not t.tool for t in self.told):
                continue
            if len(self.told) < self.config.max_findings_per_run:
                said = around(step.output_text, match.start(), match.end())
                self.told.append(Told(run.ref(step), match.group().strip(), value, said))

    def _operands(self, step: Step, run: Run) -> None:
        """Operands of a calculation in a call's arguments that nothing seen so far holds."""
        expression = self.rules.expression
        if expression is None or self.seen is None or not step.tool_arguments:
            return
        try:
            arguments = json.loads(step.tool_arguments)
        except (ValueError, RecursionError):
            return
        if not isinstance(arguments, dict):
            return
        for value in arguments.values():
            if not isinstance(value, str) or not expression.match(value.strip()):
                continue
            for operand in sorted(numbers(value)):
                small = operand.is_integer() and operand <= self.config.small_integer_max
                # An operand is copied from somewhere, not computed: it must be there as is.
                if small or operand in self.seen:
                    continue
                if len(self.told) < self.config.max_findings_per_run:
                    text = f"{operand:g}"
                    self.told.append(
                        Told(run.ref(step), text, operand, value.strip()[:120], step.tool_name)
                    )
                return

    def close(self, run: Run, emit: Emit) -> list[Finding]:
        findings: list[Finding] = []
        if not self.told or self.seen is None:
            return findings
        instructions = numbers(str(run.attributes.get(conventions.TASK_DESCRIPTION) or ""))
        self._derive(instructions)
        seen = self.seen | instructions
        for told in self.told:
            if told.tool:
                if told.value in seen:
                    continue
                findings.extend(
                    emit(
                        told.step,
                        "unsupported_operand",
                        0.65,
                        f"{told.tool} computed {told.said!r} with {told.text}, a number no "
                        "tool result, user message or instruction holds",
                        [told.step],
                        {"operand": told.text, "expression": told.said},
                        run,
                    )
                )
                continue
            if self.supported(told.value, seen):
                continue
            findings.extend(
                emit(
                    told.step,
                    "unsupported_value",
                    0.65,
                    f"the model told {told.text} ({told.said!r}), a value no tool result, "
                    "user message or instruction holds, nor one derived from them (a sum or "
                    "difference within one source or with a figure it told, a total, a value "
                    "times a count)",
                    [told.step],
                    {"value": told.text, "said": told.said},
                    run,
                )
            )
        return findings
