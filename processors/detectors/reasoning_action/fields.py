"""FM-2.6 reasoning-action mismatch: a report of a change that its result belies, field by field.

- `report_contradicts_change`: a successful change sets a field (a string argument whose name
  the change's result, a JSON object, holds too), and the model's first words after it tell
  the user a value of that field the result does not show:
  - the call asked `cabin: economy`, the result shows `cabin: basic_economy`, and the model
    names the field and tells "economy", never "basic economy": it reports what it asked
    for, not what happened;
  - or the model says the field was "upgraded to" / "set to" (`changed_to_pattern`) a value
    the run knows for that field (a value the field held in some call or result, or a key
    beside such a value in a result's object: {"economy": 120, "business": 300}) that is not
    the one the result shows.
  Fires: `update_ticket(ticket_id="T-31", priority="urgent")` whose result shows priority
  "high", then "Done: T-31 priority is now Urgent."; after `get_plans` listed the tiers
  basic, pro and enterprise, `update_subscription(tier="pro")` whose result shows pro, then
  "SUB-4 has been upgraded to Enterprise.".
  Near miss: "Done: T-31 priority is now high (urgent is reserved for outages)." tells what
  the result shows; "Done: T-31 is now urgent." names no field; "If approved, the priority
  would be urgent." tells what would happen, no report.

Several changes may come before the model speaks (a new flight, then bags, on one record):
each field set stays to be reported, and a later change of the same record (its argument
named *id and the result repeating the same value) updates what the result shows; a later
change that sets the same field again replaces it.

Sentences about what would or will happen are no report (`_NOT_DONE`)."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from mast_otel.processors.detectors.base import json_doc, short
from mast_otel.processors.detectors.reasoning_action.context import ReasoningActionContext
from mast_otel.processors.detectors.reasoning_common import SENTENCE, Emit
from mast_otel.processors.model import Finding, Step, StepRef
from mast_otel.processors.run import Run

_WORD = re.compile(r"[a-z]{3,}")
_SEPARATORS = re.compile(r"[\s_\-]+")
# A sentence about what is still to happen or might ("May 19" is a date, not a maybe).
_NOT_DONE = re.compile(
    r"\b(will|would|can|could|once|if|when|should|might|unless)\b|\bmay\b(?!\s+\d)", re.IGNORECASE
)
_MAX_NODES = 2000
# Fields set by the changes since the model last spoke, kept to be reported (a bound).
_MAX_PENDING = 16


def norm(value: str) -> str:
    """A field's value as a sentence writes it: "basic_economy" is "basic economy"."""
    return " ".join(_SEPARATORS.split(value.strip().lower()))


# A result's keys and short values recur across results and runs: normalized once.
_norm_short = lru_cache(maxsize=4096)(norm)


