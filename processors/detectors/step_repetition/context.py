"""What FM-1.3's rules read, built once per detector: the section, the classifier that
canonicalises calls and fingerprints results, the compiled request pattern and the reporter
that words their findings. The rules are given this, never the detector."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mast_otel.processors.classify import ActionClassifier
from mast_otel.processors.detectors.base import DetectorContext, Reporter
from mast_otel.processors.detectors.step_repetition.config import StepRepetitionConfig


@dataclass(frozen=True, slots=True)
class StepRepetitionContext:
    config: StepRepetitionConfig
    classifier: ActionClassifier
    # What names an identifier the agent asks the user for (`request_pattern`).
    request: re.Pattern[str]
    report: Reporter


def step_repetition_context(
    config: StepRepetitionConfig, context: DetectorContext, report: Reporter
) -> StepRepetitionContext:
    return StepRepetitionContext(
        config=config,
        classifier=context.classifier,
        request=re.compile(config.request_pattern, re.IGNORECASE),
        report=report,
    )
