"""FM-2.3's section of the config file (`detectors.derailment`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class DerailmentConfig:
    """FM-2.3 task derailment: tool calls in a row on resources unrelated to the task and its
    evidence."""

    # Run this detector.
    enabled: bool = True
    # Consecutive tool calls on resources unrelated to the task and the evidence so far.
    min_off_task_steps: int = 4

    def validate(self) -> None:
        """Every value of this section is valid."""
