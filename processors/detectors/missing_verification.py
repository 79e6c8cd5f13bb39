"""FM-3.2 No or incomplete verification: the agent changed the system and never looked.

Rule `unverified_change`: a successful mutating call (a tool whose name says it changes
something, a command that writes, as `classification` decides) is not followed, before the run
ends, by a successful read-only call on the same resource: one whose arguments name a resource
the change named (a reservation id, a deployment, a file; compared as structured targets by
`classify.covers`: the same resource in a namespace that agrees, a pod of the changed workload,
a listing of its kind or of its pods in its namespace), or, when the read names nothing, a
tool whose name says it checks the system (alerts, health, status: `check_tool_pattern`).
When the run did read other resources after the change and then declared success, the check
looked in the wrong place: that is incorrect verification (FM-3.3), reported there instead.
A change whose own result is a structured record naming the changed resource (an API returning
the updated reservation or ticket) reported its new state: with `result_state_verifies` that
counts as its check (hand labels of a customer-service corpus never called such a change
unverified; a plain "configured" or "ok" does not count); so does one whose result gives a
record id its arguments did not (the ticket or booking it created).

Rule `unchecked_record`: a mutating call acts on a record id (`reservation_id`, a nested
`payment_id`, `ticket_id`: argument keys the classifier reads as ids) that no earlier tool
result showed and no earlier successful read was asked about: the id came only from the
conversation or was made up, and the facts the change relies on were never looked at.

Rule `verdict_without_read` (missing_verification_verdict.py): the agent rules on the user's
own case ("you are eligible", "your booking cannot be refunded") before any read at all.

Rule `unchecked_figure` (missing_verification_figures.py): a change carried a figure the user
gave, which no calculation of the run produced, and was rejected with the system's figure.

Rule `superlative_over_partial_search` (missing_verification_partial.py): the agent calls an
option the cheapest (fastest, ...) after running only some of the tools that take the query,
or only tools whose names limit them to part of the options.

Decided when the run closes, at the span of the unchecked change; at most
`max_findings_per_run` findings per run. The study's remedy: externalize verification, so that
tool evidence (a cleared alert, the changed state) is required before the agent may declare
success.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory, short
from mast_otel.processors.detectors.missing_verification_figures import UserFigures
from mast_otel.processors.detectors.missing_verification_partial import PartialSearches
from mast_otel.processors.detectors.missing_verification_verdict import Verdicts
from mast_otel.processors.detectors.verification import (
    DEFAULT_FAILURE_RESULT_PATTERN,
    ChangeLedger,
    created_record,
    reports_state,
)
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import DetectorRun, Run

# What a check is called (a tool's name, or the command a runner tool is given).
DEFAULT_CHECK_TOOL_PATTERN = r"alert|health|status|verify|check|probe|metric|monitor|\btest|pytest"


@dataclass
class MissingVerificationConfig:
    """FM-3.2 no or incomplete verification: a change never checked before the run ends."""

    # Run this detector.
    enabled: bool = True
    # Read-only calls with no resource named in their arguments still verify a change when
    # their tool's name (or the command they run) says it checks the system (alerts, health,
    # status, a test suite, ...).
    check_tool_pattern: str = r"alert|health|status|verify|check|probe|metric|monitor|\btest|pytest"
    # Unchecked changes reported per run (the last ones, when a run leaves more unchecked).
    max_findings_per_run: int = 5
    # Mutating calls remembered per run awaiting their check.
    max_tracked_mutations: int = 256
    # A change whose own result is a structured record (JSON) naming the changed resource
    # reported its new state: that counts as its check.
    result_state_verifies: bool = True
    # Report mutating calls on record ids no earlier tool result or read showed.
    check_records_read_before: bool = True
    # Words of earlier tool results remembered per run to know which ids were shown.
    max_remembered_words: int = 50_000
    # The result of a change that says it did not happen (case-insensitive regular
    # expression), besides an error status, for `unchecked_figure`. "" leaves only the status.
    failure_result_pattern: str = DEFAULT_FAILURE_RESULT_PATTERN
    # Numbers below this are not figures for `unchecked_figure` (list markers, small counts).
    min_figure: float = 10.0
    # Report a change rejected with the system's figure against one the user gave.
    check_user_figures: bool = True
    # A verdict on the user's own case, or compensation offered for it
    # (`verdict_without_read`); "" turns the rule off.
    verdict_pattern: str = (
        r"\b(?:you are|you're|you will be|you'll be|you would be|it is|it's|this is|they are)"
        r"\s+(?:not\s+)?(?:eligible|entitled)\b|\b(?:neither|none)\b[^.?!]{0,40}\bappl(?:y|ies)"
        r" to your\b|\byour \w+(?: \w+)? (?:is|are) (?:not )?(?:eligible|entitled)\b|"
        r"\byour \w+(?: \w+)? (?:cannot|can't|can not) be \w+ed\b|"
        r"\bI (?:can|could|will) (?:only )?(?:offer|issue|grant) (?:you )?(?:a|an) (?:\$?\d+ )?"
        r"(?:certificate|voucher|credit|refund|compensation|discount|replacement)\b"
    )
    # A sentence that only weighs a verdict (a condition, a hedge, an intention to check).
    verdict_hedge_pattern: str = (
        r"\b(?:if|whether|unless|may|might|could|determine|check|verify|confirm|once|need)\b"
    )

    # The agent calling an option the best of all (`superlative_over_partial_search`); ""
    # turns the rule off.
    superlative_pattern: str = (
        r"\b(?:cheapest|fastest|quickest|shortest|earliest|least expensive|most affordable|"
        r"lowest[- ](?:priced|cost|fare|price))\b"
    )
    # A sentence that only intends to look, asks, or weighs a condition: no claim.
    superlative_hedge_pattern: str = (
        r"\b(?:let me|I will|I'll|I need to|to find|search(?:ing)? for|look(?:ing)? for|if|"
        r"whether)\b"
    )
    # Words of a search tool's name saying it covers only part of the options (whole words,
    # case-insensitive regular expression): the best-of-all claim after that tool alone is
    # `superlative_over_partial_search` even when no other tool taking the query ran. ""
    # leaves the rule to tools seen taking the same query.
    scoped_search_pattern: str = r"direct|nonstop|onestop|local|nearby|regional"
    # Read tools remembered per run and agent (service) with the argument names of their
    # queries, to know which tools take the same query.
    max_known_query_tools: int = 256

    def validate(self) -> None:
        if self.max_known_query_tools < 1:
            raise ValueError("detectors.missing_verification.max_known_query_tools must be >= 1")
        if self.max_remembered_words < 1:
            raise ValueError("detectors.missing_verification.max_remembered_words must be >= 1")
        if self.max_findings_per_run < 1 or self.max_tracked_mutations < 1:
            raise ValueError(
                "detectors.missing_verification.max_findings_per_run and "
                "max_tracked_mutations must be at least 1"
            )
        keys = (
            "check_tool_pattern",
            "verdict_pattern",
            "verdict_hedge_pattern",
            "superlative_pattern",
            "superlative_hedge_pattern",
            "scoped_search_pattern",
        )
        for key in (*keys, "failure_result_pattern"):
            try:
                re.compile(getattr(self, key))
            except re.error as exc:
                raise ValueError(
                    f"detectors.missing_verification.{key}: invalid regular expression ({exc})"
                ) from exc


# The name under which this detector offers its change ledgers to the detectors created after
# it (FM-3.3 reads them instead of following the same calls again).
CHANGE_LEDGERS = "change_ledgers"


class MissingVerification(Detector):
    mode = "FM-3.2"
    name = "missing_verification"
    version = "1.1"
    config: MissingVerificationConfig

    def __init__(self, config: Any, context: DetectorContext) -> None:
        super().__init__(config, context)
        # Compiled once, not at every run's opening.
        self.check_tool = re.compile(self.config.check_tool_pattern, re.IGNORECASE)
        c = self.config
        self.verdict = re.compile(c.verdict_pattern, re.IGNORECASE) if c.verdict_pattern else None
        self.verdict_hedge = re.compile(c.verdict_hedge_pattern, re.IGNORECASE)
        failure = c.failure_result_pattern
        self.failure_result = re.compile(failure, re.IGNORECASE) if failure else None
        best = c.superlative_pattern
        self.superlative = re.compile(best, re.IGNORECASE) if best else None
        self.superlative_hedge = re.compile(c.superlative_hedge_pattern, re.IGNORECASE)
        scoped = c.scoped_search_pattern
        self.scoped_search = re.compile(scoped, re.IGNORECASE) if scoped else None
        # Set when FM-3.3 reads the same ledger (`share_ledger`): the run opened last and its
        # ledger, until FM-3.3 opens its state for that run and takes it.
        self.sharing = False
        self._opened: tuple[Run, ChangeLedger] | None = None
        context.offer(CHANGE_LEDGERS, self)

    def open(self, run: Run) -> DetectorRun:
        state = _MissingVerificationRun(self)
        if self.sharing:
            self._opened = (run, state.ledger)
        return state

    def share_ledger(self) -> None:
        """Let another detector read this detector's ledger of each run (`take_ledger`)
        instead of following the same steps into a ledger of its own."""
        self.sharing = True

    def take_ledger(self, run: Run) -> ChangeLedger | None:
        """The ledger of the run opened last, if it is `run` (else None: keep your own)."""
        opened, self._opened = self._opened, None
        if opened is None or opened[0] is not run:
            return None
        return opened[1]

    def ledger_matches(self, check_tool: re.Pattern[str], max_changes: int) -> bool:
        """Whether this detector's ledgers follow calls exactly as one with these settings."""
        return (
            self.check_tool.pattern == check_tool.pattern
            and self.check_tool.flags == check_tool.flags
            and self.config.max_tracked_mutations == max_changes
        )


