"""FM-1.1's rule `change_to_past_resource`: a change to something that has already taken place.

`change_to_past_resource`: instructions may state the current time ("The current time is
2024-05-15 15:00:00": `current_time_pattern`, its first ISO date). A call names a resource by
its arguments (`get_booking({"booking_id": "B-12"})`), and its result carries the resource's
scheduled dates: the values of keys such as `date`, `start_date` or `scheduled_at`
(`schedule_key_pattern`; birth, creation and update stamps are not schedules). When a change
of the same kind of resource (a noun of the tool names after the verb: `cancel_booking`)
names a resource whose latest scheduled date, as last read, is before the current day, what
it changes is over: a trip already flown, a maintenance window already closed, a shift
already worked. The watch keeps the latest date per resource and the changes that named one;
the instructions are read at close, when they are known.

Fires: under "The current time is 2025-03-10 09:00 UTC.", `get_maintenance_window({"window_id":
"MW-2207"})` returns slots with `start_date` 2025-03-01 and `end_date` 2025-03-02, the user says
"Yes, cancel it.", and the agent calls `cancel_maintenance_window({"window_id": "MW-2207"})`.

Near miss: the window's slots lie after 2025-03-10; only its `created_at` and its owner's
`birth_date` are in the past (no schedule); instructions that do not say what time it is; a
new booking for a customer whose past visits are dated (another kind of resource).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from mast_otel.processors.classify import name_words
from mast_otel.processors.detectors.task_specification.context import TaskSpecificationContext
from mast_otel.processors.model import StepRef

_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
# Resources remembered per run, characters of a result parsed, and values looked at per
# result (bounds on memory and time).
MAX_RESOURCES = 512
_MAX_RESULT = 200_000
_MAX_VALUES = 2000


@dataclass(slots=True)
class HeldChange:
    ref: StepRef
    call: str
    resource: str
    latest: str


def identifiers(arguments: str) -> list[str]:
    """The string values of a call's top-level arguments: the names of what it reads or
    changes."""
    if not arguments.lstrip().startswith("{"):
        return []
    try:
        parsed = json.loads(arguments)
    except (ValueError, RecursionError):
        return []
    if not isinstance(parsed, dict):
        return []
    return [v for v in list(parsed.values())[:32] if isinstance(v, str) and 3 <= len(v) <= 200]


class PastWatch:
    """The latest scheduled date of each resource read, and the changes that named one, to
    check at close against the current time the instructions state."""

    __slots__ = ("changes", "keys", "latest", "limit", "now")

    def __init__(self, context: TaskSpecificationContext) -> None:
        self.now = context.current_time
        self.keys = context.schedule_key
        self.limit = context.config.max_findings_per_run
        # Per resource name: its latest scheduled date and the read tool's nouns.
        self.latest: dict[str, tuple[str, frozenset[str]]] = {}
        self.changes: list[HeldChange] = []

    def read(self, tool_name: str, arguments: str, result: str) -> None:
        """A call's result: the latest scheduled date of the resource its arguments name."""
        if self.now is None or len(result) > _MAX_RESULT or not result.lstrip().startswith("{"):
            return
        names = identifiers(arguments)
        if not names:
            return
        try:
            parsed = json.loads(result)
        except (ValueError, RecursionError):
            return
        dates: list[str] = []
        self._dates(parsed, dates, [0])
        if not dates:
            return  # a result without a schedule (an acknowledgement) leaves what was read
        nouns = frozenset(name_words(tool_name)[1:])
        for name in names:
            if name in self.latest or len(self.latest) < MAX_RESOURCES:
                self.latest[name] = (max(dates), nouns)

    def _dates(self, value: Any, out: list[str], seen: list[int]) -> None:
        if seen[0] > _MAX_VALUES:
            return
        seen[0] += 1
        if isinstance(value, dict):
            for key, item in value.items():
                if isinstance(item, str):
                    found = _ISO_DATE.match(item)
                    if found and self.keys.search(str(key)):
                        out.append(found.group(0))
                else:
                    self._dates(item, out, seen)
        elif isinstance(value, list):
            for item in value:
                self._dates(item, out, seen)

    def change(self, ref: StepRef, tool_name: str, call: str, arguments: str) -> None:
        """A change: held when it names a resource a read of the same kind (a noun the tool
        names share: `get_booking` and `cancel_booking`) dated."""
        if self.now is None or len(self.changes) >= self.limit:
            return
        nouns = set(name_words(tool_name)[1:])
        for name in identifiers(arguments):
            latest, read_nouns = self.latest.get(name, ("", frozenset()))
            if latest and nouns & read_nouns:
                self.changes.append(HeldChange(ref, call, name, latest))
                return

    def past(self, instructions: str) -> list[tuple[StepRef, str, dict[str, Any]]]:
        """Each held change whose resource's latest date is before the instructions' current
        day: (where, why, values)."""
        if self.now is None or not self.changes or not instructions:
            return []
        found = self.now.search(instructions[:100_000])
        day = _ISO_DATE.search(found.group(0)) if found else None
        if found is None or day is None:
            return []
        today, out = day.group(0), []
        for gone in self.changes:
            if gone.latest < today:
                why = f"{gone.call} changes {gone.resource}, whose scheduled dates as last read "
                why += f"end on {gone.latest}, before the current day the instructions state "
                why += f"({today}): it has already taken place"
                values = {"call": gone.call, "resource": gone.resource, "latest": gone.latest}
                out.append((gone.ref, why, values | {"instruction": found.group(0)}))
        return out
