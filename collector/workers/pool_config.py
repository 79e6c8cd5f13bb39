"""What the worker pool is given and what it answers: its settings (`PoolConfig`: the bounds
of each worker's queue, how often a worker may die before it is given up, how long a stop
waits), its counters (`PoolStats`, in the receiving process's health) and its refusals
(`WorkerBusy`, `WorkerFailed`: retryable, as any `Refused`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mast_otel.collector.consumer import Refused


class WorkerBusy(Refused):
    """A worker's queue is at its bound: the request is refused whole (retry later)."""


class WorkerFailed(Refused):
    """A worker died too often to be started again; its shard takes nothing more."""


@dataclass(frozen=True, slots=True)
class PoolConfig:
    workers: int
    queue_max_requests: int = 64
    queue_max_bytes: int = 64 * 1024 * 1024
    max_restarts: int = 5
    restart_window_s: float = 60.0
    stop_timeout_s: float = 30.0
    # How long, from the start of a stop, a worker handles what it was given; what is left is
    # not handled (it is in the spool). None: everything is handled.
    drain_s: float | None = None
    start_method: Literal["spawn", "forkserver"] = "spawn"
    # With forkserver: modules the fork server imports once, so a (re)started worker is a
    # fork of a process that has them already.
    preload: tuple[str, ...] = ()
    retry_after_s: float = 1.0

    def validate(self) -> None:
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1, got {self.workers}")
        if self.queue_max_requests < 1 or self.queue_max_bytes < 1:
            raise ValueError("worker queue bounds must be at least 1")
        if self.max_restarts < 0 or self.restart_window_s <= 0:
            raise ValueError("max_restarts must be ≥ 0 and restart_window_s > 0")
        if self.start_method not in ("spawn", "forkserver"):
            raise ValueError(f"start_method must be spawn or forkserver, got {self.start_method}")


@dataclass
class PoolStats:
    requests_submitted: int = 0
    requests_refused: int = 0
    restarts: int = 0
    replayed_requests: int = 0
    handler_errors: int = 0
    terminated_on_stop: int = 0
