"""What FM-3.2's rules read: the detector's settings, the services it shares with the other
detectors, its patterns compiled once, and how its findings are worded."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mast_otel.processors.classify import ActionClassifier
from mast_otel.processors.detectors.base import DetectorContext, Reporter
from mast_otel.processors.detectors.missing_verification.config import MissingVerificationConfig
from mast_otel.processors.detectors.signals import Signals


@dataclass(frozen=True, slots=True)
class MissingVerificationContext:
    """FM-3.2's settings, services and compiled patterns, built once per detector and given to
    each rule's per-run state."""

    config: MissingVerificationConfig
    classifier: ActionClassifier
    signals: Signals
    # Words every finding of FM-3.2 (its mode, detector name and version).
    report: Reporter
    # A read naming nothing that still checks the system (`check_tool_pattern`).
    check_tool: re.Pattern[str]
    # `verdict_without_read`: a verdict, and what only weighs one (None: the rule is off).
    verdict: re.Pattern[str] | None
    verdict_hedge: re.Pattern[str]
    # `unchecked_figure`: a change's result saying it did not happen (None: the status only).
    failure_result: re.Pattern[str] | None
    # `superlative_over_partial_search`: a best-of-all claim (None: the rule is off), what
    # only intends to look, and the words of a tool's name limiting what it searches.
    superlative: re.Pattern[str] | None
    superlative_hedge: re.Pattern[str]
    scoped_search: re.Pattern[str] | None


def build_context(
    config: MissingVerificationConfig, context: DetectorContext, report: Reporter
) -> MissingVerificationContext:
    """The rules' context, its patterns compiled from `config` (once, not at every run's
    opening); "" turns an optional pattern, and its rule, off."""
    flags = re.IGNORECASE
    c = config
    return MissingVerificationContext(
        config=c,
        classifier=context.classifier,
        signals=context.signals,
        report=report,
        check_tool=re.compile(c.check_tool_pattern, flags),
        verdict=re.compile(c.verdict_pattern, flags) if c.verdict_pattern else None,
        verdict_hedge=re.compile(c.verdict_hedge_pattern, flags),
        failure_result=(
            re.compile(c.failure_result_pattern, flags) if c.failure_result_pattern else None
        ),
        superlative=re.compile(c.superlative_pattern, flags) if c.superlative_pattern else None,
        superlative_hedge=re.compile(c.superlative_hedge_pattern, flags),
        scoped_search=(
            re.compile(c.scoped_search_pattern, flags) if c.scoped_search_pattern else None
        ),
    )
