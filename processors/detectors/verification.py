"""What FM-3.2 and FM-3.3 both need: each change the run made, the reads that followed it,
and whether the run ended claiming success (a ChangeLedger); the ledgers one of them lends the
other (SharedLedgers); and the figures a text states."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mast_otel.processors.classify import ActionClassifier, ActionKind, Target, checks
from mast_otel.processors.detectors.base import json_doc
from mast_otel.processors.detectors.signals import (
    Signals,
    is_final_answer,
    is_team,
    without_last_word,
)
from mast_otel.processors.model import Step, StepKind, StepRef
from mast_otel.processors.run import Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_MUTATING = ActionKind.MUTATING
_READ = ActionKind.READ
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL

_KEPT_READS = 8

# What a check is called (a tool's name, or the command a runner tool is given): FM-3.2's
# default, and FM-3.3's notion of a system-wide check.
DEFAULT_CHECK_TOOL_PATTERN = r"alert|health|status|verify|check|probe|metric|monitor|\btest|pytest"

# The result of a change that says it did not happen (case-insensitive), besides an error
# status: FM-3.2's and FM-3.3's default.
DEFAULT_FAILURE_RESULT_PATTERN = (
    r"^\W*(error|failed|failure|exception)\b|\b(insufficient|not enough|not allowed|"
    r"not permitted|permission denied|access denied|forbidden|rejected|declined)\b"
)


@dataclass(slots=True)
class Read:
    """A successful read-only call after a change: where, what it returned, what it named."""

    ref: StepRef
    result: str
    targets: frozenset[str]


@dataclass(slots=True)
class Change:
    """A successful mutating call and the reads that followed it."""

    ref: StepRef
    # Its arguments (the text a finding about it quotes) and the resources they name.
    arguments: str
    targets: frozenset[str]
    refs: frozenset[Target] = frozenset()
    # How many reads on its targets followed, and the latest of them.
    checks: int = 0
    last_check: Read | None = None
    # The latest reads on other resources (at most `_KEPT_READS`).
    other_reads: list[Read] = field(default_factory=list)


class ChangeLedger:
    """Follows a run's changes and the reads after each; bounded to `max_changes`."""

    def __init__(
        self,
        classifier: ActionClassifier,
        signals: Signals,
        check_tool: re.Pattern[str],
        max_changes: int,
    ) -> None:
        self.classifier = classifier
        self.signals = signals
        self.check_tool = check_tool
        self.max_changes = max_changes
        self.changes: list[Change] = []
        self.dropped = 0
        self.final_answer: Step | None = None
        # The last message without a call since the last call (a team's conclusion).
        self.said: Step | None = None
        self.last_read: Step | None = None

    def observe(self, step: Step, run: Run) -> None:
        if step.kind is _LLM:
            if not is_final_answer(step, run):
                self.final_answer = None
                self.said = step if step.output_text.strip() and not step.tool_calls else None
            elif is_team(run) and not without_last_word(step.output_text):
                # A bare TERMINATE: what the team concluded is the message before it.
                self.final_answer = self.said or step
            else:
                self.final_answer = step
            return
        if step.kind is not _TOOL or not step.tool_name or step.failed:
            return
        self.final_answer = None
        self.said = None
        if step.result_unknown:
            return  # whether the change happened is not known: neither checked nor unchecked
        action = self.classifier.classify(step.tool_name, step.tool_arguments)
        if action.kind is _MUTATING:
            self.changes.append(
                Change(run.ref(step), step.tool_arguments, action.targets, action.refs)
            )
            if len(self.changes) > self.max_changes:
                self.changes.pop(0)
                self.dropped += 1
            return
        if action.kind is not _READ:
            return
        self.last_read = step
        if not self.changes:
            return
        # A read naming nothing checks the system when its tool (or the command it runs: a
        # test suite, a status) says it checks.
        generic = not action.targets and (
            bool(self.check_tool.search(step.tool_name))
            or any(
                self.check_tool.search(command)
                for command in self.classifier.run_commands(step.tool_name, step.tool_arguments)
            )
        )
        read = Read(run.ref(step), step.tool_result, action.targets)
        for change in self.changes:
            # The read names what the change changed (`targets.covers`: the same resource in
            # a namespace that agrees, a pod of the changed workload, a listing of its kind
            # or of its pods in its namespace).
            if generic or not change.refs or checks(change.refs, action.refs):
                change.checks += 1
                change.last_check = read
            else:
                reads = change.other_reads
                reads.append(read)
                if len(reads) > _KEPT_READS:
                    del reads[0]

    def claims_success(self) -> bool:
        answer = self.final_answer
        return answer is not None and self.signals.claims_success(answer.output_text)


