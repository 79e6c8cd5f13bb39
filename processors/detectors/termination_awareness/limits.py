"""FM-1.5's two rules on the run's limits: the error of a limit it hit, and the step budget it
was given.

`limit_hit`: a failed agent, model or other step whose error matches `signals.limit_pattern`
(max turns, recursion limit, timeout, ...): the run ended on a limit, not on a conclusion.
- Fires: three `kubectl get pods` calls, then the agent's span fails with "GraphRecursionError:
  Recursion limit of 25 reached".
- Near miss: a failed tool call saying "timed out" is a tool's failure the agent may recover
  from, not the run's limit (only agent, model and other steps are read); an agent's span
  failing with "connection refused" names no limit.

`past_budget`: the run attribute `mast.task.max_steps` gives a step budget, and the run's model
and tool steps reach `steps_past_budget` more than it.
- Fires: `mast.task.max_steps: 10`, and the thirteenth model or tool step arrives (10 + 3).
- Near miss: the run ends at its twelfth step: two past the budget, fewer than
  `steps_past_budget`. A budget that is not a positive whole number (`true`, "10", 0) is none.
"""

from __future__ import annotations

from mast_otel.processors import conventions
from mast_otel.processors.detectors.termination_awareness.context import (
    TerminationAwarenessContext,
)
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL
_LIMIT_KINDS = (StepKind.AGENT, StepKind.OTHER, StepKind.LLM)


class Limits:
    """Per run: the model and tool steps counted, the step budget, the rules reported."""

    __slots__ = ("budget", "budget_version", "config", "context", "reported", "steps")

    def __init__(self, context: TerminationAwarenessContext) -> None:
        self.context = context
        self.config = context.config
        self.steps = 0
        # The run's step budget (0: none), read again only when its attributes change.
        self.budget = 0
        self.budget_version = -1
        self.reported: set[str] = set()

    def step(self, step: Step, run: Run) -> list[Finding]:
        """The findings on a step that is not a user's turn."""
        findings: list[Finding] = []
        limit = self.context.signals.limit
        if step.kind in _LIMIT_KINDS and step.failed and limit.found(step.error):
            findings.extend(
                self._report(
                    "limit_hit",
                    step,
                    0.9,
                    f"the run ended on a limit: {step.error[:120]}",
                    {"error": step.error[:300]},
                    run,
                )
            )
        if step.kind is _LLM or step.kind is _TOOL:
            self.steps += 1
            if self.budget_version != run.attributes_version:
                self.budget_version = run.attributes_version
                budget = run.attributes.get(conventions.TASK_MAX_STEPS)
                if isinstance(budget, int) and not isinstance(budget, bool) and budget > 0:
                    self.budget = budget
                else:
                    self.budget = 0
            if self.budget and self.steps == self.budget + self.config.steps_past_budget:
                budget = self.budget
                findings.extend(
                    self._report(
                        "past_budget",
                        step,
                        0.85,
                        f"the run went {self.config.steps_past_budget} steps past its budget "
                        f"of {budget}",
                        {"budget": budget, "steps": self.steps},
                        run,
                    )
                )
        return findings

    def _report(
        self,
        rule: str,
        at: Step | StepRef,
        confidence: float,
        message: str,
        values: dict[str, object],
        run: Run,
    ) -> list[Finding]:
        if rule in self.reported:
            return []
        self.reported.add(rule)
        return [self.context.report.finding(at, rule, confidence, message, [at], values, run)]
