"""FM-2.1's `back_to_opening`: after an agent's context has grown (by `min_growth_messages`
messages, or to twice its opening tokens), one of its model calls goes back to the size of its
very first call (within `opening_tolerance`): the history fell back to the initial prompt. The
same task prompt sent again from scratch reads the same way. (A partial shrink is loss of
history, FM-1.4; a summarizing step in between makes either one deliberate.)

- Fires: an agent's model calls send 2, 4, 6 and 8 messages, then 2 again: its conversation
  started over, reported at the call of 2 messages (citing the first call, the last one before
  and this one).
- Near miss: calls of 2 and 3 messages, then 2 again: the context had grown by one message
  only, less than `min_growth_messages`, so the fall is no reset. Nor is a fall that follows a
  step named for summarizing or compacting (the detector counts those): the context was cut on
  purpose.

`is_back_to_opening` is the rule's test alone: FM-1.4 asks it before reporting a shrink, so a
fall all the way back is this mode's and not a loss of history.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from mast_otel.processors.detectors.conversation_reset.config import ConversationResetConfig
from mast_otel.processors.detectors.conversation_reset.context import ConversationResetContext
from mast_otel.processors.model import Finding, Step
from mast_otel.processors.run import Run


def is_back_to_opening(
    opening: Step, peak_tokens: int, peak_messages: int, now: Step, config: ConversationResetConfig
) -> bool:
    """Has `now` fallen back to the size of `opening` after the context grew?"""
    tolerance = config.opening_tolerance
    if opening.input_messages is not None and now.input_messages is not None:
        grew = peak_messages >= opening.input_messages + config.min_growth_messages
        return grew and now.input_messages <= opening.input_messages * tolerance
    if opening.input_tokens and now.input_tokens is not None:
        grew = peak_tokens >= 2 * opening.input_tokens
        return grew and now.input_tokens <= opening.input_tokens * tolerance
    return False


@dataclass(slots=True)
class _Growth:
    """One agent's context: its first call, the largest it grew to since (or since its last
    restart), its last call, and how many summarizing steps the run had by then."""

    opening: Step
    peak_tokens: int
    peak_messages: int
    last: Step
    summaries: int


class BackToOpening:
    """Per run: each agent's context, and the rule applied to each of its model calls."""

    __slots__ = ("agents", "config", "context")

    def __init__(self, context: ConversationResetContext) -> None:
        self.context = context
        self.config = context.config
        self.agents: dict[str, _Growth] = {}

    def model_call(self, step: Step, run: Run, summaries: int) -> Iterable[Finding]:
        """A model call, after `summaries` summarizing steps in the run."""
        ctx = self.agents.get(step.agent)
        if ctx is None:
            self.agents[step.agent] = _Growth(
                step, step.input_tokens or 0, step.input_messages or 0, step, summaries
            )
            return ()
        findings: list[Finding] = []
        if ctx.summaries == summaries and is_back_to_opening(
            ctx.opening, ctx.peak_tokens, ctx.peak_messages, step, self.config
        ):
            findings.append(
                self.context.report.finding(
                    at=step,
                    rule="back_to_opening",
                    confidence=0.85,
                    message=(
                        f"{step.agent or 'the agent'}'s conversation started over: its model "
                        f"input fell back to the size of its first call"
                    ),
                    evidence=[ctx.opening, ctx.last, step],
                    values={
                        "opening_messages": ctx.opening.input_messages,
                        "opening_tokens": ctx.opening.input_tokens,
                        "peak_messages": ctx.peak_messages,
                        "peak_tokens": ctx.peak_tokens,
                        "now_messages": step.input_messages,
                        "now_tokens": step.input_tokens,
                    },
                    run=run,
                )
            )
            # Growth is measured afresh from the restart.
            ctx.peak_tokens, ctx.peak_messages = step.input_tokens or 0, step.input_messages or 0
        else:
            ctx.peak_tokens = max(ctx.peak_tokens, step.input_tokens or 0)
            ctx.peak_messages = max(ctx.peak_messages, step.input_messages or 0)
        ctx.last = step
        ctx.summaries = summaries
        return findings
