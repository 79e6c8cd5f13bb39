"""The pipeline's tick: runs closed when idle, the spool relieved of runs that hold it too
long, and the store's writes. A running pipeline writes on a thread of its own, one write at a
time, while its own thread goes on processing; what a write covered is confirmed to the spool's
ledger once it is done."""

from __future__ import annotations

import logging
from concurrent.futures import Future

from mast_otel.collector.pipeline_stages import _cpu, _Stages

log = logging.getLogger(__name__)

# How soon a tick looks again at something due that the tick before could not do (the store's
# thread still writing): at most this many extra ticks a second, each of them cheap.
_RECHECK_S = 0.02


class _Writes(_Stages):
    """The tick and the writes (see the module)."""

    def _maybe_tick(self) -> None:
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

    def _wait_s(self, interval: float) -> float:
        """How long the pipeline's thread may wait for a batch: until its next regular tick
        or, if sooner, until something is due (`_next_due`)."""
        due = self._next_due()
        if due is None:
            return interval
        return min(interval, max(0.0, due - self.clock()))

    def tick(self, now: float) -> None:
        started = _cpu()
        windows_now = now if self._replay_now is None else self._replay_now
        self._emit(self._guarded(lambda: self.windows.tick(windows_now)))
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
                self._confirm()
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
            self._write_cpu_s += _cpu() - started

    def _finish_write(self, write: Future[bool]) -> None:
        self._write = None
        try:
            if write.result():
                self._confirm(self._write_cut, self._write_unverified)
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

    def _confirm(
        self, upto: tuple[int, int] | None = None, unverified: set[str] | None = None
    ) -> None:
        """Rows handed to the exporter (up to a ledger mark, or all) are in the store."""
        if unverified is None:
            self._unverified.clear()
        else:
            self._unverified -= unverified
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
            self._emit(self._guarded(lambda: self.windows.close_runs(runs, "spool_full")))

    def close_runs_holding(self, segment: int) -> int:
        """Close and analyse the runs holding a spool segment (a sharded collector's spool is
        past its share, see `_relieve_spool`); returns how many."""
        runs = self._ledger.runs_holding(segment) if self._ledger is not None else []
        if runs and not self.exporter.failing:
            self.stats.runs_closed_for_spool += len(runs)
            self._emit(self._guarded(lambda: self.windows.close_runs(runs, "spool_full")))
            return len(runs)
        return 0
