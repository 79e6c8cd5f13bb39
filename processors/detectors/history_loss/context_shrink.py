"""FM-1.4's `context_shrink`: between two model calls of the same agent, the input it sends
shrinks by more than `shrink_ratio` (input tokens, or message count when tokens are not
reported), from a context of at least `min_prior_input_tokens` tokens (or
`min_prior_messages` messages). A shrink right after a step that summarizes or compacts the
context on purpose (a step whose name, agent or operation matches `summary_pattern`, or a
model call whose own input says it is a summary) is context hygiene, not loss, and stays
silent. A shrink all the way back to the agent's first call is a conversation reset (FM-2.1),
not this.

- Fires: an agent's model calls send 800, 4200, then 1500 input tokens: its input fell from
  4200 to 1500 between two calls, reported at the call of 1500 (citing both calls); with
  messages and no tokens, 14 messages then 2 reads the same way.
- Near miss: 4200 tokens, then a step `summarize_history`, then 900: the context was
  summarized on purpose. Nor does 500 then 100 count (a context under 800 tokens fluctuates),
  nor a first call of another agent, nor 2, 4, 6, 8 then 2 messages: back to the opening,
  FM-2.1's reset.
"""

from __future__ import annotations

from mast_otel.processors.detectors.conversation_reset.back_to_opening import is_back_to_opening
from mast_otel.processors.detectors.history_loss.context import HistoryLossContext
from mast_otel.processors.model import Finding, Step, StepKind
from mast_otel.processors.run import Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_AGENT = StepKind.AGENT
_LLM = StepKind.LLM
_OTHER = StepKind.OTHER


class ContextShrink:
    """Per run: each agent's first and last model calls, and the summarizing steps so far."""

    __slots__ = ("config", "context", "last_llm", "opening", "summaries")

    def __init__(self, context: HistoryLossContext) -> None:
        self.context = context
        self.config = context.config
        # Per agent: its last model call, and how many summarizing steps the run had then.
        self.last_llm: dict[str, tuple[Step, int]] = {}
        # Per agent: its first model call, to tell a reset to the opening (FM-2.1) from loss.
        self.opening: dict[str, Step] = {}
        self.summaries = 0

    def count_summary(self, step: Step) -> None:
        """Count `step` if it summarizes the context on purpose."""
        if step.kind in (_LLM, _AGENT, _OTHER) and self.context.names_summary(
            step.name, step.agent, step.operation
        ):
            self.summaries += 1

    def is_summary(self, step: Step) -> bool:
        if step.kind not in (_LLM, _AGENT, _OTHER):
            return False
        return self.context.names_summary(step.name, step.agent, step.operation)

    def model_call(self, step: Step, run: Run) -> list[Finding]:
        agent = step.agent
        last = self.last_llm.get(agent)
        self.last_llm[agent] = (step, self.summaries)
        opening = self.opening.setdefault(agent, step)
        if last is None or self.is_summary(step):
            return []
        previous, summaries_then = last
        if summaries_then != self.summaries:
            return []  # the context was summarized on purpose in between
        ratio = self.config.shrink_ratio
        before, after, unit = previous.input_tokens, step.input_tokens, "input tokens"
        floor = self.config.min_prior_input_tokens
        if before is None or after is None:
            before, after, unit = previous.input_messages, step.input_messages, "messages"
            floor = self.config.min_prior_messages
        if before is None or after is None or before < floor:
            return []
        if after >= before * (1 - ratio):
            return []
        if opening is not previous and is_back_to_opening(
            opening,
            previous.input_tokens or 0,
            previous.input_messages or 0,
            step,
            self.context.reset_config,
        ):
            return []  # back to the very beginning: a conversation reset, FM-2.1
        if self.context.summary.search(step.input_text[:512]):
            return []  # the call's own input says it is a summary
        return [
            self.context.report.finding(
                at=step,
                rule="context_shrink",
                confidence=0.8,
                message=(
                    f"{agent or 'the agent'}'s model input fell from {before} to {after} {unit} "
                    f"between two calls, with no summarization in between"
                ),
                evidence=[previous, step],
                values={
                    "unit": unit,
                    "before": before,
                    "after": after,
                    "drop": round(1 - after / before, 3) if before else 0.0,
                    "threshold": ratio,
                },
                run=run,
            )
        ]
