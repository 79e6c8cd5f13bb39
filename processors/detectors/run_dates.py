"""Dates as the rules that compare them read them: the current date a run's instructions
state (tau-bench's "The current time is 2024-05-15 15:00:00 EST."), and days between two ISO
dates."""

from __future__ import annotations

import re
from datetime import date

from mast_otel.processors import conventions
from mast_otel.processors.run import Run


def instructions_date(pattern: re.Pattern[str] | None, run: Run) -> str | None:
    """The date (the pattern's first group) the run's instructions state, or None."""
    if pattern is None:
        return None
    instructions = str(run.attributes.get(conventions.TASK_DESCRIPTION) or "")
    match = pattern.search(instructions[:100_000])
    return match.group(1) if match is not None else None


def days_between(earlier: str, later: str) -> int | None:
    """Whole days from one ISO date to another, or None when either is no date."""
    try:
        return (date.fromisoformat(later) - date.fromisoformat(earlier)).days
    except ValueError:
        return None
