"""FM-3.2's detector: builds the rules' context once, opens each run's ledger and rules, and
lends each run's ledger to FM-3.3 when FM-3.3's would be the same (verification.py's
SharedLedgers, offered on the DetectorContext)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory
from mast_otel.processors.detectors.missing_verification.changes import Changes
from mast_otel.processors.detectors.missing_verification.config import MissingVerificationConfig
from mast_otel.processors.detectors.missing_verification.context import (
    MissingVerificationContext,
    build_context,
)
from mast_otel.processors.detectors.missing_verification.superlative_over_partial_search import (
    PartialSearches,
)
from mast_otel.processors.detectors.missing_verification.unchecked_figure import UserFigures
from mast_otel.processors.detectors.missing_verification.verdict_without_read import Verdicts
from mast_otel.processors.detectors.verification import (
    CHANGE_LEDGERS,
    ChangeLedger,
    SharedLedgers,
)
from mast_otel.processors.model import Finding, Step, StepKind
from mast_otel.processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_TOOL = StepKind.TOOL
_HUMAN = StepKind.HUMAN


class MissingVerification(Detector):
    mode = "FM-3.2"
    name = "missing_verification"
    version = "1.1"
    config: MissingVerificationConfig

    def __init__(self, config: Any, context: DetectorContext) -> None:
        super().__init__(config, context)
        self.context = build_context(self.config, context, self.report)
        # Each run's ledger, lent to the detectors created after this one (FM-3.3 reads it
        # instead of following the same calls again when its own would be the same).
        self.ledgers = SharedLedgers(self.context.check_tool, self.config.max_tracked_mutations)
        context.offer(CHANGE_LEDGERS, self.ledgers)

    def open(self, run: Run) -> DetectorRun:
        state = _MissingVerificationRun(self.context)
        self.ledgers.open(run, state.ledger)
        return state


class _MissingVerificationRun(DetectorRun):
    __slots__ = ("changes", "figures", "ledger", "partial", "verdicts")
    kinds = frozenset({StepKind.LLM, StepKind.TOOL, StepKind.HUMAN})

    def __init__(self, context: MissingVerificationContext) -> None:
        config = context.config
        self.ledger = ChangeLedger(
            context.classifier,
            context.signals,
            context.check_tool,
            config.max_tracked_mutations,
        )
        self.changes = Changes(context, self.ledger)
        self.verdicts = Verdicts(context)
        self.figures = UserFigures(context) if config.check_user_figures else None
        self.partial = PartialSearches(context)

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        self.partial.observe(step, run)
        if step.kind is _HUMAN:
            return ()
        self.ledger.observe(step, run)
        self.verdicts.observe(step, run)
        if self.figures is not None:
            self.figures.observe(step, run)
        if step.kind is _TOOL and step.tool_name:
            self.changes.observe(step, run)
        return ()

    def on_close(self, run: Run) -> Iterable[Finding]:
        figures = self.figures.close(run) if self.figures is not None else []
        return [
            *self.changes.close(run),
            *self.verdicts.close(run),
            *figures,
            *self.partial.close(run),
        ]


FACTORY = DetectorFactory(
    type="missing_verification",
    mode="FM-3.2",
    config=MissingVerificationConfig,
    create=MissingVerification,
)
