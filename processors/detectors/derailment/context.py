"""What FM-2.3's rule reads: the section, the classifier and how a finding is worded."""

from __future__ import annotations

from dataclasses import dataclass

from mast_otel.processors.classify import ActionClassifier
from mast_otel.processors.detectors.base import Reporter
from mast_otel.processors.detectors.derailment.config import DerailmentConfig


@dataclass(frozen=True, slots=True)
class DerailmentContext:
    """Made once per detector and shared by the state of every run."""

    config: DerailmentConfig
    classifier: ActionClassifier
    report: Reporter
