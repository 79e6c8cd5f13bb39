"""FM-1.1's rule `change_outside_window`: a change the instructions allow only within a time
of the resource's creation, made after that time, on a resource none of their exceptions
cover.

`change_outside_window`: instructions may bound a kind of change by the resource's age ("All
orders can be cancelled within 24 hours of purchase. Otherwise, ... express orders can always
be cancelled"; `change_window_pattern`, groups `verb`, `amount` and `unit`) and state the
current time (`current_time_pattern`). A read names a resource by its arguments and returns its
record, with a creation stamp (`creation_key_pattern`). A change whose tool name holds the verb
and that names such a resource is checked at close: when the record was created more than the
window before the current time, the change is outside the window unless the record shows an
exception the clause after the window (up to the next heading) names: a field it names whose
value says yes (`"insurance": "yes"` beside "only if travel insurance is bought"), or a value
it says can always be changed (`"cabin": "business"` beside "business flights can always be
cancelled"). A run where some read shows something cancelled by the other side (a status
`cancelled`) is left alone: the instructions' other exceptions are not checked here.

Fires: under "The current time is 2025-06-02 10:00 UTC." and "Orders can be cancelled within
48 hours of purchase. Otherwise, standard orders can be cancelled only if a return guarantee
was bought, and express orders can always be cancelled.", `get_order` shows ORD-4410 created
2025-05-28T09:12:00, `"shipping": "standard"`, `"guarantee": "no"`, and the agent calls
`cancel_order({"order_id": "ORD-4410"})`. Without the read, the cancellation's own result dates
the order the same way.

Near miss: the order created 2025-06-01T11:00:00 (within 48 hours); `"guarantee": "yes"` or
`"shipping": "express"` (an exception the clause names); "within 7 days of purchase" (a
five-day-old order is inside); a change of another verb than the window names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mast_otel.processors.detectors.base import json_doc
from mast_otel.processors.detectors.task_specification.change_to_past_resource import identifiers
from mast_otel.processors.detectors.task_specification.context import TaskSpecificationContext
from mast_otel.processors.model import Step, StepRef

# Resources remembered per run and characters of a result parsed (bounds on memory and time).
MAX_RESOURCES = 256
_MAX_RESULT = 50_000
# Characters of the instructions after the window read for its exceptions.
_CLAUSE = 600
_STAMP = re.compile(r"(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}):(\d{2}))?")
_YES = frozenset({"yes", "true", "y"})
_WORD = re.compile(r"[a-z]+")
_ALWAYS = re.compile(r"((?:[a-z_-]+\s+){1,3})(?:\w+\s+)?can\s+always\s+be\b", re.IGNORECASE)
_CANCELLED_STATUS = re.compile(r'"status"\s*:\s*"cancell?ed"', re.IGNORECASE)


@dataclass(slots=True)
class HeldWindowChange:
    ref: StepRef
    tool: str
    call: str
    resource: str
    record: dict[str, str]


def _record(result: str, creation: re.Pattern[str]) -> dict[str, str] | None:
    """A result's top-level scalar fields, when it is a record with a creation stamp."""
    if len(result) > _MAX_RESULT:
        return None
    parsed = json_doc(result)
    if not isinstance(parsed, dict):
        return None
    fields = {
        str(k): str(v).lower() if isinstance(v, bool) else str(v)
        for k, v in list(parsed.items())[:64]
        if isinstance(v, (str, int, float, bool))
    }
    return fields if any(creation.search(k) for k in fields) else None


def _cancelled_by_other(result: str) -> bool:
    """A read result that shows something with a status `cancelled` (a bounded scan)."""
    head = result[:_MAX_RESULT]
    return '"status"' in head and _CANCELLED_STATUS.search(head) is not None


def _time(text: str) -> datetime | None:
    found = _STAMP.search(text)
    if found is None:
        return None
    day, hour, minute = found.groups()
    try:
        return datetime.fromisoformat(f"{day}T{hour or '00'}:{minute or '00'}")
    except ValueError:
        return None


