"""One detector per failure mode, in a file named for it, registered here by config name."""

from __future__ import annotations

from processors.classify import ActionClassifier
from processors.detectors.base import Detector
from processors.detectors.config import DetectorsConfig
from processors.detectors.history_loss import HistoryLoss
from processors.detectors.missing_verification import MissingVerification
from processors.detectors.step_repetition import StepRepetition
from processors.window import DetectorFactory, DetectorRun, Run

# Config section name → detector class. A new detector adds its class here and its
# thresholds section to DetectorsConfig.
REGISTRY: dict[str, type[Detector]] = {
    StepRepetition.name: StepRepetition,
    HistoryLoss.name: HistoryLoss,
    MissingVerification.name: MissingVerification,
}


def build_detectors(config: DetectorsConfig, classifier: ActionClassifier) -> list[Detector]:
    """The enabled detectors, configured."""
    detectors = []
    for name, cls in REGISTRY.items():
        section = getattr(config, name)
        if section.enabled:
            detectors.append(cls(section, classifier))
    return detectors


def detector_factory(detectors: list[Detector]) -> DetectorFactory:
    """What the run windows call to open every detector's state for a new run."""

    def open_all(run: Run) -> list[DetectorRun]:
        return [d.open(run) for d in detectors]

    return open_all


__all__ = ["REGISTRY", "Detector", "build_detectors", "detector_factory"]
