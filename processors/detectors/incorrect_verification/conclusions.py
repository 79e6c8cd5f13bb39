"""FM-3.3's conclusions from the results read: three rules that share the reading of each call
(its kind, its result, whether it failed) and the run's findings so far.

`success_after_failed_change`: a change failed (an error status, or a result matching
`failure_result_pattern`: "Error: ...", "insufficient funds", "not allowed"), no change
succeeded since, and the model tells the user it succeeded (`success_statement_pattern`, not
negated). Decided as the run goes; once per run.

    Fires: `deploy_service {"service": "api", "env": "staging"}` returns `{"status":
    "rejected", "reason": "insufficient quota in staging"}`, and the model says "The fix has
    been deployed to staging successfully."
    Near miss: the deploy fails ("Error: registry timeout"), the model says "The deploy failed;
    retrying.", the retry returns `{"status": "live"}`, then "The fix has been deployed.": a
    change succeeded after the failure.

`identity_mismatch`: the user gave an identifier of a checkable shape (`identity_patterns`,
such as an email address), the agent looked a record up, the record holds one identifier of
that shape and it is another, and the agent's next words go on without saying so
(`mismatch_pattern`): it read the record and concluded it was the user's. As the run goes;
once per run.

    Fires: the user writes "Hi, I'm dana.k@acme.io and I want my plan upgraded.";
    `get_customer {"customer_id": "dana_k"}` returns a record whose email is dana.k@globex.com;
    the agent says "Thanks Dana, I found your account. Your plan is basic; shall I upgrade it?"
    Near miss: "The email on account dana_k does not match the one you gave me." (it noticed);
    a lookup by the user's own email returning a record that holds it.

`change_on_past_record`: a change acted on a record (an id in its arguments) that the run had
read (a read naming that id returned a JSON object holding it), and every dated item of that
record (the objects of its lists: segments, events, line items), within `past_window_days`, is
dated before the current date the run's own instructions give (`current_date_pattern` over
`mast.task.description`): the record says it is over, and the agent acted as if it were still
to come. Decided when the run closes; one finding per record, at most `max_findings_per_run`.

    Fires: a clinic's instructions say "The current date is 2025-03-10."; `get_booking
    {"booking_id": "BK-7731"}` returns sessions on 2025-03-03 and 2025-03-07; then
    `cancel_booking {"booking_id": "BK-7731"}`.
    Near miss: a session on 2025-03-12 (or today) still to come; a booking whose only date is
    the patient's birth date (no dated item within the window); instructions that give no
    date.
"""

from __future__ import annotations

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

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_MUTATING = ActionKind.MUTATING
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL
_HUMAN = StepKind.HUMAN


