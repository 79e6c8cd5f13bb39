"""One detector per failure mode, in a file named for it that ends with its factory; the
factories are listed here, in the taxonomy's order.

A new detector is one module (its config class with its own `validate`, its detector, its
per-run state, and `FACTORY = DetectorFactory(...)` at the end) plus one line in FACTORIES:
its section under `detectors:` in the config file, its defaults in the configuration
reference and its place in the pipeline follow from the factory."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from mast_otel.processors.classify import ActionClassifier
from mast_otel.processors.detectors import (
    clarification,
    incorrect_verification,
    missing_verification,
    reasoning_action,
    step_repetition,
    task_specification,
)
from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory
from mast_otel.processors.detectors.conversation_reset import detector as conversation_reset
from mast_otel.processors.detectors.derailment import detector as derailment
from mast_otel.processors.detectors.history_loss import detector as history_loss
from mast_otel.processors.detectors.ignored_input import detector as ignored_input
from mast_otel.processors.detectors.premature_termination import detector as premature_termination
from mast_otel.processors.detectors.role_specification import detector as role_specification
from mast_otel.processors.detectors.signals import Signals
from mast_otel.processors.detectors.termination_awareness import detector as termination_awareness
from mast_otel.processors.detectors.withholding import detector as withholding
from mast_otel.processors.run import DetectorRun, Run

FACTORIES: tuple[DetectorFactory[Any], ...] = (
    task_specification.FACTORY,  # FM-1.1
    role_specification.FACTORY,  # FM-1.2
    step_repetition.FACTORY,  # FM-1.3
    history_loss.FACTORY,  # FM-1.4
    termination_awareness.FACTORY,  # FM-1.5
    conversation_reset.FACTORY,  # FM-2.1
    clarification.FACTORY,  # FM-2.2
    derailment.FACTORY,  # FM-2.3
    withholding.FACTORY,  # FM-2.4
    ignored_input.FACTORY,  # FM-2.5
    reasoning_action.FACTORY,  # FM-2.6
    premature_termination.FACTORY,  # FM-3.1
    missing_verification.FACTORY,  # FM-3.2
    incorrect_verification.FACTORY,  # FM-3.3
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
