"""The health of a collector over worker processes: each worker's pipeline asked for now, and
summed.

Workers answer on their pipeline's thread, in turn with what they were given: a worker busy
with a long queue may miss the deadline and is then left out of the sums (`workers` says how
many answered). What the sums read of the receiving process is `HealthSources`."""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections import Counter
from typing import Any, Protocol

from mast_otel.collector.config import Config
from mast_otel.collector.spool import Spool
from mast_otel.collector.workers.pool import WorkerPool
from mast_otel.collector.workers.store_owner import StoreOwner


class HealthSources(Protocol):
    """What the workers' health reads in the receiving process: the worker pool (to ask each
    worker, and its own counts), the settings, the store's owner and the spool, if any, and the
    routing counters."""

    @property
    def config(self) -> Config: ...

    @property
    def workers(self) -> int: ...

    @property
    def pool(self) -> WorkerPool: ...

    @property
    def owner(self) -> StoreOwner | None: ...

    @property
    def spool(self) -> Spool | None: ...

    def routing_stats(self) -> dict[str, int]: ...


class WorkerHealth:
    """The workers' health: asked of each worker's pipeline, summed with the pool's counts."""

    def __init__(self, sources: HealthSources) -> None:
        self.sources = sources
        self._replies: dict[str, dict[int, Any]] = {}
        self._ready = threading.Condition()

    def ask(self, timeout_s: float = 1.0) -> dict[int, Any]:
        """Each live worker's pipeline health, asked for now (those that do not answer within
        the timeout are left out)."""
        sources = self.sources
        token = secrets.token_hex(6)
        with self._ready:
            self._replies[token] = {}
        for shard in range(sources.workers):
            try:
                sources.pool.give(shard, "control", json.dumps({"health": token}).encode())
            except Exception:
                continue
        deadline = time.monotonic() + timeout_s
        with self._ready:
            while len(self._replies[token]) < sources.workers:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._ready.wait(left)
            return self._replies.pop(token)

    def reply(self, shard: int, token: str, status: Any) -> None:
        with self._ready:
            replies = self._replies.get(token)
            if replies is not None:
                replies[shard] = status
                self._ready.notify_all()

    def status(self) -> dict[str, Any]:
        sources = self.sources
        workers = self.ask()
        pool = sources.pool.health()
        queue_items = sum(w.get("queue_items", 0) for w in workers.values())
        pending = sum(w["pending_requests"] for w in pool["workers"])
        pipeline_stats: Counter[str] = Counter()
        windows: Counter[str] = Counter()
        runs_closed: Counter[str] = Counter()
        findings_by_mode: Counter[str] = Counter()
        for worker in workers.values():
            for key, value in worker["pipeline"].items():
                if isinstance(value, int):
                    pipeline_stats[key] += value
            findings_by_mode.update(worker["pipeline"].get("findings_by_mode", {}))
            for key, value in worker["windows"].items():
                if isinstance(value, int):
                    windows[key] += value
            runs_closed.update(worker["windows"].get("runs_closed", {}))
        config = sources.config
        status: dict[str, Any] = {
            # Records decoded in workers plus requests waiting for a worker.
            "queue_items": queue_items + pending,
            "queue_max_items": config.pipeline.queue_max_items,
            "queue_bytes": sum(w["pending_bytes"] for w in pool["workers"]),
            "queue_max_bytes": config.pipeline.worker_queue_max_bytes * sources.workers,
            "active_runs": sum(w.get("active_runs", 0) for w in workers.values()),
            "pipeline": {**pipeline_stats, "findings_by_mode": dict(findings_by_mode)},
            "windows": {**windows, "runs_closed": dict(runs_closed)},
            "workers": {
                **pool,
                "answered": len(workers),
                "routing": sources.routing_stats(),
                "store_owner": vars(sources.owner.stats).copy() if sources.owner else {},
            },
            "durability": {"mode": config.durability.mode},
        }
        if sources.spool is not None:
            status["durability"].update(sources.spool.health())
        status["_worker_status"] = workers
        return status

    def stage_cpu_seconds(self, workers: dict[int, Any] | None = None) -> dict[str, float]:
        stages: Counter[str] = Counter()
        for status in (workers or self.ask()).values():
            stages.update(status.get("stages", {}))
        return dict(stages)
