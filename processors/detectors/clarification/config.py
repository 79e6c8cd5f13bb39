"""FM-2.2's settings: the `detectors.clarification` section, its defaults and their checks."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mast_otel.processors.detectors.clarification_records import REUSE


@dataclass
class ClarificationConfig:
    """FM-2.2 fail to ask for clarification: a change right after an ambiguous result, or on a
    target no input named."""

    # Run this detector.
    enabled: bool = True
    # Also report changes to a resource no input named (task, user, tool results).
    check_unnamed_targets: bool = True
    # An argument value that identifies one thing among several (an id with letters and
    # digits); "" turns `unasked_choice` off. Dates and times never count.
    choice_value_pattern: str = r"\b(?P<kind>[a-z][a-z_.-]{2,40}?)[_.-]?\d{3,}\b"
    # Argument names whose values are the agent's own to make up (a summary, a note), not a
    # choice the user makes.
    free_argument_pattern: str = r"summary|note|comment|reason|message|description|title|body"
    # Identifiers listed side by side in one object of a result (the keys of a user's
    # payment methods: a card, a gift card, a voucher) are offers of one choice, whatever
    # their names: choosing one of them unasked is an unasked choice.
    siblings_are_offers: bool = True
    # Offers of a kind the run's instructions do not allow for the argument ("if the flights
    # are changed, the user needs to provide one gift card or credit card": no certificate)
    # are no option: with one allowed offer left, the choice was forced, not made unasked.
    instructions_restrict_offers: bool = True
    # A user's words asking to keep what a record has ("the original payment method"), or the
    # agent's proposal they answered saying so: the record's own value for the argument the
    # sentence names is then theirs; "" turns it off.
    reuse_pattern: str = REUSE
    # A record's own value passed to a change whose result shows the record holding it as often
    # as before (nothing charged to it, nothing moved) was no choice to ask about.
    unchanged_choice_is_no_choice: bool = True
    # In a conversation (the user spoke at least this often; 0 turns the rule off), a change
    # that sets a positive count whose subject no turn spoke of is `unmentioned_count`.
    counts_min_user_turns: int = 2
    # Words of an argument name that say "how many", not "of what" (`total_baggages`).
    count_qualifier_words: list[str] = field(
        default_factory=lambda: ["total", "number", "num", "count", "new", "extra", "free",
                                 "nonfree", "paid", "max", "min", "quantity", "qty", "amount",
                                 "id", "additional"]
    )  # fmt: skip
    # Words sharing this many first letters speak of one subject ("bag", "baggage").
    count_subject_prefix: int = 3

    def validate(self) -> None:
        """Every value of this section is valid."""
        for name in ("choice_value_pattern", "free_argument_pattern", "reuse_pattern"):
            try:
                re.compile(getattr(self, name))
            except re.error as exc:
                raise ValueError(
                    f"detectors.clarification.{name}: invalid regular expression ({exc})"
                ) from exc
        if self.counts_min_user_turns < 0 or self.count_subject_prefix < 1:
            raise ValueError(
                "detectors.clarification.counts_min_user_turns must be >= 0 and "
                "count_subject_prefix >= 1"
            )
