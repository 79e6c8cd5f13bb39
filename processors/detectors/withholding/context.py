"""What FM-2.4's rules read: the section, the classifier, the patterns of `unpriced_consent`
compiled once, and how a finding is worded."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mast_otel.processors.classify import ActionClassifier
from mast_otel.processors.detectors.base import DetectorContext, Reporter
from mast_otel.processors.detectors.withholding.config import WithholdingConfig


@dataclass(frozen=True, slots=True)
class WithholdingContext:
    """Made once per detector and shared by the state of every run."""

    config: WithholdingConfig
    classifier: ActionClassifier
    # The section's patterns, compiled case-insensitive (`consent`: None when the rule is off).
    consent: re.Pattern[str] | None
    payment_argument: re.Pattern[str]
    amount: re.Pattern[str]
    free: re.Pattern[str]
    credit: re.Pattern[str]
    report: Reporter


def build_context(
    config: WithholdingConfig, context: DetectorContext, report: Reporter
) -> WithholdingContext:
    """The context of a detector created with `config` in `context`."""
    return WithholdingContext(
        config=config,
        classifier=context.classifier,
        consent=re.compile(config.consent_pattern, re.IGNORECASE)
        if config.consent_pattern
        else None,
        payment_argument=re.compile(config.payment_argument_pattern, re.IGNORECASE),
        amount=re.compile(config.amount_pattern, re.IGNORECASE),
        free=re.compile(config.free_pattern, re.IGNORECASE),
        credit=re.compile(config.credit_pattern, re.IGNORECASE),
        report=report,
    )
