"""N worker processes, each fed its shard's requests (see `route`).

`WorkerPool` starts one process per shard with the 'spawn' (or 'forkserver') start method, so a
worker shares no threads, locks or store sessions with the receiving process. What runs in the
worker (its handler, built there, handles every request it is given in order; `close()` on
stop) is `worker_main`; the pool's settings, counters and refusals are `pool_config`.

Bounds: what a worker has been given and not yet handled is counted in the receiving process
(requests and bytes, per worker); `submit` refuses (`WorkerBusy`, counted) a request that would
pass either bound for any of its shards, before handing any shard anything, so a request is
taken whole or not at all and the sender is told to retry.

A worker that dies (killed, crashed) is started again (counted); its queue dies with it, so
what it held is gone: `on_restart(shard)` returns the requests to give the new worker first
(the spool's requests for that shard, replayed), before anything newer. A worker that dies more
than `max_restarts` times within `restart_window_s` is not started again: its shard refuses
with `WorkerFailed` and `health()` says so.

`stop()` drains: every worker handles what it was given (for at most `drain_s`; the rest is
counted and left), closes its handler and exits; a worker that has not finished within the
timeout is killed (counted). From `begin_stop()` on no worker is started again, and `kill()`
kills them all at once. Workers never act on stop signals (`worker_main`).

What a worker reports (`attach(send)` in `worker_main`) reaches `on_report(shard, generation,
message)` here, in the order sent; `generation` counts the shard's restarts.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from multiprocessing import resource_tracker
from multiprocessing.connection import wait as wait_for_exits
from multiprocessing.context import ForkServerContext, SpawnContext
from multiprocessing.process import BaseProcess
from typing import Any

from mast_otel.collector.consumer import Refused
from mast_otel.collector.workers.pool_config import PoolConfig, PoolStats, WorkerBusy, WorkerFailed
from mast_otel.collector.workers.worker_main import (
    STOP,
    Handler,
    HandlerFactory,
    Signal,
    stop_signals_blocked,
    worker_main,
)

__all__ = ["Handler", "PoolConfig", "Signal", "WorkerBusy", "WorkerFailed", "WorkerPool"]

log = logging.getLogger(__name__)


@dataclass
class _Worker:
    shard: int
    generation: int
    process: BaseProcess
    inbox: Any  # multiprocessing Queue: (seq, signal, data) items, then _STOP
    outbox: Any  # multiprocessing Queue: ("done", seq, error) and ("closed", result)
    # Shared with the worker: the wall-clock time past which it handles no more requests
    # (0: none set).
    drain_until: Any = None
    pending_requests: int = 0
    pending_bytes: int = 0
    # Sizes of the requests given and not yet reported done, by sequence number.
    sizes: dict[int, int] = field(default_factory=dict)
    closed: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    failed: bool = False
    deaths: deque[float] = field(default_factory=deque)


class WorkerPool:
    def __init__(
        self,
        config: PoolConfig,
        factory: HandlerFactory,
        on_restart: Callable[[int], Iterable[tuple[Signal, bytes]]] | None = None,
        on_report: Callable[[int, int, Any], None] | None = None,
    ) -> None:
        config.validate()
        self.config = config
        self.factory = factory
        self.on_restart = on_restart
        self.on_report = on_report
        self.stats = PoolStats()
        self._context: SpawnContext | ForkServerContext = (
            multiprocessing.get_context("forkserver")
            if config.start_method == "forkserver"
            else multiprocessing.get_context("spawn")
        )
        if config.preload and isinstance(self._context, ForkServerContext):
            self._context.set_forkserver_preload(list(config.preload))
        self._lock = threading.Lock()
        self._seq = 0
        self._workers: list[_Worker] = []
        self._stopping = threading.Event()
        self._stopping_soon = threading.Event()
        self._monitor: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        # The fork server, the workers and the threads that (re)start them never see a stop
        # signal: the receiving process decides what a stop means (`worker_main`). The
        # resource tracker starts first: starting it unblocks SIGINT and SIGTERM in the
        # calling thread, which would let them reach the fork server started after it.
        resource_tracker.ensure_running()
        with stop_signals_blocked():
            with self._lock:
                self._workers = [self._spawn(shard, 0) for shard in range(self.config.workers)]
            self._monitor = threading.Thread(target=self._watch, name="worker-monitor", daemon=True)
            self._monitor.start()

    def begin_stop(self) -> None:
        """A stop has begun: a worker that dies from here on is not started again (what it
        held stays in the spool for the next start)."""
        self._stopping_soon.set()

    def kill(self) -> list[int]:
        """Stop now: SIGKILL every worker (what they were given stays in the spool); returns
        the shards that were still running."""
        self._stopping_soon.set()
        killed = []
        # Without the lock: this runs in a signal handler, possibly on a thread holding it.
        workers = list(self._workers)
        for worker in workers:
            if worker.process.is_alive():
                with contextlib.suppress(OSError, ValueError):
                    worker.process.kill()
                killed.append(worker.shard)
        return killed

    def _spawn(self, shard: int, generation: int) -> _Worker:
        inbox = self._context.Queue()
        outbox = self._context.Queue()
        drain_until = self._context.Value("d", 0.0, lock=False)
        process = self._context.Process(
            target=worker_main,
            args=(shard, self.factory, inbox, outbox, os.getpid(), drain_until),
            name=f"mast-otel-worker-{shard}",
            daemon=True,
        )
        process.start()
        worker = _Worker(shard, generation, process, inbox, outbox, drain_until)
        threading.Thread(
            target=self._collect, args=(worker,), name=f"worker-{shard}-results", daemon=True
        ).start()
        return worker

    def stop(self) -> dict[int, Any]:
        """Drain every worker and return what each handler's `close()` returned."""
        self._stopping.set()
        drain = self.config.drain_s
        with self._lock:
            workers = list(self._workers)
            for worker in workers:
                if not worker.failed:
                    if drain is not None:
                        worker.drain_until.value = time.time() + drain
                    worker.inbox.put(STOP)
        deadline = time.monotonic() + self.config.stop_timeout_s
        results: dict[int, Any] = {}
        for worker in workers:
            if worker.failed:
                continue
            if worker.closed.wait(max(0.0, deadline - time.monotonic())):
                results[worker.shard] = worker.result
            worker.process.join(max(0.1, deadline - time.monotonic()))
            if worker.process.is_alive():
                # SIGKILL: a worker does not act on SIGTERM.
                worker.process.kill()
                worker.process.join(5)
                self.stats.terminated_on_stop += 1
                log.error("worker %d did not drain in time; terminated", worker.shard)
        if self._monitor is not None:
            self._monitor.join(5)
        for worker in workers:
            if worker.failed or worker.shard not in results:
                # Nobody reads this queue any more: do not wait to flush it at exit.
                worker.inbox.cancel_join_thread()
            worker.inbox.close()
        return results

    # -- handing requests over --------------------------------------------------------------

    def submit(
        self,
        shards: dict[int, bytes],
        signal: Signal,
        *,
        force: bool = False,
        given: Callable[[], None] | None = None,
    ) -> None:
        """Give each shard its request (a `Routed.shards`), all or none: raises WorkerBusy or
        WorkerFailed, counted, when any of them cannot take its part now. `force` skips the
        queue bounds (a request already acknowledged must be handed over; `check` refused
        it earlier if it did not fit then). `given` is called once everything is handed over,
        under the pool's lock (a restart's `on_restart` sees either all of it or none)."""
        with self._lock:
            self._check(shards, bounds=not force)
            for shard, data in shards.items():
                self._give(self._workers[shard], signal, data)
            self.stats.requests_submitted += 1
            if given is not None:
                given()

    def check(self, sizes: dict[int, int]) -> None:
        """Raise WorkerBusy or WorkerFailed (counted) if a request of these sizes per shard
        would not be taken now; takes nothing."""
        with self._lock:
            self._check({shard: size for shard, size in sizes.items()}, bounds=True)

    def _check(self, shards: dict[int, bytes] | dict[int, int], *, bounds: bool) -> None:
        """Caller holds the lock."""
        retry = self.config.retry_after_s
        if self._stopping.is_set():
            raise Refused("the worker pool is stopping", retry)
        for shard, data in shards.items():
            size = data if isinstance(data, int) else len(data)
            worker = self._workers[shard]
            if worker.failed:
                self.stats.requests_refused += 1
                raise WorkerFailed(f"worker {shard} failed and is not restarted", retry)
            if (
                bounds
                and worker.pending_requests
                and (
                    worker.pending_requests >= self.config.queue_max_requests
                    or worker.pending_bytes + size > self.config.queue_max_bytes
                )
            ):
                self.stats.requests_refused += 1
                raise WorkerBusy(
                    f"worker {shard} is behind ({worker.pending_requests} requests, "
                    f"{worker.pending_bytes} bytes waiting)",
                    retry,
                )

    def give(self, shard: int, signal: Signal, data: bytes) -> None:
        """Hand one item to one worker, past its bounds (control items, and replays that
        wait on `wait_for_room` first)."""
        with self._lock:
            self._give(self._workers[shard], signal, data)

    def has_room(self, shard: int) -> bool:
        with self._lock:
            worker = self._workers[shard]
            return worker.failed or worker.pending_requests < self.config.queue_max_requests

    def _give(self, worker: _Worker, signal: Signal, data: bytes) -> None:
        """Caller holds the lock."""
        self._seq += 1
        worker.sizes[self._seq] = len(data)
        worker.pending_requests += 1
        worker.pending_bytes += len(data)
        worker.inbox.put((self._seq, signal, data))

    def wait_idle(self, timeout: float) -> bool:
        """Whether every worker handled all it was given within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if all(w.pending_requests == 0 or w.failed for w in self._workers):
                    return True
            time.sleep(0.01)
        return False

    # -- results and deaths -----------------------------------------------------------------

    def _collect(self, worker: _Worker) -> None:
        """Read one worker's reports until it closes or dies."""
        while True:
            if not self._stopping.is_set() and not worker.process.is_alive():
                # Killed: its last report may be cut short, and nothing it reported matters
                # any more (its replacement starts its own count); reading on could block.
                return
            try:
                message = worker.outbox.get(timeout=0.2)
            except queue.Empty:
                if not worker.process.is_alive() and worker.outbox.empty():
                    return
                continue
            except (EOFError, OSError):
                return
            if message[0] == "done":
                _, seq, error = message
                with self._lock:
                    size = worker.sizes.pop(seq, None)
                    if size is not None:
                        worker.pending_requests -= 1
                        worker.pending_bytes -= size
                    if error:
                        self.stats.handler_errors += 1
                if error:
                    log.error("worker %d failed on a request:\n%s", worker.shard, error)
            elif message[0] == "report":
                if self.on_report is not None:
                    try:
                        self.on_report(worker.shard, worker.generation, message[1])
                    except Exception:
                        log.exception("handling a report of worker %d failed", worker.shard)
            elif message[0] == "closed":
                worker.result = message[1]
                worker.closed.set()
                return

    def _watch(self) -> None:
        while not self._stopping.is_set():
            with self._lock:
                live = [w for w in self._workers if not w.failed]
            if not live:
                return
            exited = wait_for_exits([w.process.sentinel for w in live], timeout=0.2)
            if self._stopping.is_set():
                return
            for worker in live:
                if worker.process.sentinel in exited:
                    if self._stopping_soon.is_set():
                        self._died_while_stopping(worker)
                    else:
                        self._restart(worker)

    def _died_while_stopping(self, dead: _Worker) -> None:
        """No restart once a stop has begun: what the worker held stays in the spool."""
        log.error(
            "worker %d died during the stop (exit code %s): not started again; what it held "
            "stays in the spool for the next start",
            dead.shard,
            dead.process.exitcode,
        )
        dead.inbox.cancel_join_thread()
        with self._lock:
            dead.failed = True

    def _restart(self, dead: _Worker) -> None:
        code = dead.process.exitcode
        now = time.monotonic()
        deaths = dead.deaths
        deaths.append(now)
        while deaths and deaths[0] < now - self.config.restart_window_s:
            deaths.popleft()
        # What was queued for the dead worker is lost with its queue; its feeder must not
        # hold this process at exit.
        dead.inbox.cancel_join_thread()
        dead.inbox.close()
        if len(deaths) > self.config.max_restarts:
            log.error(
                "worker %d died %d times within %.0f s (exit code %s): not restarted",
                dead.shard,
                len(deaths),
                self.config.restart_window_s,
                code,
            )
            with self._lock:
                dead.failed = True
            return
        log.error("worker %d died (exit code %s); starting it again", dead.shard, code)
        with self._lock:
            # New requests for this shard wait on the lock until the replay is queued.
            worker = self._spawn(dead.shard, dead.generation + 1)
            worker.deaths = deaths
            self._workers[dead.shard] = worker
            self.stats.restarts += 1
            if self.on_restart is not None:
                for signal, data in self.on_restart(dead.shard):
                    self._give(worker, signal, data)
                    self.stats.replayed_requests += 1

    # -- health -----------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        with self._lock:
            workers = [
                {
                    "shard": w.shard,
                    "pid": w.process.pid,
                    "alive": w.process.is_alive(),
                    "failed": w.failed,
                    "restarts_in_window": len(w.deaths),
                    "pending_requests": w.pending_requests,
                    "pending_bytes": w.pending_bytes,
                }
                for w in self._workers
            ]
        return {"workers": workers, **self.stats.__dict__}
