"""Thresholds of every detector, one section each, all overridable from the config file."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


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


@dataclass
class MissingVerificationConfig:
    """FM-3.2 no or incomplete verification: a change never checked before the run ends."""

    # Run this detector.
    enabled: bool = True
    # Read-only calls with no resource named in their arguments still verify a change when
    # their tool's name says it checks the system (alerts, health, status, ...).
    check_tool_pattern: str = r"alert|health|status|verify|check|probe|metric|monitor"
    # Unchecked changes reported per run (the last ones, when a run leaves more unchecked).
    max_findings_per_run: int = 5
    # Mutating calls remembered per run awaiting their check.
    max_tracked_mutations: int = 256


@dataclass
class DetectorsConfig:
    """Thresholds of each failure mode's detector, one section per detector."""

    step_repetition: StepRepetitionConfig = field(default_factory=StepRepetitionConfig)
    history_loss: HistoryLossConfig = field(default_factory=HistoryLossConfig)
    missing_verification: MissingVerificationConfig = field(
        default_factory=MissingVerificationConfig
    )

    def validate(self) -> None:
        rep = self.step_repetition
        if rep.min_repeats < 2:
            raise ValueError("detectors.step_repetition.min_repeats must be at least 2")
        if rep.max_gap_steps < 0:
            raise ValueError("detectors.step_repetition.max_gap_steps must not be negative")
        if rep.max_cycle_period < 2 and rep.max_cycle_period != 0:
            raise ValueError(
                "detectors.step_repetition.max_cycle_period must be 0 (off) or at least 2"
            )
        if rep.min_cycle_repeats < 2:
            raise ValueError("detectors.step_repetition.min_cycle_repeats must be at least 2")
        hist = self.history_loss
        if not 0 < hist.shrink_ratio < 1:
            raise ValueError("detectors.history_loss.shrink_ratio must be between 0 and 1")
        if hist.reacquire_min_gap_steps < 1 or hist.max_remembered_calls < 1:
            raise ValueError(
                "detectors.history_loss.reacquire_min_gap_steps and max_remembered_calls "
                "must be at least 1"
            )
        ver = self.missing_verification
        if ver.max_findings_per_run < 1 or ver.max_tracked_mutations < 1:
            raise ValueError(
                "detectors.missing_verification.max_findings_per_run and "
                "max_tracked_mutations must be at least 1"
            )
        for key, pattern in (
            ("history_loss.summary_pattern", hist.summary_pattern),
            ("missing_verification.check_tool_pattern", ver.check_tool_pattern),
        ):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"detectors.{key}: invalid regular expression ({exc})") from exc
