"""Which failure modes count as fatal before any outcome has been seen.

The study separates modes that also appear in successful runs (benign: step repetition, minor
slips) from modes that separate failures from successes. Once outcomes exist, per-model lift
decides; until then this prior, taken from the study's findings, is the default. Dashboards,
alert rules and self-metrics read fatality from here so the three agree.
"""

from __future__ import annotations

# Modes whose presence the study found far more often in failed than in successful runs
# (FM-3.3 +52% for Gemini-3-Flash; FM-3.1 +46% and FM-1.5 +43% for Kimi-K2; FM-2.6 in >90% of
# failed runs; FM-1.4 and FM-2.2 in cascading failures).
DEFAULT_FATAL_MODES: frozenset[str] = frozenset(
    {"FM-1.4", "FM-1.5", "FM-2.2", "FM-2.6", "FM-3.1", "FM-3.3"}
)


def is_fatal_by_default(mode: str) -> bool:
    """True if `mode` is fatal under the study's prior (no outcomes needed)."""
    return mode in DEFAULT_FATAL_MODES
