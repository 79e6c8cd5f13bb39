"""FM-1.1's rule `change_with_unlisted_detail`: a confirmed change that carries a detail the
conversation never named.

`change_with_unlisted_detail`: under instructions that require listing a change's details and
the user's explicit yes, the user can only agree to what was put to them. An identifier among a
change's arguments (a value of `detail_value_pattern`: a name and a number, such as
`credit_card_4938634`; not a free-text argument, nor one of a set of its kind such as a trip's
flights) that no turn of the conversation named before the change (the user's or the agent's
words: the identifier, its digits, a value of the result object that holds it such as a card's
last four digits, or its kind when tool results offered only one of that kind or showed nothing
else that would name it) was not among the details the user said yes to. An identifier a read
looked up before (the customer, the order) is the change's context, not such a detail. Nor is
one the user's own words chose: the changed record's own value when the user asked to keep it
("refund to the original payment method": `detail_reuse_pattern`, read as FM-2.2 reads it), or
said yes to the agent's proposal that put it so ("your original payment method will be used"),
or when the change's result shows the record holding it as before (nothing charged or moved:
`detail_unchanged`); nor one of the kind the user's yes itself named ("yes, and use a gift
card"): which one of several that was is a choice made without asking (FM-2.2's
`unasked_choice`), not a detail kept from the user. The instructions are read at close
(`confirmation_required_pattern`), and only in a conversation
(`confirmation_needs_conversation`); a change the user did not confirm at all is
`change_without_confirmation` instead.

Fires: a subscription agent reads an account with two cards (`card_40021`, a visa ending 4242,
and `card_77310`, an amex ending 0005), proposes "Pro costs $30 a month more. Shall I upgrade
plan pro now?", the customer says "Yes, go ahead.", and it calls `update_subscription` with
`payment_method: card_77310`: the card was never named.

Near miss: "Pro is $30 more, on your amex ending 0005. OK?" (named by a value of its object);
the customer's "Yes, charge my card ending 0005."; "on your card" with one card on the account;
"Yes, and charge it to the same payment method as the order." for the order's own card.
"""

from __future__ import annotations

from typing import Any

from mast_otel.processors.detectors.clarification_offers import (
    DIGITS,
    kind_of,
    kind_words,
    objects_holding,
    offers_in,
    string_arguments,
    tokens,
)
from mast_otel.processors.detectors.clarification_records import TargetRecords
from mast_otel.processors.detectors.task_specification.context import TaskSpecificationContext

# Tokens and identifiers remembered per run (a bound on memory; past it, nothing is learnt).
MAX_WORDS = 50_000


class DetailWatch:
    """What the conversation named, and what tool results offered, to tell the details of a
    change that were never put to the user."""

    __slots__ = ("aliases", "choice", "free", "kinds", "offered", "records", "said", "yes_kinds")

    def __init__(self, context: TaskSpecificationContext) -> None:
        self.choice = choice = context.detail_value
        self.free = context.free_argument
        # The records results returned and the user's asks to keep their values; the kinds
        # the user's last turn (the yes a change follows) named.
        unchanged = context.config.detail_unchanged
        self.records = TargetRecords(choice, context.detail_reuse, unchanged)
        self.yes_kinds: set[str] = set()
        # Tokens of the conversation, the kinds its words name, the identifiers results
        # offered by kind, and the other values of the object holding each.
        self.said: set[str] = set()
        self.kinds: set[str] = set()
        self.offered: dict[str, set[str]] = {}
        self.aliases: dict[str, set[str]] = {}

    def spoken(self, text: str, agent: bool = False) -> None:
        if self.choice is not None and text and len(self.said) < MAX_WORDS:
            self.said |= tokens(text)
            self.kinds |= set(kind_words(text))
        if agent:
            self.records.agent_said(text)

    def user_turn(self, text: str) -> None:
        self.spoken(text)
        if self.choice is not None:
            self.yes_kinds = set(kind_words(text)) if text else set()
            self.records.user_turn(text)

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
        self.records.learn(text)

    def unlisted(
        self, arguments: str, result: str = "", failed: bool = False
    ) -> tuple[str, str] | None:
        """The first (argument, identifier) of a change that the conversation never named;
        then the change's result (the record as it now is) is learnt."""
        found = self._unlisted(arguments, result)
        if not failed:
            self.records.learn(result)
        return found

    def _unlisted(self, arguments: str, result: str) -> tuple[str, str] | None:
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
            if self.records.kept(pairs, key, value, result):
                continue  # the record's own value, kept as the user asked or left as it was
            kind = kind_of(choice, lowered)
            named = kind_words(kind)
            if named and all(w in self.yes_kinds for w in named):
                continue  # the user's yes named its kind: which one is a choice (FM-2.2)
            only = self.offered.get(kind, set()) <= {lowered}
            unknown = lowered not in self.aliases  # what would name it ("ending in 7334")?
            if named and all(w in self.kinds for w in named) and (only or unknown):
                continue  # "the gift card", the only one there is, or one we cannot tell apart
            return key, value
        return None


def unlisted_detail(call: str, found: tuple[str, str], said: str) -> tuple[str, dict[str, Any]]:
    """The message and values of a `change_with_unlisted_detail` finding: `call` carries the
    (argument, identifier) `found`, and `said` is the user's last turn."""
    key, value = found
    detail = f"{key}={value}"
    message = f"{call} carries {detail}, which no turn named before the user's yes "
    message += f"({said!r}); the instructions require listing a change's details first"
    return message, {"call": call, "detail": detail, "last_user_turn": said}
