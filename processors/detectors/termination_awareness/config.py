"""FM-1.5's section of the config file (`detectors.termination_awareness`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TerminationAwarenessConfig:
    """FM-1.5 unaware of termination conditions: limits hit, calls after the final answer or after
    success, ending in a loop."""

    # Run this detector.
    enabled: bool = True
    # Tool calls by the same agent after its final answer that show it did not stop.
    calls_after_final_answer: int = 1
    # Tool calls after a check showed the problem solved.
    calls_after_success: int = 3
    # Steps past the step budget (mast.task.max_steps) before the run counts as not stopping.
    steps_past_budget: int = 3
    # The run's last tool calls are all one repeated call: it ended inside a loop.
    final_loop_length: int = 3
    # A run ending on a tool call with no answer after it, after at least this many tool
    # calls, was cut off mid-work; 0 turns the rule off.
    ended_mid_work_min_calls: int = 10

    def validate(self) -> None:
        """Every value of this section is valid."""
