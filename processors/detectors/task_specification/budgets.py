"""FM-1.1's rules `step_budget`, `time_budget` and `token_budget`: the run passes its budget.

`step_budget` / `time_budget` / `token_budget`: the run passes its budget of steps (model calls
plus tool calls; a user's turn is no step the agent took: `mast.task.max_steps`, else
`max_steps`), seconds (from the run's start to the step's end: `max_seconds`) or tokens (input
plus output: `max_tokens`); 0 means none. Each is reported once, at the step that crosses it;
a step budget the root span's attribute set only after the last step is reported at close, at
the last step of the window.

Fires: with `max_tokens: 2500`, three model calls of 1000 input tokens each: reported at the
third. With `max_seconds: 1.5`, the same calls a second apart.

Near miss: with `max_tokens: 5000`, the same three calls (3000 tokens); `mast.task.max_steps:
10` on a run of two steps.
"""

from __future__ import annotations

from typing import Any

from mast_otel.processors.detectors.task_specification.task_policy import Policy
from mast_otel.processors.model import Step
from mast_otel.processors.run import Run

# (rule, message, values) of a budget passed.
Passed = tuple[str, str, dict[str, Any]]


class Budgets:
    """The budgets already reported in a run."""

    __slots__ = ("reported",)

    def __init__(self) -> None:
        self.reported: set[str] = set()

    def passed(self, step: Step, run: Run, policy: Policy, steps: int, tokens: int) -> list[Passed]:
        """The budgets the run passed at this step, `steps` steps and `tokens` tokens in, not
        reported before."""
        out: list[Passed] = []
        if policy.max_steps and steps > policy.max_steps:
            self._passed(out, "step_budget", steps, policy.max_steps)
        if policy.max_tokens and tokens > policy.max_tokens:
            self._passed(out, "token_budget", tokens, policy.max_tokens)
        if policy.max_seconds and run.start_ns:
            elapsed = (step.end_ns - run.start_ns) / 1e9
            if elapsed > policy.max_seconds:
                self._passed(out, "time_budget", round(elapsed, 3), policy.max_seconds)
        return out

    def passed_at_close(self, run: Run, policy: Policy, steps: int) -> tuple[Step, Passed] | None:
        """A step budget passed and not reported (the policy came last): the last step of the
        window, and what it passed."""
        if not policy.max_steps or steps <= policy.max_steps or "step_budget" in self.reported:
            return None
        last = run.window[-1] if run.window else None
        if last is None:
            return None
        out: list[Passed] = []
        self._passed(out, "step_budget", steps, policy.max_steps)
        return last, out[0]

    def _passed(self, out: list[Passed], rule: str, used: float, budget: float) -> None:
        if rule in self.reported:
            return
        self.reported.add(rule)
        what = rule.split("_")[0]
        message = f"the run passed its {what} budget ({used} > {budget})"
        out.append((rule, message, {"used": used, "budget": budget}))
