"""What the pipeline counts and what a stop reports.

The parts are each given the one `PipelineStats` and count into it; `Pipeline.health` reports
it, with what the run windows counted (`windows_health`). `StopReport` is what `Pipeline.stop`
left undone. The CPU time of each stage is counted on the thread that does the work
(`thread_cpu`), by stage (`PIPELINE_STAGES`).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from mast_otel.processors.window import WindowStats

# The stages whose CPU time the pipeline reports: limits and redaction, normalization into
# steps, the windows and detectors, and the store's writes (encoding and inserts).
PIPELINE_STAGES = ("redact", "normalize", "detect", "store")
# CPU seconds of the calling thread: what each stage is timed with.
thread_cpu = time.thread_time


@dataclass
class PipelineStats:
    spans_received: int = 0
    logs_received: int = 0
    spans_unrecognised: int = 0
    items_refused: int = 0
    requests_refused: int = 0
    spool_refusals: int = 0
    export_errors: int = 0
    processing_errors: int = 0
    findings: int = 0
    signatures: int = 0
    # The same span delivered again while its run is open: analysed and stored once.
    spans_duplicate: int = 0
    spans_end_before_start: int = 0
    # Start or end further from the collector's clock than limits.max_clock_skew_s.
    clock_skew: int = 0
    # Runs closed early because they held the oldest spool segment past its share.
    runs_closed_for_spool: int = 0
    # Ticks spent not taking batches because the store is behind.
    backpressure_ticks: int = 0
    replayed_requests: int = 0
    # Replayed spans already stored whose run is closed: skipped.
    replay_skipped: int = 0
    replay_decode_errors: int = 0
    outcomes_updated: int = 0
    findings_refused: int = 0
    # Findings by mode, for self-metrics (fatality is derived from the mode).
    findings_by_mode: dict[str, int] = field(default_factory=dict)


@dataclass
class StopReport:
    """What a stop left undone: empty when everything accepted before it is stored."""

    # Durable mode: spool records never replayed (the store refused writes while stopping).
    replay_segments_left: int = 0
    # Accepted requests not processed (the store refused writes while stopping); durable mode
    # keeps them in the spool.
    requests_left: int = 0
    # Rows the store refused at the last write (in the spool in durable mode, else lost).
    rows_unstored: int = 0
    # Runs still open, kept in the spool to resume (durability.resume_open_runs).
    runs_left_open: int = 0
    durable: bool = False
    reason: str = ""

    @property
    def complete(self) -> bool:
        return not (
            self.replay_segments_left
            or self.requests_left
            or self.rows_unstored
            or self.runs_left_open
        )

    def describe(self) -> str:
        if self.complete:
            return "everything accepted is stored"
        parts = []
        if self.replay_segments_left:
            parts.append(f"{self.replay_segments_left} spool segment(s) not replayed")
        if self.requests_left:
            parts.append(f"{self.requests_left} accepted request(s) not processed")
        if self.rows_unstored:
            parts.append(f"{self.rows_unstored} row(s) the store did not take")
        if self.runs_left_open:
            parts.append(f"{self.runs_left_open} open run(s) kept to resume")
        where = (
            "they stay in the spool and are stored at the next start"
            if self.durable
            else "they are lost (durability.mode is memory)"
        )
        because = f" ({self.reason})" if self.reason else ""
        return f"NOT everything accepted is stored: {', '.join(parts)}{because}; {where}"


def windows_health(w: WindowStats) -> dict[str, Any]:
    """What the run windows counted, as the health status reports it."""
    return {
        "runs_opened": w.runs_opened,
        "runs_closed": dict(w.runs_closed),
        "runs_evicted": w.runs_evicted,
        "steps_received": w.steps_received,
        "steps_duplicate": w.steps_duplicate,
        "steps_late": w.steps_late,
        "steps_after_close": w.steps_after_close,
        "outcomes_after_close": w.outcomes_after_close,
        "steps_trimmed": w.steps_trimmed,
        "pending_overflow": w.pending_overflow,
        "agent_wait_expired": w.agent_wait_expired,
        "events_joined": w.events_joined,
        "events_after_step": w.events_after_step,
        "events_dropped": w.events_dropped,
        # What model calls' inputs showed that no span did (conversation recovery).
        **{f"recovery_{key}": value for key, value in asdict(w.recovery).items()},
    }