_WORD = re.compile(r"[a-z0-9][a-z0-9_.@:/-]*[a-z0-9]|[a-z0-9]")


@lru_cache(maxsize=16)
def _words_of(result: str) -> tuple[str, ...]:
    """A result's words, each once, in order (a result repeated across runs: read once)."""
    return tuple(dict.fromkeys(_WORD.findall(result.lower())))


_MUTATING = ActionKind.MUTATING
_READ = ActionKind.READ
_TOOL = StepKind.TOOL
_HUMAN = StepKind.HUMAN


class _MissingVerificationRun(DetectorRun):
    __slots__ = (
        "config",
        "detector",
        "figures",
        "ledger",
        "partial",
        "reported",
        "self_reported",
        "shown",
        "unchecked",
        "verdicts",
    )
    kinds = frozenset({StepKind.LLM, StepKind.TOOL, StepKind.HUMAN})

    def __init__(self, detector: MissingVerification) -> None:
        self.detector = detector
        self.config = detector.config
        self.ledger = ChangeLedger(
            detector.classifier,
            detector.signals,
            detector.check_tool,
            self.config.max_tracked_mutations,
        )
        # Changes whose own result reported the changed resource's new state (span ids).
        self.self_reported: set[str] = set()
        # Words of earlier tool results and ids earlier reads were asked about.
        self.shown: set[str] = set()
        # (call, ids no earlier result showed), in run order; reported at close.
        self.unchecked: list[tuple[StepRef, str, list[str]]] = []
        self.reported: set[str] = set()
        self.verdicts = Verdicts(detector)
        self.figures = UserFigures(detector) if self.config.check_user_figures else None
        self.partial = PartialSearches(detector)

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        self.partial.observe(step, run)
        if step.kind is _HUMAN:
            return ()
        self.ledger.observe(step, run)
        self.verdicts.observe(step, run)
        if self.figures is not None:
            self.figures.observe(step, run)
        if step.kind is not _TOOL or not step.tool_name:
            return ()
        classifier = self.detector.classifier
        action = classifier.classify(step.tool_name, step.tool_arguments)
        if action.kind is _MUTATING:
            if self.config.check_records_read_before:
                ids = classifier.identifiers(step.tool_arguments)
                missing = sorted(i for i in ids if i not in self.shown)
                if missing and len(self.unchecked) < self.config.max_tracked_mutations:
                    self.unchecked.append((run.ref(step), step.tool_arguments, missing))
            if (
                self.config.result_state_verifies
                and not step.failed
                and (
                    reports_state(step.tool_result, action.targets)
                    or created_record(classifier.identifiers(step.tool_result), step.tool_arguments)
                )
            ):
                self.self_reported.add(step.span_id)
        if not step.failed:
            if action.kind is _READ:
                self._remember(classifier.identifiers(step.tool_arguments))
            self._remember(_words_of(step.tool_result))
        return ()

    def _remember(self, words: Collection[str]) -> None:
        room = self.config.max_remembered_words - len(self.shown)
        if len(words) <= room:
            self.shown.update(words)  # every new one fits
            return
        for word in words:
            if room <= 0:
                return
            if word not in self.shown:
                self.shown.add(word)
                room -= 1

    def on_close(self, run: Run) -> Iterable[Finding]:
        claimed = self.ledger.claims_success()
        unchecked = [
            c
            for c in self.ledger.changes
            if not c.checks
            and not (claimed and c.other_reads)
            and c.ref.span_id not in self.self_reported
        ]
        findings = []
        for change in unchecked[-self.config.max_findings_per_run :]:
            step = change.ref
            reads = [read.ref for read in change.other_reads[-5:]]
            what = ", ".join(sorted(change.targets)) or "the system"
            findings.append(
                self.detector.finding(
                    at=step,
                    rule="unverified_change",
                    confidence=0.85 if not reads else 0.75,
                    message=(
                        f"{step.tool_name} changed {what} and the run ended without checking "
                        f"the result"
                    ),
                    evidence=[step, *reads],
                    values={
                        "tool": step.tool_name,
                        "arguments": short(change.arguments),
                        "targets": sorted(change.targets),
                        "reads_after_on_other_resources": [s.tool_name for s in reads],
                        "run_closed_by": run.closed_by,
                    },
                    run=run,
                )
            )
        for ref, arguments, missing in self.unchecked[: self.config.max_findings_per_run]:
            findings.append(
                self.detector.finding(
                    at=ref,
                    rule="unchecked_record",
                    confidence=0.7,
                    message=(
                        f"{ref.tool_name} acted on {', '.join(missing[:5])}, which no earlier "
                        f"tool result showed: the facts the change relies on were never read"
                    ),
                    evidence=[ref],
                    values={
                        "tool": ref.tool_name,
                        "arguments": short(arguments),
                        "unread_ids": missing[:20],
                    },
                    run=run,
                )
            )
        figures = self.figures.close(run) if self.figures is not None else []
        return [*findings, *self.verdicts.close(run), *figures, *self.partial.close(run)]


FACTORY = DetectorFactory(
    type="missing_verification",
    mode="FM-3.2",
    config=MissingVerificationConfig,
    create=MissingVerification,
)
