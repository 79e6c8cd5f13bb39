"""The pipeline's tick: runs closed when idle, the spool relieved of runs that hold it too
long, and the store's writes. A running pipeline writes on a thread of its own, one write at a
time, while its own thread goes on processing; what a write covered is confirmed to the spool's
ledger once it is done."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from queue import Queue

from mast_otel.collector.config import Config
from mast_otel.collector.pipeline.batch import Batch, Clock
from mast_otel.collector.pipeline.ledger import SegmentLedger
from mast_otel.collector.pipeline.stats import PipelineStats, StopReport
from mast_otel.collector.pipeline.stats import thread_cpu as _cpu
from mast_otel.collector.spool import Spool
from mast_otel.collector.store.exporter import Exporter
from mast_otel.processors.window import RunWindows, WindowOutput

log = logging.getLogger(__name__)

# How soon a tick looks again at something due that the tick before could not do (the store's
# thread still writing): at most this many extra ticks a second, each of them cheap.
_RECHECK_S = 0.02


class Writes:
    """The tick and the writes (see the module). Given the clock, the exporter, the windows,
    the counters and the CPU seconds by stage, the spool and its ledger (None in memory mode),
    the queue (a write is `idle` when it is empty), the runs the stages opened since the last
    confirmed write (`unverified`, let go here), and `emit_closed`, which hands on what
    closing runs put out. They keep the tick's time, the windows' clock while replaying
    (`follow`), the stages run after each export, and the store's thread and its write."""

    def __init__(
        self,
        config: Config,
        *,
        clock: Clock,
        exporter: Exporter,
        windows: RunWindows,
        stats: PipelineStats,
        stage_seconds: dict[str, float],
        spool: Spool | None,
        ledger: SegmentLedger | None,
        batches: Queue[Batch],
        unverified: set[str],
        emit_closed: Callable[[Callable[[], WindowOutput]], None],
    ) -> None:
        self.config = config
        self.clock = clock
        self.exporter = exporter
        self.windows = windows
        self.stats = stats
        self.stage_seconds = stage_seconds
        self.spool = spool
        self._ledger = ledger
        self._queue = batches
        self._unverified = unverified
        self._emit_closed = emit_closed
        self._last_tick = 0.0
        # While replaying: when the request being replayed arrived, on `clock` (see `follow`).
        self._replay_now: float | None = None
        self._after_export: list[Callable[[float, bool], None]] = []
        # Writes run on a thread of their own once the pipeline runs on its own (`start`).
        self._store_writer: ThreadPoolExecutor | None = None
        self._write: Future[bool] | None = None
        self._write_cut = (0, 0)
        self._write_unverified: set[str] = set()
        # CPU seconds of the store's thread (added there, read by health).
        self.write_cpu_s = 0.0

    def after_export(self, stage: Callable[[float, bool], None]) -> None:
        """Call `stage(now, final)` after each tick's export (see `Pipeline.after_export`)."""
        self._after_export.append(stage)

    def follow(self, now: float | None) -> None:
        """The windows' clock follows `now`, when the request being replayed arrived, on
        `clock`; with None it is the clock again. A rebuilt run is not closed as idle before
        its later requests are replayed."""
        self._replay_now = now

    def start(self) -> None:
        """Write on the store's own thread from here on."""
        self._store_writer = ThreadPoolExecutor(1, thread_name_prefix="mast-store")

    def stop(self) -> None:
        """Finish the write in progress and end the store's thread: from here on everything
        runs on the calling thread."""
        if self._store_writer is not None:
            if self._write is not None:
                self._finish_write(self._write)
            self._store_writer.shutdown()
            self._store_writer = None

    def maybe_tick(self) -> None:
        now = self.clock()
        due = self._next_due() if self._replay_now is None else None
        if now - self._last_tick >= self.config.pipeline.tick_interval_s or (
            due is not None and due <= now
        ):
            self._last_tick = now
            self.tick(now)

    def _next_due(self) -> float | None:
        """The earliest of: a run's scheduled close (a root span's grace ending, an explicit
        end), and the eager write of closed runs' signatures. The pipeline ticks then rather
        than at its next regular tick, so a run's signature is stored about `windows.grace_s`
        plus the write after its last span, not a tick interval or two later."""
        close = self.windows.next_close_due()
        write = self.exporter.signatures_due_at() if self._queue.empty() else None
        due = write if close is None or (write is not None and write < close) else close
        if due is None:
            return None
        # Something due that the tick since has not resolved (the write before still in
        # progress) is looked at again shortly, not in a loop.
        return max(due, self._last_tick + _RECHECK_S)

    def wait_s(self, interval: float) -> float:
        """How long the pipeline's thread may wait for a batch: until its next regular tick
        or, if sooner, until something is due (`_next_due`)."""
        due = self._next_due()
        if due is None:
            return interval
        return min(interval, max(0.0, due - self.clock()))

    def tick(self, now: float) -> None:
        started = _cpu()
        windows_now = now if self._replay_now is None else self._replay_now
        self._emit_closed(lambda: self.windows.tick(windows_now))
        self._relieve_spool()
        ticked = _cpu()
        self.stage_seconds["detect"] += ticked - started
        if self._store_writer is None:
            self._flush(now)
        else:
            self._flush_behind(now)
        self.stage_seconds["store"] += _cpu() - ticked

    def _flush(self, now: float) -> None:
        """Write what is due on this thread (offline use, and tests driving ticks)."""
        try:
            if self.exporter.flush(now, idle=self._queue.empty()):
                self.confirm()
        except Exception as exc:
            self._write_failed(exc)
        self._after_writes(now)

    def _flush_behind(self, now: float) -> None:
        """Write on the store's own thread while this one goes on processing: an insert holds
        the GIL for a fraction of its time (chDB and the ClickHouse client release it while
        the store works), so the pipeline keeps its core. One write at a time; what it covers
        is confirmed to the spool's ledger when it is done."""
        write = self._write
        if write is not None:
            if not write.done():
                return
            self._finish_write(write)
            self._after_writes(now)
        assert self._store_writer is not None
        self._write_cut = self._ledger.mark() if self._ledger is not None else (0, 0)
        self._write_unverified = set(self._unverified)
        self._write = self._store_writer.submit(self._timed_flush, now, self._queue.empty())

    def _timed_flush(self, now: float, idle: bool) -> bool:
        """A flush on the store's thread, its CPU counted to the store stage."""
        started = _cpu()
        try:
            return self.exporter.flush(now, idle=idle)
        finally:
            self.write_cpu_s += _cpu() - started

    def _finish_write(self, write: Future[bool]) -> None:
        self._write = None
        try:
            if write.result():
                self.confirm(self._write_cut, self._write_unverified)
        except Exception as exc:
            self._write_failed(exc)

    def _write_failed(self, exc: Exception) -> None:
        # Rows stay buffered (and the requests in the spool) and are written later.
        self.stats.export_errors += 1
        log.error("writing to the store failed (%s); will retry with backoff", exc)

    def _after_writes(self, now: float) -> None:
        for stage in self._after_export:
            try:
                stage(now, False)
            except Exception:
                log.exception("a stage after export failed; it runs again at the next tick")

    def last_flush(self, report: StopReport) -> None:
        """At stop, once everything is processed and the runs to close are closed: write all
        the store takes (what it refuses is counted in `report`), then run the stages after
        export once more, with `final=True`."""
        try:
            if self.exporter.flush(self.clock(), force=True):
                self.confirm()
        except Exception as exc:
            self.stats.export_errors += 1
            report.rows_unstored = getattr(self.exporter, "buffered_rows", 0) or 1
            report.reason = f"the store refused the last writes: {exc}"
            log.error("the store refused the last writes (%s)", exc)
        for stage in self._after_export:
            try:
                stage(self.clock(), True)
            except Exception:
                log.exception("a stage after export failed at stop")

    def confirm(
        self, upto: tuple[int, int] | None = None, unverified: set[str] | None = None
    ) -> None:
        """Rows handed to the exporter (up to a ledger mark, or all) are in the store."""
        if unverified is None:
            self._unverified.clear()
        else:
            self._unverified.difference_update(unverified)
        if self._ledger is not None:
            self._ledger.confirm(upto)

    def _relieve_spool(self) -> None:
        """Past its share of the spool, close the runs that alone hold its oldest segment, so
        a few endless runs cannot fill the spool and make every sender wait."""
        spool, ledger = self.spool, self._ledger
        if spool is None or ledger is None or self.exporter.failing:
            return
        threshold = (
            self.config.durability.max_spool_bytes * self.config.durability.run_eviction_ratio
        )
        if spool.bytes <= threshold:
            return
        oldest = spool.oldest_held()
        if oldest is None:
            return
        runs = ledger.runs_holding(oldest)
        if runs and spool.refs(oldest) == len(runs):
            self.stats.runs_closed_for_spool += len(runs)
            self._emit_closed(lambda: self.windows.close_runs(runs, "spool_full"))

    def close_runs_holding(self, segment: int) -> int:
        """Close and analyse the runs holding a spool segment (a sharded collector's spool is
        past its share, see `_relieve_spool`); returns how many."""
        runs = self._ledger.runs_holding(segment) if self._ledger is not None else []
        if runs and not self.exporter.failing:
            self.stats.runs_closed_for_spool += len(runs)
            self._emit_closed(lambda: self.windows.close_runs(runs, "spool_full"))
            return len(runs)
        return 0
