"""Fatal or benign, per model: the study's picture computed from outcomes.

A mode is *fatal* for a model when it shows up clearly more often in that model's failed runs
than in its successful ones (the lift: rate in failed runs minus rate in successful runs), and
*benign* when it does not. Until a model has `min_runs_per_outcome` failed and successful runs
with known outcomes, the study's static prior (`conventions.FATAL_PRIOR`) stands in.
Density is the number of distinct modes per failed run (the study's 2.6 / 4.7 / 5.3 for
Gemini-3-Flash / Kimi-K2 / GPT-OSS-120B): isolated versus cascading failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mast_otel.processors.conventions import FATAL_PRIOR, MODE_CODES


@dataclass
class ScoringConfig:
    """Fatal or benign per model: when measured lift replaces the study's prior."""

    # Outcomes needed on each side before the measured lift replaces the prior.
    min_runs_per_outcome: int = 10
    # A mode at least this much more frequent in failed than in successful runs is fatal.
    min_lift: float = 0.2

    def validate(self) -> None:
        if self.min_runs_per_outcome < 1:
            raise ValueError("scoring.min_runs_per_outcome must be at least 1")
        if not 0 < self.min_lift <= 1:
            raise ValueError("scoring.min_lift must be in (0, 1]")


@dataclass(frozen=True)
class ModeLift:
    mode: str
    failed_with: int
    success_with: int
    failed_runs: int
    success_runs: int
    fatal: bool
    basis: str  # "measured" or "prior"

    @property
    def rate_failed(self) -> float:
        return self.failed_with / self.failed_runs if self.failed_runs else 0.0

    @property
    def rate_success(self) -> float:
        return self.success_with / self.success_runs if self.success_runs else 0.0

    @property
    def lift(self) -> float:
        return self.rate_failed - self.rate_success


@dataclass
class GroupSummary:
    """One model (or agent, or service) over a time range."""

    group: str
    runs: int
    failed_runs: int
    success_runs: int
    unknown_runs: int
    modes_per_failed_run: float
    mean_score: float | None
    modes: list[ModeLift] = field(default_factory=list)

    @property
    def success_rate(self) -> float | None:
        judged = self.failed_runs + self.success_runs
        return self.success_runs / judged if judged else None

    @property
    def fatal_modes(self) -> list[str]:
        return [m.mode for m in self.modes if m.fatal]


def mode_lift(
    mode: str,
    failed_with: int,
    success_with: int,
    failed_runs: int,
    success_runs: int,
    config: ScoringConfig,
) -> ModeLift:
    """The lift of one mode and the fatal/benign call it supports."""
    measured = min(failed_runs, success_runs) >= config.min_runs_per_outcome
    if measured:
        rate_failed = failed_with / failed_runs
        rate_success = success_with / success_runs
        fatal = rate_failed - rate_success >= config.min_lift
    else:
        fatal = mode in FATAL_PRIOR
    return ModeLift(
        mode,
        failed_with,
        success_with,
        failed_runs,
        success_runs,
        fatal,
        "measured" if measured else "prior",
    )


def summarize(
    group: str,
    outcome_counts: dict[str, int],
    mode_counts: dict[tuple[str, str], int],
    distinct_modes_failed: int,
    mean_score: float | None,
    config: ScoringConfig,
) -> GroupSummary:
    """`outcome_counts`: runs by outcome ("success", "failure", ""); `mode_counts`: runs
    carrying each mode, by (mode, outcome); `distinct_modes_failed`: the sum over failed runs
    of their distinct modes."""
    failed = outcome_counts.get("failure", 0)
    success = outcome_counts.get("success", 0)
    unknown = outcome_counts.get("", 0)
    modes = [
        mode_lift(
            mode,
            mode_counts.get((mode, "failure"), 0),
            mode_counts.get((mode, "success"), 0),
            failed,
            success,
            config,
        )
        for mode in MODE_CODES
    ]
    return GroupSummary(
        group=group,
        runs=failed + success + unknown,
        failed_runs=failed,
        success_runs=success,
        unknown_runs=unknown,
        modes_per_failed_run=distinct_modes_failed / failed if failed else 0.0,
        mean_score=mean_score,
        modes=modes,
    )
