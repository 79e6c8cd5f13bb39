"""FM-1.1's `change_with_unlisted_detail` watch: a confirmed change that carries a detail the
conversation never named.

Under instructions that require listing a change's details and the user's explicit yes, the
user can only agree to what was put to them. An identifier among a change's arguments (a value
of `detail_value_pattern`: a name and a number, such as `credit_card_4938634`; not a free-text
argument, nor one of a set of its kind such as a trip's flights) that no turn of the
conversation named before the change (the user's or the agent's words: the identifier, its
digits, a value of the result object that holds it such as a card's last four digits, or its
kind when tool results offered only one of that kind or showed nothing else that would name it)
was not among the details the user said yes to. An identifier a read looked up before (the
customer, the order) is the change's context, not such a detail.
"""

from __future__ import annotations

import re

from mast_otel.processors.detectors.clarification_offers import (
    DIGITS,
    kind_of,
    kind_words,
    objects_holding,
    offers_in,
    string_arguments,
    tokens,
)

# Tokens and identifiers remembered per run (a bound on memory; past it, nothing is learnt).
MAX_WORDS = 50_000


class DetailWatch:
    """What the conversation named, and what tool results offered, to tell the details of a
    change that were never put to the user."""

    __slots__ = ("aliases", "choice", "free", "kinds", "offered", "said")

    def __init__(self, choice: re.Pattern[str] | None, free: re.Pattern[str]) -> None:
        self.choice = choice
        self.free = free
        # Tokens of the conversation, the kinds its words name, the identifiers results
        # offered by kind, and the other values of the object holding each.
        self.said: set[str] = set()
        self.kinds: set[str] = set()
        self.offered: dict[str, set[str]] = {}
        self.aliases: dict[str, set[str]] = {}

    def spoken(self, text: str) -> None:
        if self.choice is not None and text and len(self.said) < MAX_WORDS:
            self.said |= tokens(text)
            self.kinds |= set(kind_words(text))

    def looked_up(self, arguments: str) -> None:
        """A read's arguments: the records it looked up (the customer, the order) are the
        change's context, not details to put to the user."""
        if self.choice is not None and len(self.said) < MAX_WORDS:
            self.said |= {v.lower() for _, v in string_arguments(arguments)}

    def result(self, text: str) -> None:
        choice = self.choice
        if choice is None or not text or len(self.aliases) >= MAX_WORDS:
            return
        for kind, value in offers_in(text[:100_000], choice):
            self.offered.setdefault(kind, set()).add(value)
        for value, others in objects_holding(text[:100_000], choice):
            self.aliases.setdefault(value, set()).update(others)

    def unlisted(self, arguments: str) -> tuple[str, str] | None:
        """The first (argument, identifier) of a change that the conversation never named."""
        choice = self.choice
        if choice is None:
            return None
        pairs = string_arguments(arguments)
        kinds = [kind_of(choice, v) for _, v in pairs if choice.fullmatch(v) is not None]
        for key, value in pairs:
            if self.free.search(key) or choice.fullmatch(value) is None:
                continue
            if kinds.count(kind_of(choice, value)) > 1:
                continue  # a set of them (a trip's flights) carried over, not one detail
            lowered = value.lower()
            if lowered in self.said or any(a in self.said for a in self.aliases.get(lowered, ())):
                continue
            if any(d in self.said or d[-4:] in self.said for d in DIGITS.findall(lowered)):
                continue
            kind = kind_of(choice, lowered)
            named = kind_words(kind)
            only = self.offered.get(kind, set()) <= {lowered}
            unknown = lowered not in self.aliases  # what would name it ("ending in 7334")?
            if named and all(w in self.kinds for w in named) and (only or unknown):
                continue  # "the gift card", the only one there is, or one we cannot tell apart
            return key, value
        return None
