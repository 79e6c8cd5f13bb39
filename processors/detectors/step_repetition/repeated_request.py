"""FM-1.3's rule `repeated_request`: the agent asks the user for the same identifier, turn
after turn, and never tries another way.

`repeated_request`: the agent asks the user for the same identifier (a "reservation ID", a
"ticket number": `request_pattern`) in `request_min_turns` of its own turns in a row (0 turns
the rule off) with no tool call between them, and the run ends there: the same request over
and over, never another way to the record (looking it up by what the user did give). A tool
call ends the stretch, and so does a turn that does not ask for it again before the count is
made; naming it inside a condition on the user's side ("once you have the ticket number, let
me know") is waiting, not asking, and naming it with its value ("ticket number INC-20431") is
telling, not asking. Decided at close, at the turn that completed the count.

Fires: a helpdesk agent answers "I don't have the ticket number, but you have my email" and
"Can't you look it up by my email?" with "To go on I need the ticket number", "I still need
the ticket number to reset the VPN token", "Take your time to find the ticket number; I will
be here", after first asking "Could you give me the ticket number of your earlier request?",
and the run ends: four turns asking for "ticket number".

Near miss: the same turns, but the user finds "INC-20431" and the agent calls `get_ticket`
(the tool call ends the stretch); three such turns (below four); two requests, then "Once you
have the ticket number, let me know and I will reset the VPN token", then two more (the wait
breaks the row); "Your ticket number INC-20430 is open; anything else?" four times (each names
the value).
"""

from __future__ import annotations

import re

from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.step_repetition.context import StepRepetitionContext
from mast_otel.processors.model import Finding, Step, StepRef
from mast_otel.processors.run import Run

# A value right after the thing named ("flight number HAT266", "ticket id: 4521").
_GIVEN_VALUE = re.compile(r"[\s:*#'\"`(]{1,6}[a-z0-9_.@-]*\d", re.IGNORECASE)
# The thing named inside a condition on the user's side ("once you have the ticket number",
# "when you find it", "if you can locate the order id"): waiting for it, not asking for it.
_CONDITION = re.compile(
    r"\b(?:once|when|whenever|if|after|as soon as)\s+you\b[^.!?;]*$", re.IGNORECASE
)


def _waiting(text: str, start: int) -> bool:
    """Whether the mention at `start` sits in a condition on the user's side."""
    return _CONDITION.search(text, max(0, start - 80), start) is not None


class RepeatedRequest:
    """The identifiers the agent asked the user for since the last tool call, with the turns
    that asked, and those already reported."""

    __slots__ = ("config", "report", "reported", "request", "requests", "words")

    def __init__(self, context: StepRepetitionContext) -> None:
        self.config = context.config
        self.report = context.report
        self.request = context.request
        self.requests: dict[str, list[StepRef]] = {}
        self.reported: set[str] = set()
        # The words of the turn that completed each count, for the message.
        self.words: dict[str, str] = {}

    def tool_called(self) -> None:
        """A tool call: the stretch of requests ends."""
        self.requests.clear()
        self.words.clear()

    def agent_turn(self, step: Step, run: Run) -> None:
        """An agent turn that speaks to the user (no tool call) asking for identifiers."""
        needed = self.config.request_min_turns
        if not needed or step.tool_calls or not step.output_text:
            return
        text = step.output_text[:4000]
        asked = {
            " ".join(m.group(1).lower().replace("_", " ").replace("-", " ").split())
            for m in self.request.finditer(text)
            # "reservation ID UM3OG5": the agent names the value, it does not ask for it.
            if not _GIVEN_VALUE.match(text, m.end())
            # "Once you have the reservation ID, let me know": the agent waits, it does not ask.
            and not _waiting(text, m.start())
        }
        # A request counts in a row: a turn of the agent that does not ask for it again ends
        # the stretch (the agent moved on, or only waits for it); a stretch that already made
        # the count stands until a tool call.
        for item in [
            i for i, turns in self.requests.items() if i not in asked and len(turns) < needed
        ]:
            del self.requests[item]
            self.words.pop(item, None)
        ref = run.ref(step)
        for item in sorted(asked):
            turns = self.requests.setdefault(item, [])
            if len(turns) < needed:
                turns.append(ref)
                if len(turns) == needed:
                    self.words[item] = short(text, 240)
        if len(self.requests) > 64:
            self.requests = {k: v for k, v in self.requests.items() if len(v) > 1}

    def close(self, run: Run) -> list[Finding]:
        """Requests still unanswered when the run ends: the stretch since the last tool call
        asked for the same identifier `request_min_turns` times and nothing came of it."""
        needed = self.config.request_min_turns
        findings: list[Finding] = []
        for item, turns in sorted(self.requests.items()):
            if needed and len(turns) >= needed and item not in self.reported:
                self.reported.add(item)
                findings.append(self._finding(item, turns, run))
        return findings

    def _finding(self, item: str, turns: list[StepRef], run: Run) -> Finding:
        last = turns[-1]
        words = self.words.get(item, "")
        return self.report.finding(
            at=last,
            rule="repeated_request",
            confidence=0.7,
            message=(
                f"the agent asked the user for the {item} in {len(turns)} turns in a row with "
                f"no tool call between them and the run ended there, never trying another "
                f"way: "
                f"{short(words, 120)!r}"
            ),
            evidence=turns,
            values={
                "asked_for": item,
                "turns": len(turns),
                "threshold": self.config.request_min_turns,
                "last_turn": words,
            },
            run=run,
        )
