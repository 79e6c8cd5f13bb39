"""FM-3.2's `unchecked_figure`: a change carried a figure the user gave, unchecked, and the
system rejected it with its own.

A mutating call is rejected (an error status, or a result matching `failure_result_pattern`)
with an error that states two figures, the system's and the call's ("total price is 608, but
paid 304", "expected 12, got 10"); the call's figure is one the user gave, and no calculation
of the run (a tool result that is a bare number) had produced it before the call: the agent
took the user's figure for the amount the action needed and never worked it out. (When the
agent computed or concluded the figure itself, the check was made and went wrong: FM-3.3's
`rejected_figure`.) Decided when the run closes; one finding per run.

    Fires: the user asks "Order 3 desk lamps (SKU LMP-40) and charge me $120."; the agent reads
    the product (price 40) and, computing nothing, calls `create_order {"sku": "LMP-40",
    "quantity": 3, "amount": 120}`, rejected with "Error: amount does not match, order total is
    135, but charged 120": 120 is the user's figure.
    Near miss: the run had computed it (`calculate {"expression": "3 * 40"}` answering 120.0):
    the agent checked and got it wrong, FM-3.3's `rejected_figure`; an error with no figures
    ("Error: card declined"), or an order accepted, is silent.
"""

from __future__ import annotations

import re

from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.missing_verification.context import MissingVerificationContext
from mast_otel.processors.detectors.verification import figures
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import Run

_MUTATING = ActionKind.MUTATING
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL
_HUMAN = StepKind.HUMAN
_BARE_NUMBER = re.compile(r"^\s*-?\d+(?:\.\d+)?\s*$")


class UserFigures:
    """Per run: figures the user gave, figures calculations produced, and the first change
    rejected with two figures one of which is the user's."""

    __slots__ = ("computed", "context", "given", "rejected")

    def __init__(self, context: MissingVerificationContext) -> None:
        self.context = context
        self.given: set[float] = set()
        self.computed: set[float] = set()
        self.rejected: tuple[StepRef, str, str, float, float] | None = None

    def observe(self, step: Step, run: Run) -> None:
        config = self.context.config
        if self.rejected is not None:
            return
        limit = config.max_tracked_mutations * 16
        if step.kind is _HUMAN or (step.kind is _LLM and step.input_text):
            text = step.input_text or step.output_text
            if len(self.given) < limit:
                self.given.update(figures(text[-20_000:], config.min_figure))
            return
        if step.kind is not _TOOL or not step.tool_name:
            return
        result = step.tool_result or step.error
        if _BARE_NUMBER.match(result) and not step.failed:
            if len(self.computed) < limit:
                self.computed.update(figures(result, config.min_figure))
            return
        action = self.context.classifier.classify(step.tool_name, step.tool_arguments)
        failure = self.context.failure_result
        if action.kind is not _MUTATING or not (
            step.failed or (failure is not None and failure.search(result[:2000]))
        ):
            return
        found = list(dict.fromkeys(figures(result[:2000], config.min_figure)))
        users = [v for v in found if v in self.given and v not in self.computed]
        theirs = [v for v in found if v not in self.given and v not in self.computed]
        if users and theirs:
            call = f"{step.tool_name}({short(step.tool_arguments, 160)})"
            self.rejected = (run.ref(step), call, short(result, 200), theirs[0], users[0])

    def close(self, run: Run) -> list[Finding]:
        if self.rejected is None:
            return []
        ref, call, error, system, user = self.rejected
        return [
            self.context.report.finding(
                at=ref,
                rule="unchecked_figure",
                confidence=0.7,
                message=(
                    f"{call} carried {user:g}, a figure the user gave and no calculation of the "
                    f"run produced, and was rejected ({error!r}): the system's figure is "
                    f"{system:g}"
                ),
                evidence=[ref],
                values={
                    "call": call,
                    "error": error,
                    "system_figure": system,
                    "user_figure": user,
                },
                run=run,
            )
        ]
