"""FM-3.3's `window_claim_contradicts_record`: the agent says a record is within a window its own
dates say it has left.

`window_claim_contradicts_record`: the agent tells the user that something is (or was made)
within N hours or days ("it is within the 24-hour cancellation window", "the order was placed
within the last 30 days"; `window_claim_pattern`), in a reply or in its scratchpad (a
`think` call's words are its conclusions too), as a fact (no negation, condition or intention
to check in the sentence: `window_negation_pattern`; no question), and the record it speaks of
(the one its sentence names, else the one named last before it, else, in a text naming no
record, the last one read) was read by id and carries
its own dates (top-level date fields: when it was created, placed, opened) all older than that
window before the current date the run's instructions give (`current_date_pattern`), by more
than a day of margin (the instructions give a day, not an hour). Decided when the run closes;
one finding per run.

    Fires: a returns desk's instructions say "The current date is 2025-03-10."; `get_order
    {"order_id": "ORD-5512"}` returns an order placed 2025-01-20; the agent says "Order
    ORD-5512 is still within the 30-day return window." (or thinks it, in a `think` call).
    Near miss: an order placed 2025-03-01 (the claim holds); "You can return it only if it was
    placed within the last 30 days." (a condition); the same claim about an order never read.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.incorrect_verification.context import (
    IncorrectVerificationContext,
)
from mast_otel.processors.detectors.records import record_asked_for
from mast_otel.processors.detectors.run_dates import days_between, instructions_date
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import Run

_READ = ActionKind.READ
_NEUTRAL = ActionKind.NEUTRAL
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL
_ISO_DATE = re.compile(r"^(\d{4}-\d{2}-\d{2})(?:$|[T ]\d)")
_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?](?!\d)|\n|$)")
_HOURS = {"hour": 1, "day": 24, "week": 24 * 7}


def own_dates(record: dict[str, Any]) -> list[str]:
    """The record's own dates: its top-level fields holding an ISO date (YYYY-MM-DD...)."""
    out = []
    for value in record.values():
        if isinstance(value, str) and (match := _ISO_DATE.match(value)):
            out.append(match.group(1))
    return out


class WindowClaims:
    """Per run: records read by id with their own dates, and the agent's window claims."""

    __slots__ = ("claims", "context", "last", "records")

    def __init__(self, context: IncorrectVerificationContext) -> None:
        self.context = context
        # id -> (the read, the record's own dates)
        self.records: dict[str, tuple[StepRef, tuple[str, ...]]] = {}
        self.last: str | None = None
        # (the message, the sentence, hours of the window, the record's id)
        self.claims: list[tuple[StepRef, str, float, str]] = []

    def observe(self, step: Step, run: Run) -> None:
        context = self.context
        if context.window_claim is None or context.current_date is None:
            return
        limit = context.config.max_tracked_records
        if step.kind is _TOOL and step.tool_name and not step.failed:
            kind = context.classifier.classify(step.tool_name, step.tool_arguments).kind
            if kind is _NEUTRAL:
                # A scratchpad's words are the agent's own conclusions, as its replies are.
                if self.records and len(self.claims) < limit:
                    self._claim(scratchpad_text(step.tool_arguments), run.ref(step))
                return
            # A read: a change's result names the record too, but the agent spoke before it.
            if kind is not _READ:
                return
            asked = record_asked_for(context.classifier, step)
            if asked is None:
                return
            record, ids = asked
            dates = tuple(own_dates(record))
            for one in sorted(ids):
                if dates and (one in self.records or len(self.records) < limit):
                    self.records[one] = (run.ref(step), dates)
                    self.last = one
        elif step.kind is _LLM and step.output_text and self.records and len(self.claims) < limit:
            self._claim(step.output_text, run.ref(step))

    def _claim(self, text: str, ref: StepRef) -> None:
        """The window claims of `text`, each about the record its sentence names; a sentence
        naming none speaks of the record named last before it, or, in a text naming no
        record at all, of the record read last."""
        context = self.context
        assert context.window_claim is not None
        text = text[:20_000]
        lowered = text.lower()
        # Where each record read is named in the text (its first mention, by position).
        named: list[tuple[int, str]] = []
        for one in self.records:
            if one in lowered:
                mention = re.compile(rf"(?<![\w-]){re.escape(one)}(?![\w-])")
                named += [(m.start(), one) for m in mention.finditer(lowered)]
        named.sort()
        for sentence in _SENTENCE.finditer(text):
            said = sentence.group()
            if said.rstrip().endswith("?") or context.window_negation.search(said):
                continue
            match = context.window_claim.search(said)
            if match is None:
                continue
            inside = {one for at, one in named if sentence.start() <= at < sentence.end()}
            before = [one for at, one in named if at < sentence.start()]
            if len(inside) > 1:
                continue
            about = (
                inside.pop()
                if inside
                else before[-1]
                if before
                else self.last
                if not named
                else None
            )
            if about is None:
                continue
            unit = match.group(2).lower().rstrip("s")
            hours = float(match.group(1)) * _HOURS.get(unit, 24)
            if len(self.claims) >= context.config.max_tracked_records:
                return
            self.claims.append((ref, said.strip(), hours, about))

    def close(self, run: Run) -> list[Finding]:
        context = self.context
        today = instructions_date(context.current_date, run) if self.claims else None
        if today is None:
            return []
        for ref, sentence, hours, one in self.claims:
            read, dates = self.records[one]
            ages = [days_between(day, today) for day in dates]
            if any(age is None for age in ages):
                continue
            youngest = min(age for age in ages if age is not None)
            # A day of margin: the instructions give the day, the record may give the hour.
            if youngest * 24 <= hours + 24:
                continue
            said = short(sentence, 200)
            return [
                context.report.finding(
                    at=ref,
                    rule="window_claim_contradicts_record",
                    confidence=0.7,
                    message=(
                        f"the agent said {one} is within {hours:g} hours ({said!r}), but its "
                        f"record ({read.tool_name}) is dated {max(dates)}, {youngest} days "
                        f"before the current date {today}"
                    ),
                    evidence=[read, ref],
                    values={
                        "record": one,
                        "window_hours": hours,
                        "record_date": max(dates),
                        "current_date": today,
                        "said": said,
                    },
                    run=run,
                )
            ]
        return []


def scratchpad_text(arguments: str) -> str:
    """The words a scratchpad call was given: the string values of its JSON arguments (the
    arguments as they are when they are not JSON)."""
    try:
        parsed = json.loads(arguments[:20_000])
    except (ValueError, RecursionError):
        return arguments[:20_000]
    if isinstance(parsed, dict):
        return "\n".join(v for v in parsed.values() if isinstance(v, str))
    return parsed if isinstance(parsed, str) else ""
