"""What FM-3.1's rules read: the section, the classifier, the shared signals (work said to
remain), the section's patterns compiled once, FM-2.6's reading of an inability made for this
family's refusals, and how a finding is worded."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mast_otel.processors.classify import ActionClassifier
from mast_otel.processors.detectors.base import DetectorContext, Reporter
from mast_otel.processors.detectors.premature_termination.config import (
    PrematureTerminationConfig,
)
from mast_otel.processors.detectors.reasoning_action.config import CLAIM_STOPWORDS
from mast_otel.processors.detectors.reasoning_action.inability import InabilityRules
from mast_otel.processors.detectors.signals import Signals


@dataclass(frozen=True, slots=True)
class PrematureTerminationContext:
    """Made once per detector and shared by the state of every run."""

    config: PrematureTerminationConfig
    classifier: ActionClassifier
    signals: Signals
    # The section's patterns, compiled case-insensitive (None: the rule is off).
    required: re.Pattern[str] | None
    announcement: re.Pattern[str]
    reprompt: re.Pattern[str]
    deferral: re.Pattern[str] | None
    # `refusal_pattern`, read for the thing refused only.
    refusal: InabilityRules
    report: Reporter


def build_context(
    config: PrematureTerminationConfig, context: DetectorContext, report: Reporter
) -> PrematureTerminationContext:
    """The context of a detector created with `config` in `context`."""
    return PrematureTerminationContext(
        config=config,
        classifier=context.classifier,
        signals=context.signals,
        required=re.compile(config.required_final_pattern, re.IGNORECASE)
        if config.required_final_pattern
        else None,
        announcement=re.compile(config.announcement_pattern, re.IGNORECASE),
        reprompt=re.compile(config.reprompt_pattern, re.IGNORECASE),
        deferral=re.compile(config.deferral_pattern, re.IGNORECASE)
        if config.deferral_pattern
        else None,
        refusal=InabilityRules(config.refusal_pattern, CLAIM_STOPWORDS, thing_only=True),
        report=report,
    )
