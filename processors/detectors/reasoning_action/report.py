"""FM-2.6 reasoning-action mismatch: a report of money moved that the change's result belies.

- `report_contradicts_result`: a change's result is a record the run had read before (a JSON
  object holding an id of the call's arguments), the items it added to that record's lists
  (a payment line, a new segment) hold numbers, and the model's next words to the user tell
  an amount in a sentence about money moving (`charge_statement_pattern`: "charged",
  "processed", "refunded") that is none of those numbers: it reports what it meant to do, not
  what the result shows.
  Fires: `get_subscription` read SUB-9 with invoice I-1 of $40; `update_subscription` returns
  it with a new invoice I-2 of $85; the model tells "Done: SUB-9 is on pro. $45 has been
  charged to your card.".
  Near miss: "$85 has been charged to your card." (what the result added); "$45 per month
  will be charged from now on." (what will happen, per unit); the same report when SUB-9
  was never read before the change (nothing tells what it added)."""

from __future__ import annotations

import json
import re
from typing import Any

from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.reasoning_action.context import ReasoningActionContext
from mast_otel.processors.detectors.reasoning_common import SENTENCE, Emit, numbers
from mast_otel.processors.detectors.records import record_asked_for
from mast_otel.processors.model import Finding, Step, StepRef
from mast_otel.processors.run import Run

_MUTATING = ActionKind.MUTATING
# A sentence about what is still to happen or might, or an amount per unit ("$38 per
# passenger"): no report of the total that was moved.
_NOT_DONE = re.compile(
    r"\b(will|would|can|could|may|once|if|when|should|per|each)\b", re.IGNORECASE
)


class Reports:
    """One run's records read (the list items of each, by id) and the last change that added
    items to one: (change, call, id, the added items' numbers)."""

    __slots__ = ("pending", "records", "rules")

    def __init__(self, context: ReasoningActionContext) -> None:
        self.rules = context.reports
        self.records: dict[str, frozenset[str]] = {}
        self.pending: tuple[StepRef, str, str, frozenset[float]] | None = None

    def tool(self, step: Step, kind: ActionKind, run: Run) -> frozenset[float]:
        """Remember a record's list items; after a change, what it added to a record. Returns
        the negative amounts (money going back) of the items a change added, as positive."""
        back: frozenset[float] = frozenset()
        if self.rules.charge is None or step.failed:
            return back
        asked = record_asked_for(self.rules.classifier, step)
        if asked is None:
            return back
        record, ids = asked
        items = list_items(record)
        for one in sorted(ids):
            before = self.records.get(one)
            if kind is _MUTATING and before is not None:
                added = [json.loads(i) for i in items - before]
                found = frozenset(
                    round(abs(float(v)), 2)
                    for item in added
                    for v in item.values()
                    if isinstance(v, int | float) and not isinstance(v, bool)
                )
                if found:
                    call = f"{step.tool_name}({short(step.tool_arguments, 160)})"
                    self.pending = (run.ref(step), call, one, found)
                back |= {
                    round(-float(v), 2)
                    for item in added
                    for v in item.values()
                    if isinstance(v, int | float) and not isinstance(v, bool) and v < 0
                }
            if before is not None or len(self.records) < self.rules.config.max_tracked_records:
                self.records[one] = items
        return back

    def model(self, step: Step, run: Run, emit: Emit) -> list[Finding]:
        """The model's first words after a change that added items to a record."""
        pending = self.pending
        charge, value_pattern = self.rules.charge, self.rules.value
        if pending is None or not step.output_text or charge is None or value_pattern is None:
            return []
        self.pending = None
        change, call, record, found = pending
        for sentence in SENTENCE.split(step.output_text[:8000]):
            if not charge.search(sentence) or _NOT_DONE.search(sentence):
                continue
            told = []
            for match in value_pattern.finditer(sentence):
                values = numbers(match.group())
                if len(values) == 1:
                    told.append((match.group().strip(), next(iter(values))))
            # A sentence naming several amounts (a split payment) contradicts the result only
            # if none of them is what the result shows.
            if not told or any(value in found or value == 0 for _, value in told):
                continue
            amount, value = told[0]
            shown = ", ".join(f"{v:g}" for v in sorted(found)[:8])
            return emit(
                step,
                "report_contradicts_result",
                0.75,
                f"the model told {amount} ({short(sentence.strip(), 140)!r}) after {call}, "
                f"whose result added to {record} items holding {shown}, not {amount}",
                [change, step],
                {
                    "said": short(sentence.strip()),
                    "told": value,
                    "call": call,
                    "record": record,
                    "result_values": sorted(found)[:20],
                },
                run,
            )
        return []


def list_items(record: dict[str, Any]) -> frozenset[str]:
    """The objects in a record's top-level lists, each as canonical JSON."""
    out: set[str] = set()
    for value in record.values():
        if isinstance(value, list):
            for item in value[:256]:
                if isinstance(item, dict):
                    out.add(json.dumps(item, sort_keys=True))
    return frozenset(out)
