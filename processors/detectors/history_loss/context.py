"""What FM-1.4's rules read: the section, the classifier, the summary pattern compiled once,
FM-2.1's settings (what counts as a reset to the opening, so the two modes never overlap), and
how a finding is worded."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from mast_otel.processors.classify import ActionClassifier
from mast_otel.processors.detectors.base import DetectorContext, Reporter
from mast_otel.processors.detectors.conversation_reset.config import ConversationResetConfig
from mast_otel.processors.detectors.history_loss.config import HistoryLossConfig


@dataclass(frozen=True, slots=True)
class HistoryLossContext:
    """Made once per detector and shared by the state of every run."""

    config: HistoryLossConfig
    classifier: ActionClassifier
    summary: re.Pattern[str]
    # Whether a step's name, agent or operation matches `summary` (they recur across a fleet's
    # runs, so the answers are cached).
    names_summary: Callable[[str, str, str], bool]
    # What counts as a reset to the opening (FM-2.1's rule).
    reset_config: ConversationResetConfig
    report: Reporter


def build_context(
    config: HistoryLossConfig, context: DetectorContext, report: Reporter
) -> HistoryLossContext:
    """The context of a detector created with `config` in `context`."""
    summary = re.compile(config.summary_pattern, re.IGNORECASE)

    @lru_cache(maxsize=4096)
    def names_summary(name: str, agent: str, operation: str) -> bool:
        return bool(summary.search(f"{name} {agent} {operation}"))

    return HistoryLossContext(
        config=config,
        classifier=context.classifier,
        summary=summary,
        names_summary=names_summary,
        reset_config=context.sections.get("conversation_reset", ConversationResetConfig()),
        report=report,
    )
