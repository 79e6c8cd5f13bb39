"""FM-1.3's settings: the `detectors.step_repetition` section, its defaults and their checks."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass
class StepRepetitionConfig:
    """FM-1.3 step repetition: the same call over and over, or a short cycle, unchanged."""

    # Run this detector.
    enabled: bool = True
    # Equivalent calls with unchanged results that make a repetition.
    min_repeats: int = 3
    # Two calls belong to one streak only if at most this many other tool calls lie between.
    max_gap_steps: int = 6
    # Cycles (A,B,A,B,...) of up to this many distinct calls are looked for...
    max_cycle_period: int = 3
    # ...and reported once the whole cycle has come round this many times unchanged.
    min_cycle_repeats: int = 3
    # Identical failing calls with the same error that make a repetition.
    min_repeats_failed: int = 2
    # Identical reads with the same result, a turn of the user between two of them, that make
    # a repetition (the user's new request answered by re-running the same read).
    min_repeats_across_user_turn: int = 2
    # Failing calls retried with small changes and the same error that make a retry loop.
    near_duplicate_min_repeats: int = 3
    # At most this many arguments differ between two near-duplicate calls (a list or object
    # argument changed anywhere inside counts once)...
    near_duplicate_max_changed_fields: int = 1
    # ...or, for text arguments, they are at least this alike (0..1, difflib ratio).
    near_duplicate_text_similarity: float = 0.9
    # What names an identifier the agent asks the user for, in the agent's own text: the first
    # group is the thing asked for ("reservation id", "order number").
    request_pattern: str = r"\b([a-z]+[ _-](?:id|ids|number|identifier))\b"
    # Agent turns asking for the same identifier, with no tool call between them, that make a
    # repeated request (0: off).
    request_min_turns: int = 4

    def validate(self) -> None:
        if self.request_min_turns < 2 and self.request_min_turns != 0:
            raise ValueError(
                "detectors.step_repetition.request_min_turns must be 0 (off) or at least 2"
            )
        try:
            if re.compile(self.request_pattern).groups < 1:
                raise ValueError(
                    "detectors.step_repetition.request_pattern needs a group: the thing asked for"
                )
        except re.error as exc:
            raise ValueError(
                f"detectors.step_repetition.request_pattern: invalid regular expression ({exc})"
            ) from exc
        if self.min_repeats < 2:
            raise ValueError("detectors.step_repetition.min_repeats must be at least 2")
        if self.max_gap_steps < 0:
            raise ValueError("detectors.step_repetition.max_gap_steps must not be negative")
        if self.max_cycle_period < 2 and self.max_cycle_period != 0:
            raise ValueError(
                "detectors.step_repetition.max_cycle_period must be 0 (off) or at least 2"
            )
        if self.min_cycle_repeats < 2:
            raise ValueError("detectors.step_repetition.min_cycle_repeats must be at least 2")
        for key in (
            "min_repeats_failed",
            "near_duplicate_min_repeats",
            "min_repeats_across_user_turn",
        ):
            if getattr(self, key) < 2:
                raise ValueError(f"detectors.step_repetition.{key} must be at least 2")
        if self.near_duplicate_max_changed_fields < 1:
            raise ValueError(
                "detectors.step_repetition.near_duplicate_max_changed_fields must be at least 1"
            )
        if not 0.0 < self.near_duplicate_text_similarity <= 1.0:
            raise ValueError(
                "detectors.step_repetition.near_duplicate_text_similarity must be in (0, 1]"
            )
