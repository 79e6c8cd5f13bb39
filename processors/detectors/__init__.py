"""One detector per failure mode, each a folder (a rule family) whose detector.py ends with its
factory; the factories are listed here, in the taxonomy's order.

A family's folder: `__init__.py` (its docstring alone: the mode, and each rule with the module
deciding it), `config.py` (its section of the config file, with its own `validate`),
`context.py` (what its rules read: the config, shared services, compiled patterns, a
`Reporter`), one module per rule (or per few rules sharing state), each taking the context and
never the detector, and `detector.py` (the detector, its per-run state composing the rules, and
`FACTORY = DetectorFactory(...)` at the end). A new detector is such a folder plus one line in
FACTORIES; its section under `detectors:`, its defaults in the configuration reference and its
place in the pipeline follow from the factory. ARCHITECTURE.md walks through adding a rule."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from mast_otel.processors.classify import ActionClassifier
from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory
from mast_otel.processors.detectors.clarification.detector import FACTORY as CLARIFICATION
from mast_otel.processors.detectors.conversation_reset.detector import FACTORY as CONVERSATION_RESET
from mast_otel.processors.detectors.derailment.detector import FACTORY as DERAILMENT
from mast_otel.processors.detectors.history_loss.detector import FACTORY as HISTORY_LOSS
from mast_otel.processors.detectors.ignored_input.detector import FACTORY as IGNORED_INPUT
from mast_otel.processors.detectors.incorrect_verification.detector import (
    FACTORY as INCORRECT_VERIFICATION,
)
from mast_otel.processors.detectors.missing_verification.detector import (
    FACTORY as MISSING_VERIFICATION,
)
from mast_otel.processors.detectors.premature_termination.detector import (
    FACTORY as PREMATURE_TERMINATION,
)
from mast_otel.processors.detectors.reasoning_action.detector import FACTORY as REASONING_ACTION
from mast_otel.processors.detectors.role_specification.detector import FACTORY as ROLE_SPECIFICATION
from mast_otel.processors.detectors.signals import Signals
from mast_otel.processors.detectors.step_repetition.detector import FACTORY as STEP_REPETITION
from mast_otel.processors.detectors.task_specification.detector import FACTORY as TASK_SPECIFICATION
from mast_otel.processors.detectors.termination_awareness.detector import (
    FACTORY as TERMINATION_AWARENESS,
)
from mast_otel.processors.detectors.withholding.detector import FACTORY as WITHHOLDING
from mast_otel.processors.run import DetectorRun, Run

FACTORIES: tuple[DetectorFactory[Any], ...] = (
    TASK_SPECIFICATION,  # FM-1.1
    ROLE_SPECIFICATION,  # FM-1.2
    STEP_REPETITION,  # FM-1.3
    HISTORY_LOSS,  # FM-1.4
    TERMINATION_AWARENESS,  # FM-1.5
    CONVERSATION_RESET,  # FM-2.1
    CLARIFICATION,  # FM-2.2
    DERAILMENT,  # FM-2.3
    WITHHOLDING,  # FM-2.4
    IGNORED_INPUT,  # FM-2.5
    REASONING_ACTION,  # FM-2.6
    PREMATURE_TERMINATION,  # FM-3.1
    MISSING_VERIFICATION,  # FM-3.2
    INCORRECT_VERIFICATION,  # FM-3.3
)


def build_detectors(
    config: Any,
    classifier: ActionClassifier,
    factories: Iterable[DetectorFactory[Any]] | None = None,
) -> list[Detector]:
    """The enabled detectors, created in the factories' order from their sections of
    `config` (a DetectorsConfig, or any object with `signals` and a section per factory)."""
    listed = FACTORIES if factories is None else tuple(factories)
    sections = {f.type: getattr(config, f.type) for f in listed}
    context = DetectorContext(classifier, Signals(config.signals), sections)
    detectors = []
    for factory in listed:
        section = sections[factory.type]
        if section.enabled:
            detector = factory.create(section, context)
            if detector.name != factory.type or detector.mode != factory.mode:
                raise ValueError(
                    f"detector factory {factory.type!r} ({factory.mode}) created "
                    f"{type(detector).__name__}, which names itself {detector.name!r} "
                    f"({detector.mode})"
                )
            detectors.append(detector)
    return detectors


def detector_factory(detectors: list[Detector]) -> Callable[[Run], list[DetectorRun]]:
    """What the run windows call to open every detector's state for a new run."""

    def open_all(run: Run) -> list[DetectorRun]:
        return [d.open(run) for d in detectors]

    return open_all


__all__ = [
    "FACTORIES",
    "Detector",
    "DetectorContext",
    "DetectorFactory",
    "build_detectors",
    "detector_factory",
]
