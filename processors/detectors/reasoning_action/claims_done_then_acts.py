"""FM-2.6 reasoning-action mismatch: the model says the task is done and asks for more calls.

- `claims_done_then_acts`: a model output says the task is done (the signals'
  `success_claim_pattern`: "resolved", "fixed", "successfully", ..., with no word of
  `negation_pattern`) and, in the same turn, asks for tool calls.
  Fires: "The issue is resolved. Listing the pods once more." with a call to `kubectl`: the
  words close the task, the call goes on with it.
  Near miss: "The issue is not resolved yet. Listing the pods once more." with the same call:
  the negation takes the claim back, and words and call agree. "The issue is resolved." with
  no call asked for is silent here too: a closing answer that acts no further."""

from __future__ import annotations

from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.reasoning_common import Emit
from mast_otel.processors.detectors.signals import Signals
from mast_otel.processors.model import Finding, Step
from mast_otel.processors.run import Run


def claims_done_then_acts(step: Step, run: Run, signals: Signals, emit: Emit) -> list[Finding]:
    """A model output with tool calls (`step.tool_calls`) that says the task is done."""
    text = step.output_text
    if not signals.claims_success(text):
        return []
    return emit(
        step,
        "claims_done_then_acts",
        0.75,
        f"the model said the task is done ({short(text, 100)!r}) and asked for "
        f"more tool calls: {', '.join(c.name for c in step.tool_calls)}",
        [step],
        {"said": short(text), "calls": [c.name for c in step.tool_calls]},
        run,
    )
