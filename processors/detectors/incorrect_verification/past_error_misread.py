"""FM-3.3's `past_error_misread`: an error about the past read as something else.

`past_error_misread`: a call fails (an error status, or a result matching
`failure_result_pattern`) and its error names a date (ISO, YYYY-MM-DD) that lies before the
current date the run's own instructions give (`current_date_pattern`) and within
`past_window_days` of it: the call asked for something already over (a flight that has flown,
an appointment slot gone by, a maintenance window closed). The agent's next words to the user
name the error's subject (its date, or an identifier the error holds, such as a flight or slot
number) and say nothing of it being past (`past_error_excuse_pattern`: "already departed",
"in the past", "has passed"): it read the error and told the user another reason, usually that
the thing is unavailable, often offering alternatives on that same date. Decided when the run
closes (the current date comes with the instructions); one finding per run.

    Fires: a clinic's instructions say "The current date is 2025-03-10."; `update_appointment`
    fails with "Error: slot DR-SLOT-77 not available on 2025-03-07"; the agent says "It seems
    slot DR-SLOT-77 on March 7 is no longer available. Would you like me to look for other
    slots with Dr. Ruiz on that day?"
    Near miss: "That appointment date (2025-03-07) has passed; shall I pick a new one?" (it
    says why); an error dated 2025-03-12 (not past: unavailable is the reason); an error
    naming no date; a reply about something else ("Let me look at your other appointments
    first.").
"""

from __future__ import annotations

import re

from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.incorrect_verification.context import (
    IncorrectVerificationContext,
)
from mast_otel.processors.detectors.run_dates import days_between, instructions_date
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import Run

_NEUTRAL = ActionKind.NEUTRAL
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL
_DATE = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")
# An identifier in the error: letters and digits together (HAT030, SLOT-12, INC4411).
_IDENT = re.compile(r"\b(?=[\w-]*\d)(?=[\w-]*[a-z])[a-z][\w-]{2,}\b", re.IGNORECASE)
_MONTHS: tuple[str, ...] = ("january", "february", "march", "april", "may", "june", "july")
_MONTHS += ("august", "september", "october", "november", "december")
# The error's text read, and the errors awaiting the agent's words, per run.
_ERROR_CHARS = 1_000
_MAX_CANDIDATES = 8


class PastErrors:
    """Per run: failed calls whose error names a date, and what the agent said next."""

    __slots__ = ("candidates", "context", "excuse", "pending")

    def __init__(self, context: IncorrectVerificationContext) -> None:
        self.context = context
        # Read at every step: an alias of the context's.
        self.excuse = context.past_error_excuse
        # The failed call waiting for the agent's next words: (call, its text, error, dates).
        self.pending: tuple[StepRef, str, str, tuple[str, ...]] | None = None
        # (call, its text, error, dates, the reply, its text)
        self.candidates: list[tuple[StepRef, str, str, tuple[str, ...], StepRef, str]] = []

    def observe(self, step: Step, run: Run) -> None:
        if self.excuse is None or self.context.current_date is None:
            return
        if step.kind is _TOOL and step.tool_name:
            result = (step.tool_result or step.error)[:_ERROR_CHARS]
            failure = self.context.failure_result
            if step.failed or (failure is not None and failure.search(result)):
                dates = tuple(dict.fromkeys(m.group() for m in _DATE.finditer(result)))
                if dates:
                    call = f"{step.tool_name}({short(step.tool_arguments, 160)})"
                    self.pending = (run.ref(step), call, result, dates)
            elif self.pending is not None:
                # A call that worked since (a scratchpad aside): the next words may be of it.
                kind = self.context.classifier.classify(step.tool_name, step.tool_arguments).kind
                if kind is not _NEUTRAL:
                    self.pending = None
        elif step.kind is _LLM and step.output_text and self.pending is not None:
            call_ref, call, error, dates = self.pending
            self.pending = None
            text = step.output_text[:4_000]
            if (
                len(self.candidates) < _MAX_CANDIDATES
                and _names_subject(text, error, dates)
                and not self.excuse.search(text)
            ):
                self.candidates.append((call_ref, call, error, dates, run.ref(step), text))

    def close(self, run: Run) -> list[Finding]:
        context = self.context
        today = instructions_date(context.current_date, run) if self.candidates else None
        if today is None:
            return []
        window = context.config.past_window_days
        for call_ref, call, error, dates, reply, text in self.candidates:
            past = [d for d in dates if 0 < (days_between(d, today) or 0) <= window]
            if not past:
                continue
            said = short(text, 200)
            return [
                context.report.finding(
                    at=reply,
                    rule="past_error_misread",
                    confidence=0.7,
                    message=(
                        f"{call} failed with {short(error, 120)!r}, about {past[0]}, before "
                        f"the current date {today}; the agent told the user {said!r}, never "
                        f"saying the date is past"
                    ),
                    evidence=[call_ref, reply],
                    values={
                        "call": call,
                        "error": short(error, 200),
                        "error_date": past[0],
                        "current_date": today,
                        "said": said,
                    },
                    run=run,
                )
            ]
        return []


def _names_subject(text: str, error: str, dates: tuple[str, ...]) -> bool:
    """Whether `text` names what the error was about: one of its dates (ISO, or as month and
    day: "May 13", "13 May") or one of its identifiers."""
    lowered = text.lower()
    for day in dates:
        if day in lowered:
            return True
        if not 1 <= int(day[5:7]) <= 12:
            continue
        month, number = _MONTHS[int(day[5:7]) - 1], str(int(day[8:10]))
        if re.search(rf"\b{month}\.?\s+{number}\b|\b{number}(?:st|nd|rd|th)?\s+{month}\b", lowered):
            return True
    return any(m.group().lower() in lowered for m in _IDENT.finditer(error))