class Fields:
    """One run's known values per field name, the key groups of results' objects, and the
    fields the successful changes since the model last spoke set: [_Set]."""

    __slots__ = ("groups", "pending", "rules", "size", "values")

    def __init__(self, context: ReasoningActionContext) -> None:
        self.rules = context.fields
        self.values: dict[str, set[str]] = {}
        self.groups: set[frozenset[str]] = set()
        self.size = 0
        self.pending: list[_Set] = []

    def tool(self, step: Step, change: bool, run: Run) -> None:
        """Learn the fields' values of a call and its result; after a change, what it set."""
        arguments = json_doc(step.tool_arguments)
        result = None if step.failed else json_doc(step.tool_result)
        self._learn(arguments)
        self._learn(result)
        if not change or not isinstance(arguments, dict) or not isinstance(result, dict):
            return
        limit = self.rules.config.max_field_value_length
        fields = []
        for key, asked in arguments.items():
            shown = result.get(key)
            if not (isinstance(asked, str) and isinstance(shown, str)):
                continue
            if not (0 < len(asked) <= limit and 0 < len(shown) <= limit):
                continue
            if not re.search(r"[a-zA-Z]", asked):
                continue
            fields.append((str(key), norm(asked), norm(shown)))
        if not fields:
            return
        call = f"{step.tool_name}({short(step.tool_arguments, 160)})"
        record = frozenset((f, a) for f, a, s in fields if a == s and f.lower().endswith("id"))
        setting = {f for f, _, _ in fields}
        kept = []
        for one in self.pending:
            if one.record & record:
                if one.field in setting:
                    continue
                now = result.get(one.field)
                if isinstance(now, str):
                    one.shown = norm(now)
            kept.append(one)
        ref = run.ref(step)
        kept.extend(_Set(ref, call, record, f, a, s) for f, a, s in fields)
        self.pending = kept[-_MAX_PENDING:]

    def _learn(self, doc: Any) -> None:
        if doc is None or self.size >= self.rules.config.max_field_values:
            return
        limit = self.rules.config.max_field_value_length
        todo, seen = [doc], 0
        while todo and seen < _MAX_NODES:
            node = todo.pop()
            seen += 1
            if isinstance(node, list):
                todo.extend(node[:256])
            elif isinstance(node, dict):
                if 2 <= len(node) <= 16:
                    self.groups.add(frozenset([_norm_short(str(k)) for k in node]))
                for key, value in node.items():
                    if isinstance(value, str) and 0 < len(value) <= limit:
                        known = self.values.setdefault(str(key), set())
                        normed = _norm_short(value)
                        if normed not in known:
                            known.add(normed)
                            self.size += 1
                    elif isinstance(value, dict | list):
                        todo.append(value)

    def domain(self, field: str) -> set[str]:
        """The values the run knows for `field`: its values, and the keys beside them."""
        known = set(self.values.get(field, ()))
        return known.union(*(g for g in self.groups if g & known)) if known else known

    def model(self, step: Step, run: Run, emit: Emit) -> list[Finding]:
        """The model's first words after a change that set fields."""
        pending = self.pending
        if not pending or not step.output_text:
            return []
        self.pending = []
        for sentence in SENTENCE.split(step.output_text[:8000]):
            if _NOT_DONE.search(sentence):
                continue
            lowered = norm(sentence)
            for one in pending:
                change, call, field, shown = one.change, one.call, one.field, one.shown
                told = self._told(lowered, field, one.asked, shown)
                if told:
                    return emit(
                        step,
                        "report_contradicts_change",
                        0.75,
                        f"the model told {field} {told!r} ({short(sentence.strip(), 140)!r}) "
                        f"after {call}, whose result shows {field} {shown!r}",
                        [change, step],
                        {
                            "said": short(sentence.strip()),
                            "field": field,
                            "told": told,
                            "shown": shown,
                            "call": call,
                        },
                        run,
                    )
        return []

    def _told(self, sentence: str, field: str, asked: str, shown: str) -> str:
        """The value of `field` the sentence tells that the result does not show, or ""."""
        if has(sentence, shown):
            return ""
        names = {w for w in _WORD.findall(field.lower()) if w not in ("ids", "the")}
        if asked != shown and names & set(_WORD.findall(sentence)) and has(sentence, asked):
            return asked
        pattern = self.rules.changed_to
        if pattern is None:
            return ""
        domain = sorted(self.domain(field) - {shown}, key=len, reverse=True)
        for match in pattern.finditer(sentence):
            rest = sentence[match.end() :]
            for value in domain:
                if value and re.match(rf"{re.escape(value)}\b", rest):
                    return value
        return ""


def has(sentence: str, value: str) -> bool:
    """`value` (normalised) is in `sentence` as words of its own."""
    return bool(value) and re.search(rf"\b{re.escape(value)}\b", sentence) is not None


class _Set:
    """A field a change set: the change, its call as a finding quotes it, the record's ids
    (the fields whose value the result repeats), the field, the value asked, the value the
    record's latest result shows."""

    __slots__ = ("asked", "call", "change", "field", "record", "shown")

    def __init__(
        self,
        change: StepRef,
        call: str,
        record: frozenset[tuple[str, str]],
        field: str,
        asked: str,
        shown: str,
    ) -> None:
        self.change = change
        self.call = call
        self.record = record
        self.field = field
        self.asked = asked
        self.shown = shown
