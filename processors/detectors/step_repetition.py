"""FM-1.3 Step repetition: the agent repeats a step that already told it what it would tell.

Rule `same_call`: the same tool with equivalent arguments (key order, whitespace and volatile
fields such as timestamps and request ids ignored) is called `min_repeats` times, each call at
most `max_gap_steps` tool calls after the previous one, and every call returned the same result
(clocks and ages blanked). A call that returns something new (a rollout being polled while it
progresses) starts the count again, and so does any mutating call in between (re-reading after
a change is verification, not repetition); a mutating call's own repeats do count.

A failing call repeated unchanged by one agent needs only `min_repeats_failed` calls
(retrying what just failed, the same way, with the same error). A read repeated unchanged by
one agent with a turn of the user between needs only `min_repeats_across_user_turn` calls: the
user asked something new (another option, a narrower search) and the agent answered with the
very call it had already made, which told it nothing new.

Rule `near_duplicate_retry`: a failing call retried with its arguments regenerated with small
differences (at most `near_duplicate_max_changed_fields` fields changed, or text arguments at
least `near_duplicate_text_similarity` alike) and the same failure each time (the errors equal
once ids and numbers are blanked), `near_duplicate_min_repeats` times: a retry loop that
changes a detail and never the approach. Successful calls whose results change (polling) are
never near duplicates.

Rule `repeated_request`: the agent asks the user for the same identifier (a "reservation ID",
a "ticket number": `request_pattern`) in `request_min_turns` of its own turns in a row with no
tool call between them: the same request over and over, never another way to the record
(looking it up by what the user did give). A tool call ends the stretch, and so does a turn
that does not ask for it again before the count is made; naming it inside a condition on the
user's side ("once you have the ticket number, let me know") is waiting, not asking.

Rule `cycle`: the last tool calls form a short cycle (A,B,A,B,... of up to `max_cycle_period`
distinct calls) that has come round `min_cycle_repeats` times with unchanged results.

One finding per streak or cycle, at the call that completes it. Usually benign on its own (the
study sees it in successful runs too); its cost (time, calls, tokens of the stretch) says how
much it wasted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory
from mast_otel.processors.detectors.step_repetition_rules import _StepRepetitionRun
from mast_otel.processors.run import DetectorRun, Run


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


class StepRepetition(Detector):
    mode = "FM-1.3"
    name = "step_repetition"
    version = "1.0"
    config: StepRepetitionConfig

    def __init__(self, config: Any, context: DetectorContext) -> None:
        super().__init__(config, context)
        self.request = re.compile(self.config.request_pattern, re.IGNORECASE)

    def open(self, run: Run) -> DetectorRun:
        return _StepRepetitionRun(self)


FACTORY = DetectorFactory(
    type="step_repetition", mode="FM-1.3", config=StepRepetitionConfig, create=StepRepetition
)
