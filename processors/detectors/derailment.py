"""FM-2.3 Task derailment: the agent drifts to work unrelated to its task.

Rule `off_task`: `min_off_task_steps` tool calls in a row act on resources (services, pods,
namespaces, files: the targets named in their arguments) that share nothing with the task or
with the evidence gathered on task so far. Calls that name no resource are neutral; one whose
argument is a value the task or the evidence gave (a look-up by the email the user wrote)
adds its result to the evidence. Evidence grows only from on-task calls, so wandering further
from the task does not make the wandering look relevant. A target is related when it is
named as it is or as the whole words it is written with (`#W7713055` by "W7713055").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from mast_otel.processors import conventions
from mast_otel.processors.detectors.base import Detector, DetectorFactory, json_doc
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


@dataclass
class DerailmentConfig:
    """FM-2.3 task derailment: tool calls in a row on resources unrelated to the task and its
    evidence."""

    # Run this detector.
    enabled: bool = True
    # Consecutive tool calls on resources unrelated to the task and the evidence so far.
    min_off_task_steps: int = 4

    def validate(self) -> None:
        """Every value of this section is valid."""


class Derailment(Detector):
    mode = "FM-2.3"
    name = "derailment"
    version = "1.0"
    config: DerailmentConfig

    def open(self, run: Run) -> DetectorRun:
        return _DerailmentRun(self)


class _DerailmentRun(DetectorRun):
    __slots__ = ("config", "detector", "off_task", "relevant", "reported", "task_known")
    kinds = frozenset({StepKind.HUMAN, StepKind.HANDOFF, StepKind.LLM, StepKind.TOOL})

    def __init__(self, detector: Derailment) -> None:
        self.detector = detector
        self.config = detector.config
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
        targets = self.detector.classifier.classify(step.tool_name, step.tool_arguments).targets
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
        if len(self.off_task) < self.config.min_off_task_steps:
            return ()
        self.reported = True
        drift = sorted({t for _, call_targets in self.off_task for t in call_targets})
        return [
            self.detector.finding(
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
