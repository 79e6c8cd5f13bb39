"""What FM-2.2's rules read, built once per detector: the section, the shared signals (what an
ambiguous result says), the patterns the section's settings compile to and the reporter that
words their findings; and the bounds every rule keeps its per-run memory within. The rules are
given this, never the detector."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mast_otel.processors.classify import ActionClassifier
from mast_otel.processors.detectors.base import DetectorContext, Reporter
from mast_otel.processors.detectors.clarification.config import ClarificationConfig
from mast_otel.processors.detectors.signals import Signals

# Words remembered per run from inputs and results (a bound on memory, not on correctness:
# past it, unnamed-target findings stop).
MAX_WORDS = 50_000
# Findings per run, and choices held for the run's instructions.
MAX_FINDINGS = 5


@dataclass(frozen=True, slots=True)
class ClarificationContext:
    config: ClarificationConfig
    classifier: ActionClassifier
    signals: Signals
    # An identifier among several (`choice_value_pattern`); None: `unasked_choice` is off.
    choice: re.Pattern[str] | None
    # Argument names whose values are the agent's own (`free_argument_pattern`).
    free_argument: re.Pattern[str]
    # A user's words asking to keep a record's value (`reuse_pattern`); None: off.
    reuse: re.Pattern[str] | None
    report: Reporter


def clarification_context(
    config: ClarificationConfig, context: DetectorContext, report: Reporter
) -> ClarificationContext:
    c = config
    return ClarificationContext(
        config=config,
        classifier=context.classifier,
        signals=context.signals,
        choice=(
            re.compile(c.choice_value_pattern, re.IGNORECASE) if c.choice_value_pattern else None
        ),
        free_argument=re.compile(c.free_argument_pattern, re.IGNORECASE),
        reuse=re.compile(c.reuse_pattern, re.IGNORECASE) if c.reuse_pattern else None,
        report=report,
    )