class Conclusions:
    """What the model concluded from results as the run went: success told after a failed
    change, a record taken for the user's though its identifier differs."""

    __slots__ = (
        "changes",
        "context",
        "failed",
        "given",
        "records",
        "reported",
        "suspect",
        "user_text",
    )

    def __init__(self, context: IncorrectVerificationContext) -> None:
        self.context = context
        self.failed: tuple[StepRef, str, str] | None = None  # (call, call text, its result)
        self.given: set[str] = set()  # identifiers the user gave, lower-cased
        # A record read whose identifier is not the user's: (lookup, given, found), until the
        # model's next words say whether it noticed.
        self.suspect: tuple[StepRef, str, str] | None = None
        self.reported: set[str] = set()
        self.user_text = ""
        # Records read by id: id -> (the read, the dates of its dated items).
        self.records: dict[str, tuple[StepRef, tuple[str, ...]]] = {}
        # Changes on records read before: (change, its call, id, the read, item dates).
        self.changes: list[tuple[StepRef, str, str, StepRef, tuple[str, ...]]] = []

    def observe(self, step: Step, run: Run) -> list[Finding]:
        if step.kind is _HUMAN:
            self._user(step.input_text or step.output_text)
        elif step.kind is _TOOL and step.tool_name:
            return self._tool(step, run)
        elif step.kind is _LLM:
            self._user(step.input_text)
            return self._model(step, run)
        return []

    def _user(self, text: str) -> None:
        if not text or text == self.user_text:
            return
        self.user_text = text
        for pattern in self.context.identities:
            self.given |= {m.group().lower().rstrip(".") for m in pattern.finditer(text)}

    def _tool(self, step: Step, run: Run) -> list[Finding]:
        context = self.context
        action = context.classifier.classify(step.tool_name, step.tool_arguments)
        result = step.tool_result or step.error
        if action.kind is _MUTATING:
            failure = context.failure_result
            if step.failed or (failure is not None and failure.search(result[:2000])):
                call = f"{step.tool_name}({short(step.tool_arguments, 160)})"
                self.failed = (run.ref(step), call, short(result, 200))
            else:
                self.failed = None
                self._change(step, run)
        elif context.current_date is not None and not step.failed:
            self._read(step, run)
        if self.given and result and self.suspect is None:
            self._identity(step, result, run)
        return []

    def _read(self, step: Step, run: Run) -> None:
        """Remember the dated items of a record a read asked for by id."""
        asked = record_asked_for(self.context.classifier, step)
        if asked is None:
            return
        record, ids = asked
        dates = _item_dates(record)
        for one in ids:
            if one in self.records or len(self.records) < self.context.config.max_tracked_records:
                if dates:
                    self.records[one] = (run.ref(step), tuple(dates))
                else:
                    self.records.pop(one, None)

    def _change(self, step: Step, run: Run) -> None:
        if len(self.changes) >= self.context.config.max_tracked_records:
            return
        for one in sorted(self.context.classifier.identifiers(step.tool_arguments)):
            if one in self.records:
                read, dates = self.records[one]
                call = f"{step.tool_name}({short(step.tool_arguments, 160)})"
                self.changes.append((run.ref(step), call, one, read, dates))

    def close(self, run: Run) -> list[Finding]:
        """`change_on_past_record`: changes on records whose items all lie before the current
        date the run's instructions give."""
        today = instructions_date(self.context.current_date, run) if self.changes else None
        if today is None:
            return []
        window = self.context.config.past_window_days
        out: list[Finding] = []
        seen: set[str] = set()
        for change, call, one, read, all_dates in self.changes:
            if one in seen or len(out) >= self.context.config.max_findings_per_run:
                continue
            # Dates long before today (a birth date, an archive date) say nothing of whether
            # the record's business is still to come.
            recent = []
            for day in all_dates:
                days = days_between(day, today)
                if days is None:
                    break
                if days <= window:
                    recent.append(day)
            else:
                if not recent or max(recent) >= today:
                    continue
                latest, count = max(recent), len(recent)
                seen.add(one)
                out.append(
                    self.context.report.finding(
                        at=change,
                        rule="change_on_past_record",
                        confidence=0.7,
                        message=(
                            f"{call} acted on {one}, whose record ({read.tool_name}) has all its "
                            f"{count} dated items before the current date the instructions give "
                            f"(latest {latest}, today {today}): the record says it is over and "
                            f"the agent acted as if it were still to come"
                        ),
                        evidence=[read, change],
                        values={
                            "call": call,
                            "record": one,
                            "latest_item_date": latest,
                            "items": count,
                            "current_date": today,
                        },
                        run=run,
                    )
                )
        return out

    def _identity(self, step: Step, result: str, run: Run) -> None:
        for pattern in self.context.identities:
            found = {m.group().lower().rstrip(".") for m in pattern.finditer(result[:20_000])}
            if len(found) != 1 or found & self.given:
                continue
            looked_up = {m.group().lower() for m in pattern.finditer(step.tool_arguments)}
            if looked_up & found:
                continue
            given = sorted(self.given)[0]
            self.suspect = (run.ref(step), given, next(iter(found)))
            return

    def _model(self, step: Step, run: Run) -> list[Finding]:
        out: list[Finding] = []
        text = step.output_text
        context = self.context
        if self.suspect is not None and (text or step.tool_calls):
            lookup, given, found = self.suspect
            self.suspect = None
            if not context.mismatch.search(text) and "identity_mismatch" not in self.reported:
                self.reported.add("identity_mismatch")
                out.append(
                    context.report.finding(
                        at=lookup,
                        rule="identity_mismatch",
                        confidence=0.7,
                        message=(
                            f"{lookup.tool_name} returned a record for {found}, the user gave "
                            f"{given}, and the agent went on as if it were the user's"
                        ),
                        evidence=[lookup, step],
                        values={"given": given, "found": found, "said": short(text)},
                        run=run,
                    )
                )
        if (
            self.failed is not None
            and text
            and "success_after_failed_change" not in self.reported
            and context.success_statement.search(text)
            and not context.signals.negation.found(text)
        ):
            ref, call, result = self.failed
            self.reported.add("success_after_failed_change")
            out.append(
                context.report.finding(
                    at=step,
                    rule="success_after_failed_change",
                    confidence=0.8,
                    message=(
                        f"{call} failed ({result!r}) and the model told the user it succeeded: "
                        f"{short(text, 160)!r}"
                    ),
                    evidence=[ref, step],
                    values={"call": call, "result": result, "said": short(text)},
                    run=run,
                )
            )
        return out


_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}(?:$|[T ]\d)")


def _item_dates(record: dict[str, Any]) -> list[str]:
    """The date (YYYY-MM-DD) of each dated item of a record: the latest date among the string
    fields of each object in its top-level lists (a reservation's flights, an order's
    shipments, a ticket's events). The record's own fields (when it was created) are not
    items."""
    dates: list[str] = []
    for value in record.values():
        if not isinstance(value, list):
            continue
        for item in value[:256]:
            if not isinstance(item, dict):
                continue
            held = [v[:10] for v in item.values() if isinstance(v, str) and _ISO_DATE.match(v)]
            if held:
                dates.append(max(held))
    return dates
