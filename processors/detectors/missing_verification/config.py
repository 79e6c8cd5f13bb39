"""FM-3.2's settings: the `detectors.missing_verification` section of the configuration."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mast_otel.processors.detectors.verification import DEFAULT_FAILURE_RESULT_PATTERN


@dataclass
class MissingVerificationConfig:
    """FM-3.2 no or incomplete verification: a change never checked before the run ends."""

    # Run this detector.
    enabled: bool = True
    # Read-only calls with no resource named in their arguments still verify a change when
    # their tool's name (or the command they run) says it checks the system (alerts, health,
    # status, a test suite, ...).
    check_tool_pattern: str = r"alert|health|status|verify|check|probe|metric|monitor|\btest|pytest"
    # Unchecked changes reported per run (the last ones, when a run leaves more unchecked).
    max_findings_per_run: int = 5
    # Mutating calls remembered per run awaiting their check.
    max_tracked_mutations: int = 256
    # A change whose own result is a structured record (JSON) naming the changed resource
    # reported its new state: that counts as its check.
    result_state_verifies: bool = True
    # Report mutating calls on record ids no earlier tool result or read showed.
    check_records_read_before: bool = True
    # Words of earlier tool results remembered per run to know which ids were shown.
    max_remembered_words: int = 50_000
    # The result of a change that says it did not happen (case-insensitive regular
    # expression), besides an error status, for `unchecked_figure`. "" leaves only the status.
    failure_result_pattern: str = DEFAULT_FAILURE_RESULT_PATTERN
    # Numbers below this are not figures for `unchecked_figure` (list markers, small counts).
    min_figure: float = 10.0
    # Report a change rejected with the system's figure against one the user gave.
    check_user_figures: bool = True
    # A verdict on the user's own case, or compensation offered for it
    # (`verdict_without_read`); "" turns the rule off.
    verdict_pattern: str = (
        r"\b(?:you are|you're|you will be|you'll be|you would be|it is|it's|this is|they are)"
        r"\s+(?:not\s+)?(?:eligible|entitled)\b|\b(?:neither|none)\b[^.?!]{0,40}\bappl(?:y|ies)"
        r" to your\b|\byour \w+(?: \w+)? (?:is|are) (?:not )?(?:eligible|entitled)\b|"
        r"\byour \w+(?: \w+)? (?:cannot|can't|can not) be \w+ed\b|"
        r"\bI (?:can|could|will) (?:only )?(?:offer|issue|grant) (?:you )?(?:a|an) (?:\$?\d+ )?"
        r"(?:certificate|voucher|credit|refund|compensation|discount|replacement)\b"
    )
    # A sentence that only weighs a verdict (a condition, a hedge, an intention to check).
    verdict_hedge_pattern: str = (
        r"\b(?:if|whether|unless|may|might|could|determine|check|verify|confirm|once|need)\b"
    )

    # The agent calling an option the best of all (`superlative_over_partial_search`); ""
    # turns the rule off.
    superlative_pattern: str = (
        r"\b(?:cheapest|fastest|quickest|shortest|earliest|least expensive|most affordable|"
        r"lowest[- ](?:priced|cost|fare|price))\b"
    )
    # A sentence that only intends to look, asks, or weighs a condition: no claim.
    superlative_hedge_pattern: str = (
        r"\b(?:let me|I will|I'll|I need to|to find|search(?:ing)? for|look(?:ing)? for|if|"
        r"whether)\b"
    )
    # Words of a search tool's name saying it covers only part of the options (whole words,
    # case-insensitive regular expression): the best-of-all claim after that tool alone is
    # `superlative_over_partial_search` even when no other tool taking the query ran. ""
    # leaves the rule to tools seen taking the same query.
    scoped_search_pattern: str = r"direct|nonstop|onestop|local|nearby|regional"
    # Read tools remembered per run and agent (service) with the argument names of their
    # queries, to know which tools take the same query.
    max_known_query_tools: int = 256

    def validate(self) -> None:
        if self.max_known_query_tools < 1:
            raise ValueError("detectors.missing_verification.max_known_query_tools must be >= 1")
        if self.max_remembered_words < 1:
            raise ValueError("detectors.missing_verification.max_remembered_words must be >= 1")
        if self.max_findings_per_run < 1 or self.max_tracked_mutations < 1:
            raise ValueError(
                "detectors.missing_verification.max_findings_per_run and "
                "max_tracked_mutations must be at least 1"
            )
        keys = (
            "check_tool_pattern",
            "verdict_pattern",
            "verdict_hedge_pattern",
            "superlative_pattern",
            "superlative_hedge_pattern",
            "scoped_search_pattern",
        )
        for key in (*keys, "failure_result_pattern"):
            try:
                re.compile(getattr(self, key))
            except re.error as exc:
                raise ValueError(
                    f"detectors.missing_verification.{key}: invalid regular expression ({exc})"
                ) from exc
