"""FM-3.3 Incorrect verification: the agent checked, and the check does not support its claim.

Decided when the run closes, only for runs whose final answer declares success:
- `claimed_despite_unhealthy`: the last check of the changed resource (or, with no change,
  the run's last read) shows it unhealthy (errors, crash loops, an alert still firing);
- `checked_too_early`: that unhealthy check came sooner than `min_settle_seconds` after the
  change, before the change could take effect, and nothing checked again;
- `wrong_target`: after the change the run only read other resources (another namespace,
  another deployment) than the one it changed.
One finding per run, at the check (or the change, for a wrong target). And, as the run goes:
- `success_after_failed_change`: a change failed (an error status, or a result matching
  `failure_result_pattern`: "Error: ...", "insufficient funds", "not allowed"), no change
  succeeded since, and the model tells the user it succeeded;
- `identity_mismatch`: the user gave an identifier of a checkable shape (`identity_patterns`,
  such as an email address), the agent looked a record up, the record holds one identifier of
  that shape and it is another, and the agent went on without saying so
  (`mismatch_pattern`): it read the record and concluded it was the user's.
And at close:
- `change_on_past_record`: a change acted on a record (an id in its arguments) that the run
  had read (a read naming that id returned a JSON object holding it), and every dated item of
  that record (the objects of its lists: segments, events, line items) is dated before the
  current date the run's own instructions give (`current_date_pattern` over
  `mast.task.description`): the record says it is over, and the agent acted as if it were
  still to come.
Figures and windows the agent concluded (incorrect_verification_figures.py, _window.py):
- `rejected_figure`: a change rejected with the system's figure against one the agent had
  stated or computed ("total price is 305, but paid 255");
- `amount_does_not_cover`: the agent says an amount covers a larger one;
- `window_claim_contradicts_record`: the agent says a record is within an N-hour or N-day
  window that the record's own date, read by id, says it has left.
- `past_error_misread` (incorrect_verification_past.py): an error about a date already past
  told to the user as another reason (unavailable).
- `unavailable_option_offered` (incorrect_verification_stock.py): an item offered at the
  price of a class its own read showed none left of.
- `user_word_over_record` (incorrect_verification_given.py): the agent repeats the user's
  description of a field ("as a Gold member") that the record it read gives another value.
- `refusal_against_permission` (incorrect_verification_permission.py): the agent tells the user
  an action is not allowed that the run's instructions grant without condition.
The per-run conclusions live in incorrect_verification_rules.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory, short
from mast_otel.processors.detectors.incorrect_verification_config import (
    IncorrectVerificationConfig,
)
from mast_otel.processors.detectors.incorrect_verification_figures import FigureChecks
from mast_otel.processors.detectors.incorrect_verification_given import UserWords
from mast_otel.processors.detectors.incorrect_verification_past import PastErrors
from mast_otel.processors.detectors.incorrect_verification_permission import RefusedPermissions
from mast_otel.processors.detectors.incorrect_verification_rules import Conclusions
from mast_otel.processors.detectors.incorrect_verification_stock import OfferedUnavailable
from mast_otel.processors.detectors.incorrect_verification_window import WindowClaims
from mast_otel.processors.detectors.missing_verification import (
    CHANGE_LEDGERS,
    DEFAULT_CHECK_TOOL_PATTERN,
    MissingVerification,
)
from mast_otel.processors.detectors.signals import Health
from mast_otel.processors.detectors.verification import ChangeLedger
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_UNHEALTHY = Health.UNHEALTHY
_MUTATING = ActionKind.MUTATING
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL
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
        # FM-3.2's detector, when its ledgers are the same as this one's would be: each run's
        # ledger is then followed once, for both.
        self.ledger_source: MissingVerification | None = None
        # FM-3.2 is created first (the factories' order) and offers its ledgers when enabled.
        source = context.find(CHANGE_LEDGERS, MissingVerification)
        if source is not None:
            self.share_ledger_of(source)
        c = self.config
        flags = re.IGNORECASE
        self.failure_result = (
            re.compile(c.failure_result_pattern, flags) if c.failure_result_pattern else None
        )
        self.success_statement = re.compile(c.success_statement_pattern, flags)
        self.identities = [re.compile(p, flags) for p in c.identity_patterns]
        self.mismatch = re.compile(c.mismatch_pattern, flags)
        self.current_date = (
            re.compile(c.current_date_pattern, flags) if c.current_date_pattern else None
        )
        self.covers = re.compile(c.covers_pattern, flags) if c.covers_pattern else None
        self.covers_negation = re.compile(c.covers_negation_pattern, flags)
        self.window_claim = (
            re.compile(c.window_claim_pattern, flags) if c.window_claim_pattern else None
        )
        self.window_negation = re.compile(c.window_negation_pattern, flags)
        self.availability_field = (
            re.compile(c.availability_field_pattern, flags)
            if c.availability_field_pattern
            else None
        )
        self.price_field = re.compile(c.price_field_pattern, flags)
        self.unavailable_said = re.compile(c.unavailable_said_pattern, flags)

    def share_ledger_of(self, source: MissingVerification) -> bool:
        """Read `source`'s ledger of each run if it follows calls exactly as this detector's
        would (same check-tool pattern and bound). Returns whether it does."""
        if not source.ledger_matches(_CHECK_TOOL, _MAX_CHANGES):
            return False
        source.share_ledger()
        self.ledger_source = source
        return True

    def open(self, run: Run) -> DetectorRun:
        if self.ledger_source is not None:
            ledger = self.ledger_source.take_ledger(run)
            if ledger is not None:
                return _SharedLedgerRun(self, ledger)
        return _IncorrectVerificationRun(self)


class _IncorrectVerificationRun(DetectorRun):
    __slots__ = (
        "conclusions",
        "detector",
        "figures",
        "given",
        "ledger",
        "past",
        "permits",
        "stock",
        "windows",
    )
    kinds = frozenset({StepKind.LLM, StepKind.TOOL, StepKind.HUMAN})

    def __init__(self, detector: IncorrectVerification, ledger: ChangeLedger | None = None) -> None:
        self.detector = detector
        self.ledger = (
            ledger
            if ledger is not None
            else ChangeLedger(detector.classifier, detector.signals, _CHECK_TOOL, _MAX_CHANGES)
        )
        self.conclusions = Conclusions(detector)
        self.figures = FigureChecks(detector)
        self.windows = WindowClaims(detector)
        self.past = PastErrors(detector)
        self.given = UserWords(detector) if detector.config.check_user_words else None
        self.stock = OfferedUnavailable(detector) if detector.availability_field else None
        self.permits = (
            RefusedPermissions(detector) if detector.config.check_refused_permissions else None
        )

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
            *self._claims(run),
        ]

    def _claims(self, run: Run) -> Iterable[Finding]:
        ledger = self.ledger
        answer = ledger.final_answer
        if answer is None or not ledger.claims_success():
            return ()
        claim = short(answer.output_text)
        if not ledger.changes:
            last = ledger.last_read
            if last is not None and self.detector.signals.health(last.tool_result) is _UNHEALTHY:
                return [self._unhealthy(last, last.tool_result, None, answer, claim, run)]
            return ()
        change = ledger.changes[-1]
        check = change.last_check
        if change.checks and check is not None:
            if self.detector.signals.health(check.result) is not _UNHEALTHY:
                return ()
            return [
                self._unhealthy(
                    check.ref, check.result, change.ref, answer, claim, run, change.targets
                )
            ]
        if change.other_reads:
            reads = change.other_reads
            return [
                self.detector.finding(
                    at=change.ref,
                    rule="wrong_target",
                    confidence=0.75,
                    message=(
                        f"the run changed {', '.join(sorted(change.targets))} but checked only "
                        f"{', '.join(sorted({t for r in reads for t in r.targets})) or 'others'}"
                        f", then declared success"
                    ),
                    evidence=[change.ref, *(r.ref for r in reads[-5:]), answer],
                    values={
                        "changed": sorted(change.targets),
                        "checked": sorted({t for r in reads for t in r.targets}),
                        "claim": claim,
                    },
                    run=run,
                )
            ]
        return ()

    def _unhealthy(
        self,
        check: Step | StepRef,
        check_result: str,
        change: StepRef | None,
        answer: Step,
        claim: str,
        run: Run,
        targets: frozenset[str] = frozenset(),
    ) -> Finding:
        # What the check read, named: the changed resource, else the first line it showed.
        what = (
            ", ".join(sorted(targets)) or short(check_result.strip().splitlines()[0], 80)
            if (targets or check_result.strip())
            else ""
        )
        early = (
            change is not None
            and (check.start_ns - change.end_ns) / 1e9 < self.detector.config.min_settle_seconds
        )
        evidence = [s for s in (change, check, answer) if s is not None]
        if early:
            assert change is not None
            delay = (check.start_ns - change.end_ns) / 1e9
            return self.detector.finding(
                at=check,
                rule="checked_too_early",
                confidence=0.75,
                message=(
                    f"{check.tool_name} checked {what} {delay:.1f}s after the change, still "
                    f"saw it unhealthy, and the run declared success"
                ),
                evidence=evidence,
                values={
                    "seconds_after_change": round(delay, 3),
                    "settle_seconds": self.detector.config.min_settle_seconds,
                    "check_result": short(check_result),
                    "claim": claim,
                },
                run=run,
            )
        return self.detector.finding(
            at=check,
            rule="claimed_despite_unhealthy",
            confidence=0.85,
            message=(
                f"the run declared success while {check.tool_name} still showed a problem"
                + (f" ({what})" if what else "")
            ),
            evidence=evidence,
            values={"check_result": short(check_result), "claim": claim},
            run=run,
        )


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