class WindowWatch:
    """The records read per resource and the changes that named one, checked at close against
    the window the instructions give that kind of change."""

    __slots__ = ("changes", "creation", "limit", "now", "other_cancelled", "records", "window")

    def __init__(self, context: TaskSpecificationContext) -> None:
        self.now = context.current_time
        self.window = context.change_window if self.now is not None else None
        self.creation = context.creation_key
        self.limit = context.config.max_findings_per_run
        self.records: dict[str, dict[str, str]] = {}
        self.changes: list[HeldWindowChange] = []
        self.other_cancelled = False

    def read(self, step: Step) -> None:
        """A read's result: the record of the resource its arguments name."""
        if self.window is None or step.failed:
            return
        arguments, result = step.tool_arguments, step.tool_result
        self.other_cancelled = self.other_cancelled or _cancelled_by_other(result)
        record = _record(result, self.creation)
        if record is None:
            return
        for name in identifiers(arguments):
            if name in self.records or len(self.records) < MAX_RESOURCES:
                self.records[name] = record

    def change(self, ref: StepRef, step: Step, call: str) -> None:
        """A change that went through: held with the record of the resource it names, as last
        read (else as its own result returns it: a creation stamp does not change)."""
        if self.window is None or step.failed or len(self.changes) >= self.limit:
            return
        tool, arguments, result = step.tool_name, step.tool_arguments, step.tool_result
        for name in identifiers(arguments):
            record = self.records.get(name) or _record(result, self.creation)
            if record is not None:
                self.changes.append(HeldWindowChange(ref, tool, call, name, record))
                return

    def outside(self, instructions: str) -> list[tuple[StepRef, str, dict[str, Any]]]:
        """Each held change made outside the instructions' window on a resource none of its
        exceptions cover: (where, why, values)."""
        if self.window is None or not self.changes or self.other_cancelled or not instructions:
            return []
        text = instructions[:100_000]
        rule = self.window.search(text)
        stated = self.now.search(text) if self.now is not None else None
        now = _time(text[stated.start() : stated.end() + 12]) if stated else None
        if rule is None or now is None:
            return []
        verb, unit = rule.group("verb").lower(), rule.group("unit").lower()
        hours = int(rule.group("amount")) * (24 if unit.startswith("day") else 1)
        clause = text[rule.end() : rule.end() + _CLAUSE].lower().split("\n#")[0]
        words = set(_WORD.findall(clause))
        always = {w for m in _ALWAYS.finditer(clause) for w in _WORD.findall(m.group(1))}
        out = []
        for held in self.changes:
            if verb not in held.tool.lower():
                continue
            stamp = next((v for k, v in held.record.items() if self.creation.search(k)), "")
            created = _time(stamp)
            if created is None or (now - created).total_seconds() <= hours * 3600:
                continue
            if _excepted(held.record, words, always):
                continue
            age = int((now - created).total_seconds() // 3600)
            # The fields the clause names, but the resource's own name (no exception).
            shown = {
                k: v
                for k, v in held.record.items()
                if set(_WORD.findall(f"{k} {v}".lower())) & words
                and verb not in v.lower()
                and v.lower() != held.resource.lower()
            }
            why = f"{held.call} changes {held.resource}, created {stamp}, {age} h "
            why += f"before the current time the instructions state, outside their {hours}-hour "
            why += f"window ({rule.group(0)!r}), and its record shows none of the exceptions "
            why += f"they name ({', '.join(f'{k}={v!r}' for k, v in shown.items()) or 'none'})"
            values = {"call": held.call, "resource": held.resource, "hours_since": age}
            values |= {"window_hours": hours, "instruction": rule.group(0), "record": shown}
            out.append((held.ref, why, values))
        return out


def _excepted(record: dict[str, str], words: set[str], always: set[str]) -> bool:
    """The record shows an exception the clause names: a field it names that says yes, or a
    value it says can always be changed."""
    for key, value in record.items():
        low = value.lower()
        if low in _YES and set(_WORD.findall(key.lower())) & words:
            return True
        named = set(_WORD.findall(low))
        if named and named <= always:
            return True
    return False
