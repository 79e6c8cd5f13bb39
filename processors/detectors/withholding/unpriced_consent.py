"""FM-2.4's `unpriced_consent`: a yes asked for a paid change without its price.

The model asks the user for a yes (`consent_pattern`: "please confirm", "would you like to
proceed"), the user answers, and a change the agent then makes, before it says anything more
to the user (reads may come between, and several changes may follow one yes), names a means of
payment (an argument whose name matches `payment_argument_pattern`: `payment_id`, `card`,
`billing_account`), while no model message since the last change before that yes, nor the
user's answer, told an amount (`amount_pattern`) or that the change is free (`free_pattern`):
the user said yes to a charge whose size the agent kept to itself. Money going back
(`credit_pattern`: a refund) is not a charge the user decides on, nor is a change whose result
shows no charge: when the change's result is a record the run read before, and the items it
added to the record's lists that name the call's means of payment (its payment lines) hold no
positive number (none added, or only money going back), the rule stays silent. When those
items do hold a positive number, the result shows the charge: words of a refund or of
something free (about another part of the deal) do not tell its size, only an amount does;
and for a change after another of the same yes, only that amount (or the running total of the
yes's charges): the amounts told priced the first part. A change that follows other words to
the user than the yes asked for is a different failure (acting without a yes), not this one.
Reported once per run: the same deal retried is the same withholding.

- Fires: a billing agent reads account ACME-9, says "I will move ACME-9 to the team plan on
  card_77. Please confirm to proceed.", the user answers "Yes, go ahead.", and
  `upgrade_subscription(..., payment_card: card_77)` returns the account with a new line of
  180 on card_77: reported at the change ("its result shows 180 charged"), citing the
  question and the answer. So does "The seat licences are free of charge. Would you like to
  proceed?" before the same result: the free words spoke of something else. And one yes to
  roaming ("Roaming costs $15 a month") and a data pack, whose change then charges 20: no
  message told 20.
- Near miss: "The team plan costs $180 more on card_77. Please confirm to proceed." (an amount
  told), or the answer "Yes, charge the $180 to card_77.", or a result that adds no line on
  the card, or "The move is at no additional cost" with a result that shows nothing charged.
  A clinic's reschedule after "Shall I move your appointment to Tuesday 10:00?" names no
  means of payment. And when the agent says "The holder is now Kim Lee." between a first
  change and a paid second one, the second no longer follows the yes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.reasoning_action.report import list_items
from mast_otel.processors.detectors.reasoning_common import numbers
from mast_otel.processors.detectors.records import record_asked_for
from mast_otel.processors.detectors.withholding.context import WithholdingContext
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import Run

_MUTATING = ActionKind.MUTATING
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL
_HUMAN = StepKind.HUMAN
# Model messages remembered between two changes (a bound on memory; past it the oldest go),
# and records remembered by id.
_MAX_TEXTS = 64
_MAX_RECORDS = 256


@dataclass(slots=True)
class Unpriced:
    """A change consented to without a price: what a finding needs."""

    consent: StepRef
    answer: StepRef
    call: Step
    argument: str
    asked: str
    # The positive amounts the change's result shows charged to the means (empty: unknown).
    charged: tuple[float, ...]
    # Amounts were told, for another part of the deal than this change.
    told_other: bool = False


class Consents:
    """One run's model messages since the last change and the user's last answer."""

    __slots__ = (
        "answer",
        "chain",
        "chain_charged",
        "consent",
        "context",
        "direct",
        "records",
        "reported",
        "texts",
    )

    def __init__(self, context: WithholdingContext) -> None:
        self.context = context
        # The model's messages since the last change, the last one before the user's answer,
        # the answer, and whether the model has said nothing to the user since it.
        self.texts: list[str] = []
        self.consent: tuple[StepRef, str] | None = None
        self.answer: tuple[StepRef, str] | None = None
        self.direct = False
        # Several changes after one answer, with no words between them: the model's messages
        # before the first of them (the deal the answer said yes to).
        self.chain: list[str] | None = None
        # What the chain's successful changes so far charged (None: none succeeded yet).
        self.chain_charged: list[float] | None = None
        # The list items of each record read, by id.
        self.records: dict[str, frozenset[str]] = {}
        # One finding per run: the same deal retried is the same withholding.
        self.reported = False

    def step(self, step: Step, run: Run) -> Finding | None:
        """The finding on a step, if it is a change consented to without its price."""
        if step.kind is _LLM:
            if step.output_text.strip():
                self._said(step, run)
            return None
        if step.kind is _HUMAN:
            text = step.input_text or step.output_text
            self.answer = (run.ref(step), text)
            self.direct = self.consent is not None
            self.chain = None
            self.chain_charged = None
            return None
        if step.kind is _TOOL and step.tool_name:
            found = self._acted(step)
            return None if found is None else self._finding(found, run)
        return None

    def _said(self, step: Step, run: Run) -> None:
        self.texts.append(step.output_text)
        del self.texts[:-_MAX_TEXTS]
        self.chain = None
        self.chain_charged = None
        if not step.tool_calls:  # words with a call are no question put to the user
            self.consent = (run.ref(step), step.output_text)
            self.direct = False

    def _acted(self, step: Step) -> Unpriced | None:
        action = self.context.classifier.classify(step.tool_name, step.tool_arguments)
        change = action.kind is _MUTATING
        argument, means = self._payment_argument(step.tool_arguments) if change else ("", [])
        charged = self._charged(step, means)
        if not change:
            return None
        # A failed change leaves the price told before it told: the retry is the same deal.
        texts = self.chain if self.chain is not None else self.texts
        before = self.chain_charged
        if not step.failed:
            if self.chain is None:
                self.chain = self.texts
            self.texts = []
            self.chain_charged = [*(before or ()), *(charged or ())][:64]
        if (
            self.reported
            or not self.direct
            or self.consent is None
            or self.answer is None
            or self.context.consent is None
        ):
            return None
        (consent, asked), (answer, said) = self.consent, self.answer
        if not argument or charged == () or not self.context.consent.search(asked):
            return None
        rules = self.context
        # A result showing the charge is no refund, and "free" was said of something else.
        shown = charged is not None
        if not shown and (rules.credit.search(asked) or rules.credit.search(said)):
            return None
        if any(
            rules.amount.search(t) or (not shown and rules.free.search(t)) for t in (*texts, said)
        ):
            # Amounts were told; after another change of the same yes, they priced that one
            # unless one of them is this charge (or the chain's running total).
            if before is None or not charged:
                return None
            told = {v for t in (*texts, said) for v in numbers(t)}
            total = round(sum(before) + sum(charged), 2)
            if total in told or any(round(v, 2) in told for v in charged):
                return None
            self.reported = True
            return Unpriced(consent, answer, step, argument, asked, charged, True)
        self.reported = True
        return Unpriced(consent, answer, step, argument, asked, charged or ())

    def _finding(self, found: Unpriced, run: Run) -> Finding:
        call = found.call
        charged = ", ".join(f"{v:g}" for v in found.charged[:4])
        shown = f" (its result shows {charged} charged)" if charged else ""
        untold = (
            f"though no message told {charged}: the amounts told priced another part of the deal"
            if found.told_other
            else "without telling the user any amount"
        )
        return self.context.report.finding(
            at=call,
            rule="unpriced_consent",
            confidence=0.7,
            message=(
                f"the model asked for a yes ({short(found.asked, 120)!r}) and then ran "
                f"{call.tool_name}({short(call.tool_arguments, 120)}), paid with "
                f"{found.argument}{shown}, {untold}"
            ),
            evidence=[found.consent, found.answer, call],
            values={
                "asked": short(found.asked),
                "call": f"{call.tool_name}({short(call.tool_arguments)})",
                "payment": found.argument,
                "charged": list(found.charged[:20]),
            },
            run=run,
        )

    def _charged(self, step: Step, means: list[str]) -> tuple[float, ...] | None:
        """Remember a record read; for a change (`means`: the values of its payment
        arguments), the positive numbers of the items naming one of `means` that its result
        added to the record read before (empty: nothing charged), or None when the result
        does not show it."""
        asked = None if step.failed else record_asked_for(self.context.classifier, step)
        if asked is None:
            return None
        record, ids = asked
        items = list_items(record)
        charged: tuple[float, ...] | None = None
        for one in sorted(ids):
            before = self.records.get(one)
            if means and before is not None:
                lines = [json.loads(i) for i in items - before if any(m in i for m in means)]
                charged = tuple(
                    float(v)
                    for line in lines
                    for v in line.values()
                    if isinstance(v, int | float) and not isinstance(v, bool) and v > 0
                )
            if before is not None or len(self.records) < _MAX_RECORDS:
                self.records[one] = items
        return charged

    def _payment_argument(self, arguments: str) -> tuple[str, list[str]]:
        """`name=value` of the first argument naming a means of payment (else ""), and the
        strings its value holds (the ids of the means, as a result's lines would name them)."""
        try:
            parsed = json.loads(arguments) if arguments else None
        except (ValueError, RecursionError):
            return "", []
        if not isinstance(parsed, dict):
            return "", []
        for key, value in parsed.items():
            if value not in (None, "", [], {}) and self.context.payment_argument.search(str(key)):
                shown = json.dumps(value)
                means = [json.dumps(m) for m in _strings(value)][:16]
                return f"{key}={short(shown, 80)}", means
        return "", []


def _strings(value: object) -> list[str]:
    """The strings in a JSON value (a payment id, or the ids in a list of payment lines)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value[:16] for s in _strings(v)]
    return []
