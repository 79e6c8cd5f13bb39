"""The pipeline's state: what its parts share, what it counts, what a stop reports.

`Pipeline` is put together from parts, one job each: admission (`pipeline_admission`), the
stages (`pipeline_stages`), the tick and the store's thread (`pipeline_writes`), the replay
(`pipeline_replay`); the spool's ledger is `pipeline_ledger`. They share one state, set by
`Pipeline.__init__` and declared here once (`_PipelineState`), which also reports it: the
counters (`PipelineStats`), the CPU time by stage and the health status.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from mast_otel.collector.config import Config
from mast_otel.collector.judge import JudgeStage
from mast_otel.collector.pipeline_ledger import _Ledger
from mast_otel.collector.spool import Recovered, Spool, SpoolEntry
from mast_otel.collector.store.exporter import Exporter
from mast_otel.processors.limits import RecordLimits
from mast_otel.processors.redact import Redactor
from mast_otel.processors.window import RunWindows, WindowOutput

Clock = Callable[[], float]
WallClock = Callable[[], int]


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


@dataclass(slots=True)
class _Batch:
    kind: str
    items: list[Any]
    entry: SpoolEntry | None = None
    # Replayed from the spool: its rows may already be stored.
    replayed: bool = False
    # Replayed, and the journal says its rows are stored: feed the windows only.
    stored: bool = False
    # Request bytes it holds in the queue.
    size: int = 0
    # Whether its records' values must be scanned for secrets (see `Redactor.needs_scan`).
    scan: bool = True
    # When its request arrived, on the pipeline's clock (a request replayed by a worker).
    now: float | None = None


class _PipelineState:
    """The state `Pipeline.__init__` sets, as the pipeline's parts read it, and what it
    reports of it."""

    config: Config
    exporter: Exporter
    clock: Clock
    wall_clock: WallClock
    windows: RunWindows
    judge: JudgeStage | None
    limits: RecordLimits
    redactor: Redactor
    stats: PipelineStats
    spool: Spool | None
    stop_report: StopReport | None
    stage_seconds: dict[str, float]
    _ledger: _Ledger | None
    _recovered: Recovered | None
    _queue: queue.Queue[_Batch]
    _queued_items: int
    _queued_bytes: int
    _queue_lock: threading.Lock
    _enqueuing: int
    _enqueued: threading.Condition
    _stop: threading.Event
    _replay_cut_short: bool
    _replay_now: float | None
    _worker: threading.Thread | None
    _last_tick: float
    _listeners: list[Callable[[WindowOutput], None]]
    _after_export: list[Callable[[float, bool], None]]
    _unverified: set[str]
    _skew_ns: int
    _store_writer: ThreadPoolExecutor | None
    _write: Future[bool] | None
    _write_cut: tuple[int, int]
    _write_unverified: set[str]
    _write_cpu_s: float

    def stage_cpu_seconds(self) -> dict[str, float]:
        """CPU seconds by stage, the store's own thread included."""
        stages = dict(self.stage_seconds)
        stages["store"] += self._write_cpu_s
        return stages

    def health(self) -> dict[str, Any]:
        w = self.windows.stats
        status: dict[str, Any] = {
            "queue_items": self._queued_items,
            "queue_max_items": self.config.pipeline.queue_max_items,
            "queue_bytes": self._queued_bytes,
            "queue_max_bytes": self.config.pipeline.queue_max_bytes,
            "active_runs": self.windows.active_runs,
            "pipeline": {
                **vars(self.stats),
                "findings_by_mode": dict(self.stats.findings_by_mode),
            },
            "windows": {
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
            },
            "limits": dict(self.limits.stats),
            "redaction": dict(self.redactor.stats),
            "durability": {"mode": self.config.durability.mode},
        }
        if self.spool is not None:
            status["durability"].update(self.spool.health())
        return status
