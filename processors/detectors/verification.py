"""What FM-3.2 and FM-3.3 both need: each change the run made, the reads that followed it,
and whether the run ended claiming success."""

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
