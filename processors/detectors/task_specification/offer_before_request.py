"""FM-1.1's rule `offer_before_request`, and the sentence around a match that FM-1.1's
findings quote.

`offer_before_request`: the instructions forbid offering something (compensation, a voucher, a
discount) unless the user asks for it (`no_proactive_offer_pattern`: "do not proactively offer
these unless the user explicitly asks"), and the agent offers it in its words to the user
(`offer_pattern`; not when negated: "I cannot offer ...") before any user turn asked for one
(`offer_request_pattern`). The watch follows the conversation, the user's turns (has the user
asked for such a thing yet?) and the agent's words (does it offer one?), and gives the agent's
first offer made before any request, once a run; the detector holds it for that clause of the
instructions, known at close.

Fires: under "Do not proactively offer credits: only when the customer explicitly asks for
compensation", the customer reports a day-long outage and the agent answers "Since the outage
lasted 30 hours, I can offer you a service credit of one day's fee. Would you like that?".
Telling the customer "your organisation is eligible for a service voucher" is an offer too.

Near miss: the customer said "I want compensation." before the same offer (it answers a
request); "I'm sorry, I cannot offer a credit for outages shorter than two days." (negated);
"Could you provide the credit card on file?" (a credit card is no credit); the same offer
under instructions that do not forbid it.
"""

from __future__ import annotations

import re

from mast_otel.processors.detectors.task_specification.context import TaskSpecificationContext

# Words before an offer that take it back ("I cannot offer", "unable to offer").
_NEGATION = re.compile(r"\b(not|no|cannot|can't|unable|won't|never|nor)\b[^.!?\n]{0,40}$", re.I)


def sentence(text: str, found: re.Match[str], before: int = 60, after: int = 100) -> str:
    """The words around a match, within its sentence (or line), for the evidence."""
    start = max(
        text.rfind(". ", 0, found.start()) + 2,
        text.rfind("\n", 0, found.start()) + 1,
        found.start() - before,
        0,
    )
    ends = [i for i in (text.find(". ", found.end()), text.find("\n", found.end())) if i >= 0]
    end = min([*ends, found.end() + after, len(text)])
    cut = text[start:end].strip()
    if start > 0 and text[start - 1] not in ".\n ":
        cut = "…" + cut
    if end < len(text) and text[end] not in ".\n":
        cut += "…"
    return cut


class OfferWatch:
    """Whether the agent offers what only a request may bring, before the user asks for it."""

    __slots__ = ("asked", "done", "offer", "request")

    def __init__(self, context: TaskSpecificationContext) -> None:
        offer = context.offer if context.no_proactive_offer else None
        self.offer = offer
        self.request = context.offer_request
        # Has the user asked for such a thing; has the watch already given its one offer?
        self.asked = False
        self.done = offer is None

    def user_turn(self, text: str) -> None:
        if not self.asked and self.request.search(text):
            self.asked = True

    def agent_said(self, text: str) -> str:
        """The agent's first offer before any request (the sentence that makes it), once."""
        if self.done or self.asked or self.offer is None:
            return ""
        for found in self.offer.finditer(text):
            line_start = max(text.rfind(". ", 0, found.start()), text.rfind("\n", 0, found.start()))
            if _NEGATION.search(text[line_start + 1 : found.start()]):
                continue
            self.done = True
            return sentence(text, found)
        return ""

    @staticmethod
    def message(made: str) -> str:
        """What an `offer_before_request` finding says, the offer quoted."""
        return (
            f"the agent offered {made!r} before the user asked for anything of the kind; the "
            "instructions forbid offering it unprompted"
        )
