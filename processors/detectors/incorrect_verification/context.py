"""What FM-3.3's rules read: the detector's settings, the services it shares with the other
detectors, its patterns compiled once, and how its findings are worded."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mast_otel.processors.classify import ActionClassifier
from mast_otel.processors.detectors.base import DetectorContext, Reporter
from mast_otel.processors.detectors.incorrect_verification.config import (
    IncorrectVerificationConfig,
)
from mast_otel.processors.detectors.signals import Signals


@dataclass(frozen=True, slots=True)
class IncorrectVerificationContext:
    """FM-3.3's settings, services and compiled patterns, built once per detector and given to
    each rule's per-run state. An optional pattern left "" in the config is None here, and its
    rule is off."""

    config: IncorrectVerificationConfig
    classifier: ActionClassifier
    signals: Signals
    # Words every finding of FM-3.3 (its mode, detector name and version).
    report: Reporter
    # A change's result saying it did not happen (None: the error status only).
    failure_result: re.Pattern[str] | None
    # `success_after_failed_change`: the model telling the user a change succeeded.
    success_statement: re.Pattern[str]
    # `identity_mismatch`: identifiers of a checkable shape, and the model noticing a mismatch.
    identities: tuple[re.Pattern[str], ...]
    mismatch: re.Pattern[str]
    # The current date in the run's instructions (`change_on_past_record`,
    # `window_claim_contradicts_record`, `past_error_misread`).
    current_date: re.Pattern[str] | None
    # `amount_does_not_cover`: an amount said to cover another, and its negation.
    covers: re.Pattern[str] | None
    covers_negation: re.Pattern[str]
    # `window_claim_contradicts_record`: a claim of being within a window, and its negation.
    window_claim: re.Pattern[str] | None
    window_negation: re.Pattern[str]
    # `past_error_misread`: the agent saying an error's date is past.
    past_error_excuse: re.Pattern[str] | None
    # `unavailable_option_offered`: an item's fields of what is left and of its price, and the
    # agent saying none is left.
    availability_field: re.Pattern[str] | None
    price_field: re.Pattern[str]
    unavailable_said: re.Pattern[str]


def build_context(
    config: IncorrectVerificationConfig, context: DetectorContext, report: Reporter
) -> IncorrectVerificationContext:
    """The rules' context, its patterns compiled from `config` (case-insensitive; once, not at
    every run's opening)."""
    c = config
    flags = re.IGNORECASE

    def optional(pattern: str) -> re.Pattern[str] | None:
        return re.compile(pattern, flags) if pattern else None

    return IncorrectVerificationContext(
        config=c,
        classifier=context.classifier,
        signals=context.signals,
        report=report,
        failure_result=optional(c.failure_result_pattern),
        success_statement=re.compile(c.success_statement_pattern, flags),
        identities=tuple(re.compile(p, flags) for p in c.identity_patterns),
        mismatch=re.compile(c.mismatch_pattern, flags),
        current_date=optional(c.current_date_pattern),
        covers=optional(c.covers_pattern),
        covers_negation=re.compile(c.covers_negation_pattern, flags),
        window_claim=optional(c.window_claim_pattern),
        window_negation=re.compile(c.window_negation_pattern, flags),
        past_error_excuse=optional(c.past_error_excuse_pattern),
        availability_field=optional(c.availability_field_pattern),
        price_field=re.compile(c.price_field_pattern, flags),
        unavailable_said=re.compile(c.unavailable_said_pattern, flags),
    )
