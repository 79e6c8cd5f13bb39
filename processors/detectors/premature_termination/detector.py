"""FM-3.1's detector: each run's state keeps the run's `Course` (what the run did, which the
rules on its ending judge at close: ending.py), the last empty answer until something follows
it (for `reprompted`: reprompted.py), and gives model calls and successful calls to
`refused_what_tools_return` (refused_what_tools_return.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory
from mast_otel.processors.detectors.premature_termination.config import (
    PrematureTerminationConfig,
)
from mast_otel.processors.detectors.premature_termination.context import (
    PrematureTerminationContext,
    build_context,
)
from mast_otel.processors.detectors.premature_termination.ending import Course, Ending, blank
from mast_otel.processors.detectors.premature_termination.refused_what_tools_return import (
    RefusedWhatToolsReturn,
)
from mast_otel.processors.detectors.premature_termination.reprompted import Reprompted
from mast_otel.processors.model import Finding, Step, StepKind
from mast_otel.processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_MUTATING = ActionKind.MUTATING
_READ = ActionKind.READ
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL
_HUMAN = StepKind.HUMAN
_HANDOFF = StepKind.HANDOFF


class PrematureTermination(Detector):
    mode = "FM-3.1"
    name = "premature_termination"
    version = "1.0"
    config: PrematureTerminationConfig

    def __init__(self, config: Any, context: DetectorContext) -> None:
        super().__init__(config, context)
        self.context = build_context(self.config, context, self.report)
        self.ending = Ending(self.context)

    def open(self, run: Run) -> DetectorRun:
        return _PrematureRun(self.context, self.ending)


class _PrematureRun(DetectorRun):
    __slots__ = ("classifier", "course", "empty", "ending", "refused", "reprompted")
    kinds = frozenset({StepKind.LLM, StepKind.TOOL, StepKind.HUMAN, StepKind.HANDOFF})

    def __init__(self, context: PrematureTerminationContext, ending: Ending) -> None:
        self.classifier = context.classifier
        self.ending = ending
        self.course = Course()
        # The last model response, if it was empty (no text, no call), until something follows.
        self.empty: Step | None = None
        self.reprompted = Reprompted(context)
        self.refused = RefusedWhatToolsReturn(context)

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        course = self.course
        if step.kind is _TOOL and step.tool_name:
            course.last_tool = step
            course.calls += 1
            self.empty = None
            course.human_after_tool = False
            if step.failed or (course.changed and not self.refused.pending):
                return ()
            action = self.classifier.classify(step.tool_name, step.tool_arguments)
            course.changed = course.changed or action.kind is _MUTATING
            acts = action.kind is _MUTATING or action.kind is _READ
            return self.refused.tool_call(step, acts, run)
        elif step.kind is _LLM:
            self.refused.model_call(step, run)
            course.last_model = step
            is_blank = blank(step)
            course.content_seen = course.content_seen or bool(
                step.output_text.strip() or step.tool_calls
            )
            self.empty = step if is_blank and course.content_seen else None
            if not step.tool_calls and not is_blank:
                course.answers += 1
                if course.first_answer is None and course.calls == 0:
                    course.first_answer = step
        elif step.kind is _HANDOFF:
            course.delegated = course.delegated or bool(step.operation or step.tool_name)
        elif step.kind is _HUMAN:
            course.human_after_tool = course.human_after_tool or bool(step.input_text.strip())
            if self.empty is not None:
                self.reprompted.user_turn(self.empty, step)
            self.empty = None
        return ()

    def on_close(self, run: Run) -> Iterable[Finding]:
        return [*self.ending.judge(self.course, run), *self.reprompted.close(run)]


FACTORY = DetectorFactory(
    type="premature_termination",
    mode="FM-3.1",
    config=PrematureTerminationConfig,
    create=PrematureTermination,
)
