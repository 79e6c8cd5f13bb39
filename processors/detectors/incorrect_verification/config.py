"""FM-3.3's settings: the `detectors.incorrect_verification` section of the configuration."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mast_otel.processors.detectors.verification import DEFAULT_FAILURE_RESULT_PATTERN

# The agent saying an error's date is past: `past_error_excuse_pattern`'s default.
DEFAULT_PAST_ERROR_EXCUSE = (
    r"\b(?:past|passed|already|departed|flown|earlier|previous|expired|elapsed|ago|gone)\b"
)


@dataclass
class IncorrectVerificationConfig:
    """FM-3.3 incorrect verification: success declared while the last check shows trouble, or a
    check made too early."""

    # Run this detector.
    enabled: bool = True
    # A check sooner than this after the change may not see its effect yet.
    min_settle_seconds: float = 5.0
    # The result of a change that says it did not happen (case-insensitive regular
    # expression), besides an error status. "" leaves only the error status.
    failure_result_pattern: str = DEFAULT_FAILURE_RESULT_PATTERN
    # A model output that tells the user a change succeeded.
    success_statement_pattern: str = (
        r"\b(has|have) been (successfully )?(\w+ed|sent|made|done)\b|\bsuccessfully\b|"
        r"\bis (now )?(complete|confirmed|done)\b|\ball set\b"
    )
    # Identifiers of a shape a record can be checked against (regular expressions); an
    # empty list turns `identity_mismatch` off.
    identity_patterns: list[str] = field(default_factory=lambda: [r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"])
    # The model noticing the record is not the user's.
    mismatch_pattern: str = (
        r"\b(does not|doesn't|do not|don't) match|\bmismatch|\bdifferent (email|account|"
        r"address|profile|user)|\bnot the same\b|\bcould not (verify|confirm)"
    )

    # The current date in the run's instructions (`mast.task.description`): the first group
    # is an ISO date (YYYY-MM-DD). "" turns `change_on_past_record` off.
    current_date_pattern: str = (
        r"\bcurrent (?:date|time|day)(?: is|:)\s*(?:now\s*)?(\d{4}-\d{2}-\d{2})"
    )
    # Records read and changes on them remembered per run for `change_on_past_record`.
    max_tracked_records: int = 256
    # Item dates more than this many days before the current date (a birth date) are not
    # the record's business; a record needs a dated item within them.
    past_window_days: int = 365
    # `change_on_past_record` findings per run (one per record).
    max_findings_per_run: int = 3
    # Numbers below this are not figures for `rejected_figure` and `amount_does_not_cover`
    # (list markers, counts of one or two).
    min_figure: float = 10.0
    # An amount said to cover another (`amount_does_not_cover`); "" turns the rule off.
    covers_pattern: str = (
        r"\b(?:will|would|can|could|should|to|does|do)?\s*(?:fully\s+)?(?:covers?|pays? for|"
        r"(?:is|are) (?:enough|sufficient) (?:for|to cover)|suffices? for)\b"
    )
    # A sentence that says the amount does not (fully) cover: no finding.
    covers_negation_pattern: str = (
        r"\b(?:not|no|never|cannot|insufficient|partly|partially|part of|only)\b|n't\b"
    )
    # The agent saying something is within a window of N hours or days (group 1: N, group 2:
    # the unit) for `window_claim_contradicts_record`; "" turns the rule off.
    window_claim_pattern: str = (
        r"\b(?:is|are|was|were|it's|falls?|still)\s+(?:\w+\s+){0,2}?within\s+(?:the\s+)?"
        r"(?:last\s+|first\s+)?(\d+)[- ]?(hours?|days?|weeks?)\b"
    )
    # A sentence that says it is not within the window, or only if, or that it will check:
    # no finding.
    window_negation_pattern: str = (
        r"\b(?:not|no longer|never|outside|beyond|past|if|unless|whether|only|ensure|verify|"
        r"check|confirm)\b|n't\b"
    )

    # The agent saying an error's date is past (`past_error_misread` stays silent); "" turns
    # the rule off.
    past_error_excuse_pattern: str = DEFAULT_PAST_ERROR_EXCUSE
    # Report the agent reasoning from the user's value of a field ("since you are a Gold
    # member") that the record it read gives another (`user_word_over_record`).
    check_user_words: bool = True
    # Fields of an item a read returned that count what is left of it
    # (`unavailable_option_offered`): a map from class to count (`available_seats: {economy:
    # 0, ...}`) or one number (`stock: 0`), beside a price field of the same shape
    # (`price_field_pattern`). Case-insensitive regular expression over the field's name; ""
    # turns the rule off.
    availability_field_pattern: str = (
        r"^(?:avail\w*|\w*_available|stock|in_stock|inventory|remaining)$"
    )
    # Fields of the same item that give its price, per class or in all.
    price_field_pattern: str = r"^(?:\w+_)?(?:prices?|fares?|costs?|rates?)$"
    # The agent saying, beside the price it quotes, that none is left: no finding.
    unavailable_said_pattern: str = (
        r"\bsold[- ]out\b|\bunavailable\b|\bnot available\b|\bout of stock\b|\bfully booked\b|"
        r"\bno (?:\w+ )?(?:seats?|stock|availability|rooms?|units?|left)\b|"
        r"\b0 (?:\w+ )?(?:seats?|left|available|in stock|remaining)\b|\bnone (?:left|available)\b"
    )

    # Report the agent telling the user an action is not allowed that the run's instructions
    # grant without condition ("The user can modify passengers but cannot modify the number
    # of passengers"), its refusal naming nothing the grant leaves out
    # (`refusal_against_permission`).
    check_refused_permissions: bool = True
    # Verbs that mean the same action for `refusal_against_permission`: one string per set,
    # its verbs in their base form separated by spaces. A verb in no set matches only its own
    # forms.
    permission_verb_synonyms: list[str] = field(
        default_factory=lambda: ["change modify update edit alter amend"]
    )

    def validate(self) -> None:
        """Every value of this section is valid."""
        for key in ("max_tracked_records", "past_window_days", "max_findings_per_run"):
            if getattr(self, key) < 1:
                raise ValueError(f"detectors.incorrect_verification.{key} must be >= 1")
        if self.current_date_pattern and _groups("current_date_pattern", self) < 1:
            raise ValueError(
                "detectors.incorrect_verification.current_date_pattern needs a group: the date"
            )
        if self.window_claim_pattern and _groups("window_claim_pattern", self) < 2:
            raise ValueError(
                "detectors.incorrect_verification.window_claim_pattern needs two groups: "
                "the number and the unit"
            )
        for group in self.permission_verb_synonyms:
            verbs = group.split() if isinstance(group, str) else [group]
            if not verbs or not all(
                isinstance(v, str) and v.isalpha() and v.islower() for v in verbs
            ):
                raise ValueError(
                    "detectors.incorrect_verification.permission_verb_synonyms: each verb is "
                    "one lower-case word"
                )
        patterns = [
            ("failure_result_pattern", self.failure_result_pattern),
            ("success_statement_pattern", self.success_statement_pattern),
            ("mismatch_pattern", self.mismatch_pattern),
            ("covers_pattern", self.covers_pattern),
            ("covers_negation_pattern", self.covers_negation_pattern),
            ("window_claim_pattern", self.window_claim_pattern),
            ("window_negation_pattern", self.window_negation_pattern),
            ("past_error_excuse_pattern", self.past_error_excuse_pattern),
            ("availability_field_pattern", self.availability_field_pattern),
            ("price_field_pattern", self.price_field_pattern),
            ("unavailable_said_pattern", self.unavailable_said_pattern),
            *(("identity_patterns", p) for p in self.identity_patterns),
        ]
        for name, pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(
                    f"detectors.incorrect_verification.{name}: invalid regular expression ({exc})"
                ) from exc


def _groups(key: str, config: IncorrectVerificationConfig) -> int:
    """The number of groups of the regular expression under `key`, or a ValueError naming it."""
    try:
        return re.compile(getattr(config, key)).groups
    except re.error as exc:
        raise ValueError(
            f"detectors.incorrect_verification.{key}: invalid regular expression ({exc})"
        ) from exc
