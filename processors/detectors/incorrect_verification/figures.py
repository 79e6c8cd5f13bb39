"""FM-3.3's figure rules: a number the agent concluded, against what says otherwise.

The two rules read the figures of the same replies, one per-run state for both. Numbers are
figures when they stand alone (not inside an identifier, a date or a time) and are at least
`min_figure` (list markers, counts of one or two are not figures: verification.py's
`figures`).

`rejected_figure`: a change was rejected with an error that states two figures (the system's
and the one the call carried: "total price is 305, but paid 255", "expected 12, got 10"), the
agent had itself stated or computed the call's figure (in its words or a calculation's result,
before or after the rejection; a figure the user gave counts only when a calculation of the run
produced it too) and had never stated the system's: it read the inputs, computed, and concluded
a wrong figure, or read the error and kept its own. Decided when the run closes; once per run.

    Fires: a shop agent reads a lamp's price (40), `calculate {"expression": "3 * 40"}` answers
    120.0, it says "The total for 3 lamps is $120.", and `create_order {..., "amount": 120}` is
    rejected with "Error: amount does not match, order total is 135, but charged 120".
    Near miss: "Error: rate limited, 100 requests per minute, retry after 30 seconds" (figures
    the agent never stated); "Error: order total is 135" (one figure); the user's own $120 that
    no calculation produced (FM-3.2's `unchecked_figure`).

`amount_does_not_cover`: the agent tells the user that an amount covers another ("your $224
balance will cover the $234"; "8 GB free is enough for the 12 GB image") when the first is
smaller than the second, with no negation in the sentence (`covers_pattern`,
`covers_negation_pattern`). Decided as the run goes; once per run.

    Fires: "Yes: your $40 credit will cover the $55 invoice in full."
    Near miss: "Your $40 credit is not enough to cover the $55 invoice." (negated); "Your $60
    credit will cover the $55 invoice." (it does); "The $20 voucher and the $40 credit together
    cover the $55 invoice." (a split, whose sum may cover).
"""

from __future__ import annotations

import re

from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.incorrect_verification.context import (
    IncorrectVerificationContext,
)
from mast_otel.processors.detectors.verification import figures
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import Run

_MUTATING = ActionKind.MUTATING
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL
_HUMAN = StepKind.HUMAN

# A tool result that is a bare number (a calculator's answer).
_BARE_NUMBER = re.compile(r"^\s*-?\d+(?:\.\d+)?\s*$")
_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?](?!\d)|\n|$)")


def _show(value: float) -> str:
    return f"{value:g}" if value != int(value) else str(int(value))


class FigureChecks:
    """Per run: the figures the agent stated, changes rejected with two figures, and claims
    that one amount covers another."""

    __slots__ = ("computed", "context", "given", "rejected", "reported", "stated")

    def __init__(self, context: IncorrectVerificationContext) -> None:
        self.context = context
        # Figure -> the step where the agent first stated it.
        self.stated: dict[float, StepRef] = {}
        # Rejected changes: (call, its text, the error, the error's figures, figures stated
        # before it).
        self.rejected: list[tuple[StepRef, str, str, list[float], frozenset[float]]] = []
        self.reported: set[str] = set()
        # Figures the user gave: the agent repeating them concluded nothing, unless a
        # calculation of the run produced them too.
        self.given: set[float] = set()
        self.computed: set[float] = set()

    def observe(self, step: Step, run: Run) -> list[Finding]:
        config = self.context.config
        if step.kind is _HUMAN or (step.kind is _LLM and step.input_text):
            text = step.input_text or step.output_text if step.kind is _HUMAN else step.input_text
            if len(self.given) < config.max_tracked_records * 16:
                self.given.update(figures(text[-20_000:], config.min_figure))
        if step.kind is _LLM:
            if step.output_text:
                self._state(step.output_text, step, run)
                return self._covers(step, run)
            return []
        if step.kind is not _TOOL or not step.tool_name:
            return []
        result = step.tool_result or step.error
        if _BARE_NUMBER.match(result) and not step.failed:
            self._state(result, step, run)
            if len(self.computed) < config.max_tracked_records * 16:
                self.computed.update(figures(result, config.min_figure))
            return []
        action = self.context.classifier.classify(step.tool_name, step.tool_arguments)
        if action.kind is not _MUTATING or len(self.rejected) >= config.max_tracked_records:
            return []
        failure = self.context.failure_result
        if not (step.failed or (failure is not None and failure.search(result[:2000]))):
            return []
        found = list(dict.fromkeys(figures(result[:2000], config.min_figure)))
        if len(found) >= 2:
            call = f"{step.tool_name}({short(step.tool_arguments, 160)})"
            self.rejected.append(
                (run.ref(step), call, short(result, 200), found, frozenset(self.stated))
            )
        return []

    def _state(self, text: str, step: Step, run: Run) -> None:
        room = self.context.config.max_tracked_records * 16 - len(self.stated)
        for value in figures(text[:20_000], self.context.config.min_figure):
            if room <= 0:
                return
            if value not in self.stated:
                self.stated[value] = run.ref(step)
                room -= 1

    def close(self, run: Run) -> list[Finding]:
        """`rejected_figure`: the first rejected change whose error holds a figure the agent
        stated and another it had not stated before the rejection."""
        if "rejected_figure" in self.reported:
            return []
        for ref, call, error, found, before in self.rejected:
            theirs = [v for v in found if v not in before]
            ours = [
                v
                for v in found
                if v in self.stated
                and v not in theirs
                and (v not in self.given or v in self.computed)
            ]
            if not theirs or not ours:
                continue
            system, agent = theirs[0], ours[0]
            said = self.stated[agent]
            when = "before" if agent in before else "after"
            self.reported.add("rejected_figure")
            return [
                self.context.report.finding(
                    at=ref,
                    rule="rejected_figure",
                    confidence=0.7,
                    message=(
                        f"{call} was rejected ({error!r}): the system's figure is "
                        f"{_show(system)}, the agent's {_show(agent)}, which it had stated "
                        f"{when} the rejection ({said.tool_name or 'its reply'})"
                    ),
                    evidence=[ref, said],
                    values={
                        "call": call,
                        "error": error,
                        "system_figure": system,
                        "agent_figure": agent,
                        "stated": when,
                    },
                    run=run,
                )
            ]
        return []

    def _covers(self, step: Step, run: Run) -> list[Finding]:
        context = self.context
        if "amount_does_not_cover" in self.reported or context.covers is None:
            return []
        text = step.output_text[:20_000]
        for sentence in _SENTENCE.findall(text):
            match = context.covers.search(sentence)
            if match is None or context.covers_negation.search(sentence):
                continue
            before = figures(sentence[: match.start()], context.config.min_figure)
            after = figures(sentence[match.end() :], context.config.min_figure)
            # One amount said to cover (two or more: a split whose sum may well cover).
            if len(before) != 1 or not after or before[0] >= after[0]:
                continue
            amount, needed = before[0], after[0]
            self.reported.add("amount_does_not_cover")
            claim = short(sentence.strip(), 200)
            return [
                context.report.finding(
                    at=step,
                    rule="amount_does_not_cover",
                    confidence=0.75,
                    message=(
                        f"the agent said {_show(amount)} {match.group().strip()} "
                        f"{_show(needed)}, though {_show(amount)} is less: {claim!r}"
                    ),
                    evidence=[step],
                    values={"amount": amount, "needed": needed, "said": claim},
                    run=run,
                )
            ]
        return []
