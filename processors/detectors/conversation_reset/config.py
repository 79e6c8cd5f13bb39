"""FM-2.1's section of the config file (`detectors.conversation_reset`)."""

from __future__ import annotations

from dataclasses import dataclass


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
