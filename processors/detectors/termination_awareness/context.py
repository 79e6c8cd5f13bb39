"""What FM-1.5's rules read: the section, the classifier, the shared signals (limits hit, the
health of a checked resource) and how a finding is worded."""

from __future__ import annotations

from dataclasses import dataclass

from mast_otel.processors.classify import ActionClassifier
from mast_otel.processors.detectors.base import Reporter
from mast_otel.processors.detectors.signals import Signals
from mast_otel.processors.detectors.termination_awareness.config import (
    TerminationAwarenessConfig,
)


@dataclass(frozen=True, slots=True)
class TerminationAwarenessContext:
    """Made once per detector and shared by the state of every run."""

    config: TerminationAwarenessConfig
    classifier: ActionClassifier
    signals: Signals
    report: Reporter
