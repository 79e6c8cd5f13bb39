"""What FM-2.5's rules read: the section, the classifier and how a finding is worded."""

from __future__ import annotations

from dataclasses import dataclass

from mast_otel.processors.classify import ActionClassifier
from mast_otel.processors.detectors.base import Reporter
from mast_otel.processors.detectors.ignored_input.config import IgnoredInputConfig


@dataclass(frozen=True, slots=True)
class IgnoredInputContext:
    """Made once per detector and shared by the state of every run."""

    config: IgnoredInputConfig
    classifier: ActionClassifier
    report: Reporter
