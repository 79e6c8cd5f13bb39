"""FM-2.5's section of the config file (`detectors.ignored_input`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class IgnoredInputConfig:
    """FM-2.5 ignored other agent's input: the receiver never acts on what the hand-off told it."""

    # Run this detector.
    enabled: bool = True
    # The receiver must have made at least this many tool calls for "never acted on it".
    min_receiver_calls: int = 2
    # In a team's run: the times one agent gives the same instruction, with no teammate making
    # a tool call in between, that show it was ignored (0 turns the rule off).
    reissued_instruction_count: int = 3

    def validate(self) -> None:
        """Every value of this section is valid."""
