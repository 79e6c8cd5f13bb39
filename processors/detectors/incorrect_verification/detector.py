"""FM-3.3's detector: builds the rules' context once, opens each run's rules, and reads FM-3.2's
ledger of each run instead of following the same calls again when FM-3.2 lends it
(verification.py's SharedLedgers, offered on the DetectorContext) and would keep the same."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory
from mast_otel.processors.detectors.incorrect_verification.conclusions import Conclusions
from mast_otel.processors.detectors.incorrect_verification.config import (
    IncorrectVerificationConfig,
)
from mast_otel.processors.detectors.incorrect_verification.context import (
    IncorrectVerificationContext,
    build_context,
)
from mast_otel.processors.detectors.incorrect_verification.figures import FigureChecks
from mast_otel.processors.detectors.incorrect_verification.past_error_misread import PastErrors
from mast_otel.processors.detectors.incorrect_verification.refusal_against_permission import (
    RefusedPermissions,
)
from mast_otel.processors.detectors.incorrect_verification.success_claim import SuccessClaim
from mast_otel.processors.detectors.incorrect_verification.unavailable_option_offered import (
    OfferedUnavailable,
)
from mast_otel.processors.detectors.incorrect_verification.user_word_over_record import UserWords
from mast_otel.processors.detectors.incorrect_verification.window_claim_contradicts_record import (
    WindowClaims,
)
from mast_otel.processors.detectors.verification import (
    CHANGE_LEDGERS,
    DEFAULT_CHECK_TOOL_PATTERN,
    ChangeLedger,
    SharedLedgers,
)
from mast_otel.processors.model import Finding, Step, StepKind
from mast_otel.processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_HUMAN = StepKind.HUMAN

# The same notion of a system-wide check as FM-3.2's default.
_CHECK_TOOL = re.compile(DEFAULT_CHECK_TOOL_PATTERN, re.IGNORECASE)
_MAX_CHANGES = 256


class IncorrectVerification(Detector):
    mode = "FM-3.3"
    name = "incorrect_verification"
    version = "1.0"
    config: IncorrectVerificationConfig

    def __init__(self, config: Any, context: DetectorContext) -> None:
        super().__init__(config, context)
        # FM-3.2's ledgers, when they are the same as this detector's would be: each run's
        # ledger is then followed once, for both. FM-3.2 is created first (the factories'
        # order) and offers them when enabled.
        self.ledger_source: SharedLedgers | None = None
        source = context.find(CHANGE_LEDGERS, SharedLedgers)
        if source is not None and source.follows_as(_CHECK_TOOL, _MAX_CHANGES):
            source.share()
            self.ledger_source = source
        self.context = build_context(self.config, context, self.report)

    def open(self, run: Run) -> DetectorRun:
        if self.ledger_source is not None:
            ledger = self.ledger_source.take(run)
            if ledger is not None:
                return _SharedLedgerRun(self.context, ledger)
        context = self.context
        return _IncorrectVerificationRun(
            context, ChangeLedger(context.classifier, context.signals, _CHECK_TOOL, _MAX_CHANGES)
        )


class _IncorrectVerificationRun(DetectorRun):
    __slots__ = (
        "claim",
        "conclusions",
        "figures",
        "given",
        "ledger",
        "past",
        "permits",
        "stock",
        "windows",
    )
    kinds = frozenset({StepKind.LLM, StepKind.TOOL, StepKind.HUMAN})

    def __init__(self, context: IncorrectVerificationContext, ledger: ChangeLedger) -> None:
        config = context.config
        self.ledger = ledger
        self.claim = SuccessClaim(context, ledger)
        self.conclusions = Conclusions(context)
        self.figures = FigureChecks(context)
        self.windows = WindowClaims(context)
        self.past = PastErrors(context)
        self.given = UserWords(context) if config.check_user_words else None
        self.stock = OfferedUnavailable(context) if context.availability_field else None
        self.permits = RefusedPermissions(context) if config.check_refused_permissions else None

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        if step.kind is not _HUMAN:
            self.ledger.observe(step, run)
        return self._conclude(step, run)

    def _conclude(self, step: Step, run: Run) -> list[Finding]:
        """Every rule but the ledger's, on one step."""
        self.windows.observe(step, run)
        self.past.observe(step, run)
        if self.permits is not None:
            self.permits.observe(step, run)
        given = self.given.observe(step, run) if self.given is not None else []
        stock = self.stock.observe(step, run) if self.stock is not None else []
        return [
            *self.conclusions.observe(step, run),
            *self.figures.observe(step, run),
            *given,
            *stock,
        ]

    def on_close(self, run: Run) -> Iterable[Finding]:
        return [
            *self.conclusions.close(run),
            *self.figures.close(run),
            *self.windows.close(run),
            *self.past.close(run),
            *(self.permits.close(run) if self.permits is not None else ()),
            *self.claim.close(run),
        ]


class _SharedLedgerRun(_IncorrectVerificationRun):
    """FM-3.3's state when FM-3.2 follows the run's ledger: it reads no step itself."""

    __slots__ = ()
    kinds = frozenset({StepKind.LLM, StepKind.TOOL, StepKind.HUMAN})
    on_step = _IncorrectVerificationRun._conclude


FACTORY = DetectorFactory(
    type="incorrect_verification",
    mode="FM-3.3",
    config=IncorrectVerificationConfig,
    create=IncorrectVerification,
)
