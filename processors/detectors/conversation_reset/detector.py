"""FM-2.1's detector: it counts the run's steps that summarize on purpose and gives each model
call to the rule (back_to_opening.py) with that count."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory
from mast_otel.processors.detectors.conversation_reset.back_to_opening import BackToOpening
from mast_otel.processors.detectors.conversation_reset.config import ConversationResetConfig
from mast_otel.processors.detectors.conversation_reset.context import ConversationResetContext
from mast_otel.processors.model import Finding, Step, StepKind
from mast_otel.processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_LLM = StepKind.LLM

_SUMMARY = re.compile(r"summar|compact|condens|compress", re.IGNORECASE)


@lru_cache(maxsize=4096)
def _names_summary(name: str, agent: str, operation: str) -> bool:
    """Does a step's name, agent or operation say it summarizes? (They recur across runs.)"""
    return bool(_SUMMARY.search(f"{name} {agent} {operation}"))


class ConversationReset(Detector):
    mode = "FM-2.1"
    name = "conversation_reset"
    version = "1.0"
    config: ConversationResetConfig

    def __init__(self, config: Any, context: DetectorContext) -> None:
        super().__init__(config, context)
        self.context = ConversationResetContext(self.config, self.report)

    def open(self, run: Run) -> DetectorRun:
        return _ResetRun(self.context)


class _ResetRun(DetectorRun):
    __slots__ = ("rule", "summaries")

    def __init__(self, context: ConversationResetContext) -> None:
        self.rule = BackToOpening(context)
        self.summaries = 0

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        if _names_summary(step.name, step.agent, step.operation):
            self.summaries += 1
            return ()
        if step.kind is not _LLM:
            return ()
        return self.rule.model_call(step, run, self.summaries)


FACTORY = DetectorFactory(
    type="conversation_reset",
    mode="FM-2.1",
    config=ConversationResetConfig,
    create=ConversationReset,
)
