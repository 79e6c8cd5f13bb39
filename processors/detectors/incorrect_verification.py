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
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from mast_otel.processors import conventions
from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory, short
from mast_otel.processors.detectors.missing_verification import (
    CHANGE_LEDGERS,
    DEFAULT_CHECK_TOOL_PATTERN,
    MissingVerification,
)
from mast_otel.processors.detectors.records import record_asked_for
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


@dataclass
class IncorrectVerificationConfig:
    """FM-3.3 incorrect verification: success declared while the last check shows trouble, or a
    check made too early."""

    # Run this detector.
    enabled: bool = True
    # A check sooner than this after the change may not see its effect yet.
    min_settle_seconds: float = 5.0
    # The result of a change that says it did not happen (case-insensitive regular
    # expression), besides an error status. "" leaves only the error status.
    failure_result_pattern: str = (
        r"^\W*(error|failed|failure|exception)\b|\b(insufficient|not enough|not allowed|"
        r"not permitted|permission denied|access denied|forbidden|rejected|declined)\b"
    )
    # A model output that tells the user a change succeeded.
    success_statement_pattern: str = (
        r"\b(has|have) been (successfully )?(\w+ed|sent|made|done)\b|\bsuccessfully\b|"
        r"\bis (now )?(complete|confirmed|done)\b|\ball set\b"
    )
    # Identifiers of a shape a record can be checked against (regular expressions); an
    # empty list turns `identity_mismatch` off.
    identity_patterns: list[str] = field(default_factory=lambda: [r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"])
    # The model noticing the record is not the user's.
    mismatch_pattern: str = (
        r"\b(does not|doesn't|do not|don't) match|\bmismatch|\bdifferent (email|account|"
        r"address|profile|user)|\bnot the same\b|\bcould not (verify|confirm)"
    )

    # The current date in the run's instructions (`mast.task.description`): the first group
    # is an ISO date (YYYY-MM-DD). "" turns `change_on_past_record` off.
    current_date_pattern: str = (
        r"\bcurrent (?:date|time|day)(?: is|:)\s*(?:now\s*)?(\d{4}-\d{2}-\d{2})"
    )
    # Records read and changes on them remembered per run for `change_on_past_record`.
    max_tracked_records: int = 256
    # Item dates more than this many days before the current date (a birth date) are not
    # the record's business; a record needs a dated item within them.
    past_window_days: int = 365
    # `change_on_past_record` findings per run (one per record).
    max_findings_per_run: int = 3

    def validate(self) -> None:
        """Every value of this section is valid."""
        for key in ("max_tracked_records", "past_window_days", "max_findings_per_run"):
            if getattr(self, key) < 1:
                raise ValueError(f"detectors.incorrect_verification.{key} must be >= 1")
        if self.current_date_pattern:
            try:
                groups = re.compile(self.current_date_pattern).groups
            except re.error as exc:
                raise ValueError(
                    f"detectors.incorrect_verification.current_date_pattern: invalid regular "
                    f"expression ({exc})"
                ) from exc
            if groups < 1:
                raise ValueError(
                    "detectors.incorrect_verification.current_date_pattern needs a group: the date"
                )
        patterns = [
            ("failure_result_pattern", self.failure_result_pattern),
            ("success_statement_pattern", self.success_statement_pattern),
            ("mismatch_pattern", self.mismatch_pattern),
            *(("identity_patterns", p) for p in self.identity_patterns),
        ]
        for name, pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(
                    f"detectors.incorrect_verification.{name}: invalid regular expression ({exc})"
                ) from exc


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


class _Conclusions:
    """What the model concluded from results as the run went: success told after a failed
    change, a record taken for the user's though its identifier differs."""

    __slots__ = (
        "changes",
        "detector",
        "failed",
        "given",
        "records",
        "reported",
        "suspect",
        "user_text",
    )

    def __init__(self, detector: IncorrectVerification) -> None:
        self.detector = detector
        self.failed: tuple[StepRef, str, str] | None = None  # (call, call text, its result)
        self.given: set[str] = set()  # identifiers the user gave, lower-cased
        # A record read whose identifier is not the user's: (lookup, given, found), until the
        # model's next words say whether it noticed.
        self.suspect: tuple[StepRef, str, str] | None = None
        self.reported: set[str] = set()
        self.user_text = ""
        # Records read by id: id -> (the read, the dates of its dated items).
        self.records: dict[str, tuple[StepRef, tuple[str, ...]]] = {}
        # Changes on records read before: (change, its call, id, the read, item dates).
        self.changes: list[tuple[StepRef, str, str, StepRef, tuple[str, ...]]] = []

    def observe(self, step: Step, run: Run) -> list[Finding]:
        if step.kind is _HUMAN:
            self._user(step.input_text or step.output_text)
        elif step.kind is _TOOL and step.tool_name:
            return self._tool(step, run)
        elif step.kind is _LLM:
            self._user(step.input_text)
            return self._model(step, run)
        return []

    def _user(self, text: str) -> None:
        if not text or text == self.user_text:
            return
        self.user_text = text
        for pattern in self.detector.identities:
            self.given |= {m.group().lower().rstrip(".") for m in pattern.finditer(text)}

    def _tool(self, step: Step, run: Run) -> list[Finding]:
        detector = self.detector
        action = detector.classifier.classify(step.tool_name, step.tool_arguments)
        result = step.tool_result or step.error
        if action.kind is _MUTATING:
            failure = detector.failure_result
            if step.failed or (failure is not None and failure.search(result[:2000])):
                call = f"{step.tool_name}({short(step.tool_arguments, 160)})"
                self.failed = (run.ref(step), call, short(result, 200))
            else:
                self.failed = None
                self._change(step, run)
        elif detector.current_date is not None and not step.failed:
            self._read(step, run)
        if self.given and result and self.suspect is None:
            self._identity(step, result, run)
        return []

    def _read(self, step: Step, run: Run) -> None:
        """Remember the dated items of a record a read asked for by id."""
        asked = record_asked_for(self.detector.classifier, step)
        if asked is None:
            return
        record, ids = asked
        dates = _item_dates(record)
        for one in ids:
            if one in self.records or len(self.records) < self.detector.config.max_tracked_records:
                if dates:
                    self.records[one] = (run.ref(step), tuple(dates))
                else:
                    self.records.pop(one, None)

    def _change(self, step: Step, run: Run) -> None:
        if len(self.changes) >= self.detector.config.max_tracked_records:
            return
        for one in sorted(self.detector.classifier.identifiers(step.tool_arguments)):
            if one in self.records:
                read, dates = self.records[one]
                call = f"{step.tool_name}({short(step.tool_arguments, 160)})"
                self.changes.append((run.ref(step), call, one, read, dates))

    def close(self, run: Run) -> list[Finding]:
        """`change_on_past_record`: changes on records whose items all lie before the current
        date the run's instructions give."""
        pattern = self.detector.current_date
        if pattern is None or not self.changes:
            return []
        instructions = str(run.attributes.get(conventions.TASK_DESCRIPTION) or "")
        match = pattern.search(instructions[:100_000])
        if match is None:
            return []
        today = match.group(1)
        window = self.detector.config.past_window_days
        out: list[Finding] = []
        seen: set[str] = set()
        for change, call, one, read, all_dates in self.changes:
            if one in seen or len(out) >= self.detector.config.max_findings_per_run:
                continue
            # Dates long before today (a birth date, an archive date) say nothing of whether
            # the record's business is still to come.
            recent = []
            for day in all_dates:
                days = _days_between(day, today)
                if days is None:
                    break
                if days <= window:
                    recent.append(day)
            else:
                if not recent or max(recent) >= today:
                    continue
                latest, count = max(recent), len(recent)
                seen.add(one)
                out.append(
                    self.detector.finding(
                        at=change,
                        rule="change_on_past_record",
                        confidence=0.7,
                        message=(
                            f"{call} acted on {one}, whose record ({read.tool_name}) has all its "
                            f"{count} dated items before the current date the instructions give "
                            f"(latest {latest}, today {today}): the record says it is over and "
                            f"the agent acted as if it were still to come"
                        ),
                        evidence=[read, change],
                        values={
                            "call": call,
                            "record": one,
                            "latest_item_date": latest,
                            "items": count,
                            "current_date": today,
                        },
                        run=run,
                    )
                )
        return out

    def _identity(self, step: Step, result: str, run: Run) -> None:
        for pattern in self.detector.identities:
            found = {m.group().lower().rstrip(".") for m in pattern.finditer(result[:20_000])}
            if len(found) != 1 or found & self.given:
                continue
            looked_up = {m.group().lower() for m in pattern.finditer(step.tool_arguments)}
            if looked_up & found:
                continue
            given = sorted(self.given)[0]
            self.suspect = (run.ref(step), given, next(iter(found)))
            return

    def _model(self, step: Step, run: Run) -> list[Finding]:
        out: list[Finding] = []
        text = step.output_text
        detector = self.detector
        if self.suspect is not None and (text or step.tool_calls):
            lookup, given, found = self.suspect
            self.suspect = None
            if not detector.mismatch.search(text) and "identity_mismatch" not in self.reported:
                self.reported.add("identity_mismatch")
                out.append(
                    detector.finding(
                        at=lookup,
                        rule="identity_mismatch",
                        confidence=0.7,
                        message=(
                            f"{lookup.tool_name} returned a record for {found}, the user gave "
                            f"{given}, and the agent went on as if it were the user's"
                        ),
                        evidence=[lookup, step],
                        values={"given": given, "found": found, "said": short(text)},
                        run=run,
                    )
                )
        if (
            self.failed is not None
            and text
            and "success_after_failed_change" not in self.reported
            and detector.success_statement.search(text)
            and not detector.signals.negation.found(text)
        ):
            ref, call, result = self.failed
            self.reported.add("success_after_failed_change")
            out.append(
                detector.finding(
                    at=step,
                    rule="success_after_failed_change",
                    confidence=0.8,
                    message=(
                        f"{call} failed ({result!r}) and the model told the user it succeeded: "
                        f"{short(text, 160)!r}"
                    ),
                    evidence=[ref, step],
                    values={"call": call, "result": result, "said": short(text)},
                    run=run,
                )
            )
        return out


class _IncorrectVerificationRun(DetectorRun):
    __slots__ = ("conclusions", "config", "detector", "ledger")
    kinds = frozenset({StepKind.LLM, StepKind.TOOL, StepKind.HUMAN})

    def __init__(self, detector: IncorrectVerification, ledger: ChangeLedger | None = None) -> None:
        self.detector = detector
        self.config = detector.config
        self.ledger = (
            ledger
            if ledger is not None
            else ChangeLedger(detector.classifier, detector.signals, _CHECK_TOOL, _MAX_CHANGES)
        )
        self.conclusions = _Conclusions(detector)

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        if step.kind is not _HUMAN:
            self.ledger.observe(step, run)
        return self.conclusions.observe(step, run)

    def on_close(self, run: Run) -> Iterable[Finding]:
        return [*self.conclusions.close(run), *self._claims(run)]

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
            and (check.start_ns - change.end_ns) / 1e9 < self.config.min_settle_seconds
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
                    "settle_seconds": self.config.min_settle_seconds,
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

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        return self.conclusions.observe(step, run)


_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}(?:$|[T ]\d)")


def _item_dates(record: dict[str, Any]) -> list[str]:
    """The date (YYYY-MM-DD) of each dated item of a record: the latest date among the string
    fields of each object in its top-level lists (a reservation's flights, an order's
    shipments, a ticket's events). The record's own fields (when it was created) are not
    items."""
    dates: list[str] = []
    for value in record.values():
        if not isinstance(value, list):
            continue
        for item in value[:256]:
            if not isinstance(item, dict):
                continue
            held = [v[:10] for v in item.values() if isinstance(v, str) and _ISO_DATE.match(v)]
            if held:
                dates.append(max(held))
    return dates


def _days_between(earlier: str, later: str) -> int | None:
    try:
        return (date.fromisoformat(later) - date.fromisoformat(earlier)).days
    except ValueError:
        return None


FACTORY = DetectorFactory(
    type="incorrect_verification",
    mode="FM-3.3",
    config=IncorrectVerificationConfig,
    create=IncorrectVerification,
)
