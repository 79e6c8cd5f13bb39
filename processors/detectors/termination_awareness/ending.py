"""FM-1.5's two rules on how the run ended, decided when it closes (at most one of them: a run
that ended in a loop is not also reported as cut off).

`ended_in_loop`: the run's last `final_loop_length` tool calls were one call repeated with the
same result, and its last model or tool step is not a final answer: it stopped because
something else stopped it, not because it was done.
- Fires: three `kubectl get pods -n shop` calls in a row, each answering
  "checkout-1 0/1 CrashLoopBackOff", and the run ends (here on a recursion limit too).
- Near miss: the same three calls, then the agent answers: the run ended on its answer. Three
  calls that differ in their arguments or results are no loop.

`ended_mid_work`: the run's last step is a tool call (not an escalation to a person, not a
hand-off) with no answer after it, after at least `ended_mid_work_min_calls` tool calls: the
agent was cut off (a turn limit) while still working, never concluding.
- Fires: a coding agent runs twelve `sed -n ... src/cart.py` calls and the run ends on the
  twelfth: "the run ended on a call to shell after 12 tool calls, with no answer after it".
- Near miss: twelve `get_order` calls, then `transfer_to_human_agents`: the run ended on an
  escalation. Or the same calls followed by "Orders o-0 to o-11 are all shipped.": it
  concluded. Nine calls and no answer are too few to tell.
"""

from __future__ import annotations

from collections import deque

from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.signals import is_final_answer
from mast_otel.processors.detectors.termination_awareness.context import (
    TerminationAwarenessContext,
)
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_ESCALATION = ActionKind.ESCALATION
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL


class Ending:
    """Per run: the last tool calls (each as the call and what it returned) and their count."""

    __slots__ = ("config", "context", "tail", "tool_calls")

    def __init__(self, context: TerminationAwarenessContext) -> None:
        self.context = context
        self.config = context.config
        # The last calls: (call, what it returned) and where.
        self.tail: deque[tuple[tuple[str, str], StepRef]] = deque(
            maxlen=max(self.config.final_loop_length, 1)
        )
        self.tool_calls = 0

    def tool_call(self, step: Step, ref: StepRef) -> None:
        classifier = self.context.classifier
        self.tool_calls += 1
        self.tail.append(
            (
                (
                    classifier.canonical_call(step.tool_name, step.tool_arguments),
                    classifier.result_fingerprint(step.tool_result or step.error),
                ),
                ref,
            )
        )

    def close(self, run: Run, last: Step | None) -> list[Finding]:
        """How the run ended; `last` is its last model, tool or user step."""
        loop = self._ended_in_loop(run)
        if loop:
            return loop
        return self._ended_mid_work(run, last)

    def _ended_mid_work(self, run: Run, last: Step | None) -> list[Finding]:
        minimum = self.config.ended_mid_work_min_calls
        if not minimum or not self.tail or self.tool_calls < minimum:
            return []
        if last is None or last.kind is not _TOOL or not last.tool_name:
            return []
        action = self.context.classifier.classify(last.tool_name, last.tool_arguments)
        if action.kind is _ESCALATION:
            return []
        return [
            self.context.report.finding(
                last,
                "ended_mid_work",
                0.6,
                f"the run ended on a call to {last.tool_name} after {self.tool_calls} tool "
                f"calls, with no answer after it: cut off while still working",
                [last],
                {"tool": last.tool_name, "tool_calls": self.tool_calls},
                run,
            )
        ]

    def _ended_in_loop(self, run: Run) -> list[Finding]:
        length = self.config.final_loop_length
        if length < 2 or len(self.tail) < length:
            return []
        tokens = {token for token, _ in self.tail}
        last = self.tail[-1][1]
        # The last model or tool step (a framework's own chain spans may start after it).
        final = next((s for s in reversed(run.window) if s.kind in (_LLM, _TOOL)), None)
        if len(tokens) != 1 or (final and final.kind is _LLM and is_final_answer(final, run)):
            return []
        steps = [s for _, s in self.tail]
        return [
            self.context.report.finding(
                last,
                "ended_in_loop",
                0.8,
                f"the run ended while repeating {last.tool_name}",
                steps,
                {"tool": last.tool_name, "repeats": len(steps)},
                run,
            )
        ]
