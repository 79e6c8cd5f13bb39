"""FM-1.1's `offer_before_request` watch, and the sentence around a match that its findings
quote.

Instructions may forbid offering something (compensation, a voucher, a discount) unless the
user asks for it ("do not proactively offer these unless the user explicitly asks"). The watch
follows the conversation: the user's turns (has the user asked for such a thing yet?) and the
agent's words to the user (does it offer one?), and gives the agent's first offer made before
any request; the detector holds it for that clause of the instructions, known at close.
"""

from __future__ import annotations

import re

# Words before an offer that take it back ("I cannot offer", "unable to offer").
_NEGATION = re.compile(r"\b(not|no|cannot|can't|unable|won't|never|nor)\b[^.!?\n]{0,40}$", re.I)


def optional(pattern: str) -> re.Pattern[str] | None:
    """A case-insensitive pattern, or None for "" (its rule turned off)."""
    return re.compile(pattern, re.IGNORECASE) if pattern else None


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

    def __init__(self, offer: re.Pattern[str] | None, request: re.Pattern[str]) -> None:
        self.offer = offer
        self.request = request
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
