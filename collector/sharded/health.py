"""The health of a sharded collector: each worker's pipeline asked for now, and summed.

Workers answer on their pipeline's thread, in turn with what they were given: a worker busy
with a long queue may miss the deadline and is then left out of the sums (`workers` says how
many answered)."""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mast_otel.collector.sharded.receiving import ShardedPipeline


class WorkerHealth:
    def __init__(self, sharded: ShardedPipeline) -> None:
        self.sharded = sharded
        self._replies: dict[str, dict[int, Any]] = {}
        self._ready = threading.Condition()

    def ask(self, timeout_s: float = 1.0) -> dict[int, Any]:
        """Each live worker's pipeline health, asked for now (those that do not answer within
        the timeout are left out)."""
        sharded = self.sharded
        token = secrets.token_hex(6)
        with self._ready:
            self._replies[token] = {}
        for shard in range(sharded.workers):
            try:
                sharded.pool.give(shard, "control", json.dumps({"health": token}).encode())
            except Exception:
                continue
        deadline = time.monotonic() + timeout_s
        with self._ready:
            while len(self._replies[token]) < sharded.workers:
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
        sharded = self.sharded
        workers = self.ask()
        pool = sharded.pool.health()
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
        config = sharded.config
        status: dict[str, Any] = {
            # Records decoded in workers plus requests waiting for a worker.
            "queue_items": queue_items + pending,
            "queue_max_items": config.pipeline.queue_max_items,
            "queue_bytes": sum(w["pending_bytes"] for w in pool["workers"]),
            "queue_max_bytes": config.pipeline.worker_queue_max_bytes * sharded.workers,
            "active_runs": sum(w.get("active_runs", 0) for w in workers.values()),
            "pipeline": {**pipeline_stats, "findings_by_mode": dict(findings_by_mode)},
            "windows": {**windows, "runs_closed": dict(runs_closed)},
            "workers": {
                **pool,
                "answered": len(workers),
                "routing": sharded.routing_stats(),
                "store_owner": vars(sharded.owner.stats).copy() if sharded.owner else {},
            },
            "durability": {"mode": config.durability.mode},
        }
        if sharded.spool is not None:
            status["durability"].update(sharded.spool.health())
        status["_worker_status"] = workers
        return status

    def stage_cpu_seconds(self, workers: dict[int, Any] | None = None) -> dict[str, float]:
        stages: Counter[str] = Counter()
        for status in (workers or self.ask()).values():
            stages.update(status.get("stages", {}))
        return dict(stages)
