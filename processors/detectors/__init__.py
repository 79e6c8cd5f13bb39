"""One detector per failure mode, in a file named for it, registered here by config name."""

from __future__ import annotations

from collections.abc import Callable

from processors.classify import ActionClassifier
from processors.detectors.base import Detector
from processors.detectors.clarification import Clarification
from processors.detectors.config import DetectorsConfig
from processors.detectors.conversation_reset import ConversationReset
from processors.detectors.derailment import Derailment
from processors.detectors.history_loss import HistoryLoss
from processors.detectors.ignored_input import IgnoredInput
from processors.detectors.incorrect_verification import IncorrectVerification
from processors.detectors.missing_verification import MissingVerification
from processors.detectors.premature_termination import PrematureTermination
from processors.detectors.reasoning_action import ReasoningAction
from processors.detectors.role_specification import RoleSpecification
from processors.detectors.signals import Signals
from processors.detectors.step_repetition import StepRepetition
from processors.detectors.task_specification import TaskSpecification
from processors.detectors.termination_awareness import TerminationAwareness
from processors.detectors.withholding import Withholding
from processors.run import DetectorRun, Run

# Config section name → detector class, in the taxonomy's order. A new detector adds its
# class here and its thresholds section to DetectorsConfig.
REGISTRY: dict[str, type[Detector]] = {
    cls.name: cls
    for cls in (
        TaskSpecification,  # FM-1.1
        RoleSpecification,  # FM-1.2
        StepRepetition,  # FM-1.3
        HistoryLoss,  # FM-1.4
        TerminationAwareness,  # FM-1.5
        ConversationReset,  # FM-2.1
        Clarification,  # FM-2.2
        Derailment,  # FM-2.3
        Withholding,  # FM-2.4
        IgnoredInput,  # FM-2.5
        ReasoningAction,  # FM-2.6
        PrematureTermination,  # FM-3.1
        MissingVerification,  # FM-3.2
        IncorrectVerification,  # FM-3.3
    )
}


def build_detectors(config: DetectorsConfig, classifier: ActionClassifier) -> list[Detector]:
    """The enabled detectors, configured."""
    signals = Signals(config.signals)
    detectors = []
    for name, cls in REGISTRY.items():
        section = getattr(config, name)
        if section.enabled:
            detector = cls(section, classifier, signals)
            if isinstance(detector, HistoryLoss):
                detector.reset_config = config.conversation_reset
            detectors.append(detector)
    # FM-3.3 reads the ledger FM-3.2 keeps of each run when both would keep the same one
    # (FM-3.2 is opened first, so its state for a run exists when FM-3.3's opens).
    missing = [d for d in detectors if isinstance(d, MissingVerification)]
    for detector in detectors:
        if isinstance(detector, IncorrectVerification) and missing:
            detector.share_ledger_of(missing[0])
    return detectors


def detector_factory(detectors: list[Detector]) -> Callable[[Run], list[DetectorRun]]:
    """What the run windows call to open every detector's state for a new run."""

    def open_all(run: Run) -> list[DetectorRun]:
        return [d.open(run) for d in detectors]

    return open_all


__all__ = ["REGISTRY", "Detector", "build_detectors", "detector_factory"]