# The name under which a detector offers its SharedLedgers to the detectors created after it
# (FM-3.2 offers them; FM-3.3 reads them instead of following the same calls again).
CHANGE_LEDGERS = "change_ledgers"


class SharedLedgers:
    """One detector's ledger of each run, lent to a detector created after it that would follow
    the calls exactly so (the same check-tool pattern and bound): each run's steps are then
    followed once, for both. Offered on the DetectorContext under CHANGE_LEDGERS; the lender
    hands each run's ledger in as it opens the run (`open`), the borrower takes it as it opens
    its own state for the same run (`take`)."""

    __slots__ = ("check_tool", "max_changes", "opened", "sharing")

    def __init__(self, check_tool: re.Pattern[str], max_changes: int) -> None:
        self.check_tool = check_tool
        self.max_changes = max_changes
        # Set once a later detector reads these ledgers (`share`): the run opened last and its
        # ledger, until that detector opens its state for that run and takes it.
        self.sharing = False
        self.opened: tuple[Run, ChangeLedger] | None = None

    def follows_as(self, check_tool: re.Pattern[str], max_changes: int) -> bool:
        """Whether these ledgers follow calls exactly as one with these settings would."""
        return (
            self.check_tool.pattern == check_tool.pattern
            and self.check_tool.flags == check_tool.flags
            and self.max_changes == max_changes
        )

    def share(self) -> None:
        """Keep each run's ledger for a later detector to `take`, instead of it following the
        same steps into a ledger of its own."""
        self.sharing = True

    def open(self, run: Run, ledger: ChangeLedger) -> None:
        """The lender's ledger of `run`, which it has just opened."""
        if self.sharing:
            self.opened = (run, ledger)

    def take(self, run: Run) -> ChangeLedger | None:
        """The ledger of the run opened last, if it is `run` (else None: keep your own)."""
        opened, self.opened = self.opened, None
        if opened is None or opened[0] is not run:
            return None
        return opened[1]


# A standalone number: not glued to letters, digits of an identifier, a date or a time.
_NUMBER = re.compile(r"(?<![\w.:/-])[$€£]?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w:/-]|\.\d)")


def figures(text: str, least: float) -> list[float]:
    """The standalone numbers of `text` that are at least `least`, in order: a figure is not
    part of an identifier, a date or a time, and list markers and small counts fall below
    `least`."""
    out = []
    for match in _NUMBER.finditer(text):
        value = float(match.group(1).replace(",", "") + (match.group(2) or ""))
        if value >= least:
            out.append(value)
    return out


def created_record(result_ids: frozenset[str], arguments: str) -> bool:
    """The result gives a record id the call's arguments did not: the record it created."""
    given = arguments.lower()
    return any(i not in given for i in result_ids)


def reports_state(result: str, targets: frozenset[str]) -> bool:
    """The result is a structured record (a JSON object or list) one of whose fields is a
    changed resource's name or id (`"reservation_id": "ZFA04Y"`): the call reported the
    resource's new state. A name inside a line of text ("Updated the following files: M
    cart.py", "deployment.apps/checkout configured") is not a record of it."""
    if not targets:
        return False
    parsed = json_doc(result)  # the parse other detectors of the step share
    if parsed is None:
        return False
    values: set[str] = set()

    def walk(value: object, depth: int) -> None:
        if depth > 6 or len(values) > 4096:
            return
        if isinstance(value, dict):
            for item in value.values():
                walk(item, depth + 1)
        elif isinstance(value, list):
            for item in value:
                walk(item, depth + 1)
        elif isinstance(value, str | int) and not isinstance(value, bool):
            values.add(str(value).strip().lower())

    walk(parsed, 0)
    return bool(values & targets)
