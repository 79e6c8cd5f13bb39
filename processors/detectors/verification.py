"""What FM-3.2 and FM-3.3 both need: each change the run made, the reads that followed it,
and whether the run ended claiming success."""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field

from processors.classify import ActionClassifier, ActionKind
from processors.detectors.signals import Signals, is_final_answer
from processors.model import Step, StepKind

_KEPT_READS = 8


@dataclass(slots=True)
class Change:
    step: Step
    targets: frozenset[str]
    # The latest successful reads on its targets, and on other resources.
    checks: deque[Step] = field(default_factory=lambda: deque(maxlen=_KEPT_READS))
    other_reads: deque[Step] = field(default_factory=lambda: deque(maxlen=_KEPT_READS))


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
        self.last_read: Step | None = None

    def observe(self, step: Step) -> None:
        if step.kind is StepKind.LLM:
            self.final_answer = step if is_final_answer(step) else None
            return
        if step.kind is not StepKind.TOOL or not step.tool_name or step.failed:
            return
        self.final_answer = None
        action = self.classifier.classify(step.tool_name, step.tool_arguments)
        if action.kind is ActionKind.MUTATING:
            self.changes.append(Change(step, action.targets))
            if len(self.changes) > self.max_changes:
                self.changes.pop(0)
                self.dropped += 1
            return
        if action.kind is not ActionKind.READ:
            return
        self.last_read = step
        generic = not action.targets and bool(self.check_tool.search(step.tool_name))
        for change in self.changes:
            if generic or not change.targets or change.targets & action.targets:
                change.checks.append(step)
            else:
                change.other_reads.append(step)

    def claims_success(self) -> bool:
        answer = self.final_answer
        return answer is not None and self.signals.claims_success(answer.output_text)
