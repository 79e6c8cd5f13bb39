"""What FM-2.1's rule reads: its section of the config, and how it words a finding."""

from __future__ import annotations

from dataclasses import dataclass

from mast_otel.processors.detectors.base import Reporter
from mast_otel.processors.detectors.conversation_reset.config import ConversationResetConfig


@dataclass(frozen=True, slots=True)
class ConversationResetContext:
    """Made once per detector and shared by the state of every run."""

    config: ConversationResetConfig
    report: Reporter
