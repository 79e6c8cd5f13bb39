"""FM-2.3's detector and its one rule, `off_task`: `min_off_task_steps` tool calls in a row act
on resources (services, pods, namespaces, files: the targets named in their arguments) that
share nothing with the task or with the evidence gathered on task so far. Calls that name no
resource are neutral; one whose argument is a value the task or the evidence gave (a look-up
by the email the user wrote) adds its result to the evidence. Evidence grows only from on-task
calls, so wandering further from the task does not make the wandering look relevant. A target
is related when it is named as it is or as the whole words it is written with (`#W7713055` by
"W7713055").

- Fires: the task is "checkout in namespace shop is failing"; after one call on the shop pods,
  four calls in a row act on billing (its pods, then the payments deployment, its logs, its
  config map): reported at the fourth, citing the four. So does a look-up by a username nobody
  gave (mkowalski, when the user wrote jalvarez) followed by four calls on the employee id it
  returned: that result never joined the evidence.
- Near miss: four calls on the pods, deployment, logs and events of shop: on task. A look-up
  by the username the user gave (jalvarez) puts the employee id it returns on task, so the
  calls on that id are too. Four calls on order `#W8843120` after the user wrote "my order
  #W8843120" are on task. Six calls of `get_alerts {}` name no resource and are neutral.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mast_otel.processors import conventions
from mast_otel.processors.detectors.base import (
    Detector,
    DetectorContext,
    DetectorFactory,
    json_doc,
)
from mast_otel.processors.detectors.derailment.config import DerailmentConfig
from mast_otel.processors.detectors.derailment.context import DerailmentContext
from mast_otel.processors.detectors.signals import named, words
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_HANDOFF = StepKind.HANDOFF
_HUMAN = StepKind.HUMAN
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL

_MAX_WORDS = 50_000


class Derailment(Detector):
    mode = "FM-2.3"
    name = "derailment"
    version = "1.0"
    config: DerailmentConfig

    def __init__(self, config: Any, context: DetectorContext) -> None:
        super().__init__(config, context)
        self.context = DerailmentContext(self.config, self.classifier, self.report)

    def open(self, run: Run) -> DetectorRun:
        return _DerailmentRun(self.context)


class _DerailmentRun(DetectorRun):
    __slots__ = ("context", "off_task", "relevant", "reported", "task_known")
    kinds = frozenset({StepKind.HUMAN, StepKind.HANDOFF, StepKind.LLM, StepKind.TOOL})

    def __init__(self, context: DerailmentContext) -> None:
        self.context = context
        self.relevant: set[str] = set()
        self.task_known = False
        # The current stretch of off-task calls and their targets (until one is reported).
        self.off_task: list[tuple[StepRef, frozenset[str]]] = []
        self.reported = False

    def _learn(self, text: str) -> None:
        if len(self.relevant) < _MAX_WORDS:
            self.relevant |= words(text)

    def _asks_known(self, arguments: str) -> bool:
        """A string argument of the call is a value the task or the evidence named."""
        parsed = json_doc(arguments)  # the parse other detectors of the step share
        if not isinstance(parsed, dict):
            return False
        return any(
            isinstance(v, str) and named(v.strip().lower(), self.relevant) for v in parsed.values()
        )

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        task = run.attributes.get(conventions.TASK_DESCRIPTION)
        if isinstance(task, str) and not self.task_known:
            self._learn(task)
            self.task_known = True
        if step.kind in (_HUMAN, _HANDOFF) or (step.kind is _LLM and not self.task_known):
            self._learn(step.input_text)
            self.task_known = self.task_known or bool(step.input_text)
            return ()
        if step.kind is not _TOOL or not step.tool_name or not self.task_known:
            return ()
        targets = self.context.classifier.classify(step.tool_name, step.tool_arguments).targets
        if not targets:
            if not step.failed and self._asks_known(step.tool_arguments):
                self._learn(step.tool_result)
            return ()
        if any(named(t, self.relevant) for t in targets):
            self.off_task = []
            self.relevant |= targets
            if not step.failed:
                self._learn(step.tool_result)
            return ()
        if self.reported:
            return ()
        self.off_task.append((run.ref(step), targets))
        if len(self.off_task) < self.context.config.min_off_task_steps:
            return ()
        self.reported = True
        drift = sorted({t for _, call_targets in self.off_task for t in call_targets})
        return [
            self.context.report.finding(
                at=step,
                rule="off_task",
                confidence=0.7,
                message=(
                    f"{len(self.off_task)} tool calls in a row on {', '.join(drift[:5])}, "
                    f"unrelated to the task and the evidence so far"
                ),
                evidence=[ref for ref, _ in self.off_task],
                values={"off_task_targets": drift, "steps": len(self.off_task)},
                run=run,
            )
        ]


FACTORY = DetectorFactory(
    type="derailment", mode="FM-2.3", config=DerailmentConfig, create=Derailment
)
