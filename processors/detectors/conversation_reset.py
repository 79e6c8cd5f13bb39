"""FM-2.1 Conversation reset: an agent's conversation starts over from the beginning.

Rule `back_to_opening`: after an agent's context has grown (by `min_growth_messages` messages,
or to twice its opening tokens), one of its model calls goes back to the size of its very first
call (within `opening_tolerance`): the history fell back to the initial prompt. The same task
prompt sent again from scratch reads the same way. (A partial shrink is loss of history,
FM-1.4; a summarizing step in between makes either one deliberate.)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from mast_otel.processors.detectors.base import Detector, DetectorFactory
from mast_otel.processors.model import Finding, Step, StepKind
from mast_otel.processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_LLM = StepKind.LLM


@dataclass(slots=True)
class _Context:
    opening: Step
    peak_tokens: int
    peak_messages: int
    last: Step
    summaries: int


_SUMMARY = re.compile(r"summar|compact|condens|compress", re.IGNORECASE)


@lru_cache(maxsize=4096)
def _names_summary(name: str, agent: str, operation: str) -> bool:
    """Does a step's name, agent or operation say it summarizes? (They recur across runs.)"""
    return bool(_SUMMARY.search(f"{name} {agent} {operation}"))


def context_size(step: Step) -> tuple[int | None, int | None]:
    return step.input_tokens, step.input_messages


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


@dataclass
class ConversationResetConfig:
    """FM-2.1 conversation reset: an agent's context falls back to its opening prompt."""

    # Run this detector.
    enabled: bool = True
    # The context must have grown by this many messages (or doubled in tokens) before a fall
    # back to the opening size counts as a reset.
    min_growth_messages: int = 3
    # "Back to the opening size": within this factor of the agent's first call.
    opening_tolerance: float = 1.15

    def validate(self) -> None:
        """Every value of this section is valid."""


class ConversationReset(Detector):
    mode = "FM-2.1"
    name = "conversation_reset"
    version = "1.0"
    config: ConversationResetConfig

    def open(self, run: Run) -> DetectorRun:
        return _ResetRun(self)


class _ResetRun(DetectorRun):
    __slots__ = ("config", "contexts", "detector", "summaries")

    def __init__(self, detector: ConversationReset) -> None:
        self.detector = detector
        self.config = detector.config
        self.contexts: dict[str, _Context] = {}
        self.summaries = 0

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        if _names_summary(step.name, step.agent, step.operation):
            self.summaries += 1
            return ()
        if step.kind is not _LLM:
            return ()
        ctx = self.contexts.get(step.agent)
        if ctx is None:
            self.contexts[step.agent] = _Context(
                step, step.input_tokens or 0, step.input_messages or 0, step, self.summaries
            )
            return ()
        findings: list[Finding] = []
        if ctx.summaries == self.summaries and is_back_to_opening(
            ctx.opening, ctx.peak_tokens, ctx.peak_messages, step, self.config
        ):
            findings.append(
                self.detector.finding(
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
        ctx.summaries = self.summaries
        return findings


FACTORY = DetectorFactory(
    type="conversation_reset",
    mode="FM-2.1",
    config=ConversationResetConfig,
    create=ConversationReset,
)
