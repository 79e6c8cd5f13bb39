"""FM-1.4's section of the config file (`detectors.history_loss`)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass
class HistoryLossConfig:
    """FM-1.4 loss of conversation history: the context shrinks, or known facts are re-read."""

    # Run this detector.
    enabled: bool = True
    # The model's input shrinking by more than this fraction between two calls of one agent.
    shrink_ratio: float = 0.5
    # Only a context at least this large before the drop counts (small ones fluctuate).
    min_prior_input_tokens: int = 800
    # The same for message counts, when the spans report messages rather than tokens.
    min_prior_messages: int = 6
    # A read-only call identical to a successful one at least this many tool calls earlier,
    # with the same result and nothing changed since, means the agent lost what it had.
    reacquire_min_gap_steps: int = 8
    # Steps matching this (by name, agent or operation) summarize the context on purpose.
    summary_pattern: str = r"summar|compact|condens|compress|memory"
    # Distinct read calls remembered per run for the re-acquisition rule.
    max_remembered_calls: int = 2_048

    def validate(self) -> None:
        if not 0 < self.shrink_ratio < 1:
            raise ValueError("detectors.history_loss.shrink_ratio must be between 0 and 1")
        if self.reacquire_min_gap_steps < 1 or self.max_remembered_calls < 1:
            raise ValueError(
                "detectors.history_loss.reacquire_min_gap_steps and max_remembered_calls "
                "must be at least 1"
            )
        try:
            re.compile(self.summary_pattern)
        except re.error as exc:
            raise ValueError(
                f"detectors.history_loss.summary_pattern: invalid regular expression ({exc})"
            ) from exc
