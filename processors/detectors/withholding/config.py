"""FM-2.4's section of the config file (`detectors.withholding`)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass
class WithholdingConfig:
    """FM-2.4 information withholding: after a hand-off, the receiver redoes the sender's call, or
    an error is not passed on."""

    # Run this detector.
    enabled: bool = True
    # `unpriced_consent`: a model message asking the user for a yes ("" turns the rule off).
    consent_pattern: str = (
        r"\b(confirm|proceed|go ahead|would you like|do you want|shall I|should I|"
        r"is that (ok|okay|alright)|are you sure)\b"
    )
    # An argument of a change that names a means of payment.
    payment_argument_pattern: str = r"payment|billing|card|charge|pay_with|paid_with"
    # An amount told: a number with its currency, or a number right after a word of price
    # ("the upgrade costs 180", "fare difference: 105").
    amount_pattern: str = (
        r"(?:[$€£]|\b(?:USD|EUR|GBP)\s?)\s?\d[\d,]*(?:\.\d+)?|"
        r"\b\d[\d,]*(?:\.\d+)?\s?(?:USD|EUR|GBP|dollars|euros|credits)\b|"
        r"\b(?:costs?|price[ds]?|fees?|charged?|total|difference)\b[^.\n\d]{0,24}\d"
    )
    # Words telling the change costs nothing: a price told.
    free_pattern: str = (
        r"\b(no (additional |extra )?(cost|charge|fee|payment)s?|free of charge|"
        r"at no (additional |extra )?cost|(is|are|be|at) free|without (any )?(charge|cost))\b"
    )
    # Words telling money goes back to the user: no charge to decide on.
    credit_pattern: str = r"\b(refund\w*|reimburs\w*|money back|credit(ed)? back)\b"

    def validate(self) -> None:
        """Every value of this section is valid."""
        for name in (
            "consent_pattern",
            "payment_argument_pattern",
            "amount_pattern",
            "free_pattern",
            "credit_pattern",
        ):
            try:
                re.compile(getattr(self, name))
            except re.error as exc:
                raise ValueError(
                    f"detectors.withholding.{name}: invalid regular expression ({exc})"
                ) from exc
        for name in ("payment_argument_pattern", "amount_pattern"):
            if not getattr(self, name):
                raise ValueError(
                    f"detectors.withholding.{name} must not be empty (turn the rule off "
                    'with consent_pattern: "")'
                )
