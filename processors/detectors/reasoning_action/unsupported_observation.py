"""FM-2.6 reasoning-action mismatch: an observation stated that no tool result has shown.

- `unsupported_observation`: a model output states an observation of `observation_terms`
  (CrashLoopBackOff, OOMKilled, connection refused, ...) that no tool result or error of the
  run has shown so far, in any of the term's wordings, and holds no negation (the signals'
  `negation_pattern`: "not", "unable", ...).
  Fires: "The checkout pods are OOMKilled; listing them to confirm." when the only result so
  far is the alert list: the model says what it has not seen.
  Near miss: "The pod ran out of memory; raising its limit." after `kubectl describe` showed
  "Reason: OOMKilled": `OOMKilled|out of memory` is one observation in two wordings, and a
  result showing one supports stating the other. "The pods are not OOMKilled" is silent too:
  a negation states no observation."""

from __future__ import annotations

from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.reasoning_action.context import ReasoningActionContext
from mast_otel.processors.detectors.reasoning_common import Emit
from mast_otel.processors.model import Finding, Step
from mast_otel.processors.run import Run


class Observations:
    """One run's observation terms no tool result has shown yet: the context's own list,
    shared with it until the first one is seen."""

    __slots__ = ("negation", "terms", "unobserved")

    def __init__(self, context: ReasoningActionContext) -> None:
        self.terms = context.observations
        self.negation = context.signals.negation
        self.unobserved: list[str] = context.observations.terms

    def model(self, step: Step, run: Run, emit: Emit) -> list[Finding]:
        """A model output: the terms it states that no result has shown."""
        if not self.unobserved:
            return []
        text = step.output_text
        present = self.terms.found(text)
        if not present:
            return []
        unsupported = [t for t in self.unobserved if t in present]
        if not unsupported or self.negation.found(text):
            return []
        return emit(
            step,
            "unsupported_observation",
            0.6,
            f"the model stated {self.terms.wording(unsupported[0], text)}, "
            "which no tool result had shown",
            [step],
            {"said": short(text), "unsupported": unsupported},
            run,
        )

    def tool(self, step: Step) -> None:
        """A tool result or error: the terms it shows may be stated from now on."""
        if self.unobserved:
            present = self.terms.found(step.tool_result or step.error)
            if present:
                shown = [t for t in self.unobserved if t in present]
                if shown:
                    self.unobserved = [t for t in self.unobserved if t not in shown]
