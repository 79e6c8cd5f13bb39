"""Worker processes fed by shard (collector/workers/pool.py), with real spawned processes:
every span reaches the worker that owns its trace; a worker killed with SIGKILL is started again
and rebuilt from a replay; a worker that is behind refuses whole requests; stop drains."""

from __future__ import annotations

import functools
import os
import random
import signal
import time
from collections import Counter
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from mast_otel.collector.otlp.decode import parse_trace_request
from mast_otel.collector.workers.pool import PoolConfig, WorkerBusy, WorkerFailed, WorkerPool
from mast_otel.collector.workers.route import route_traces, shard_for


class SpanCounter:
    """A trivial worker: counts spans per trace, and spans of traces it does not own."""

    def __init__(self, shard: int, workers: int, delay_s: float = 0.0) -> None:
        self.shard = shard
        self.workers = workers
        self.delay_s = delay_s
        self.spans: Counter[str] = Counter()
        self.strangers = 0

    def handle(self, signal: str, data: bytes) -> None:
        if self.delay_s:
            time.sleep(self.delay_s)
        for resource_spans in parse_trace_request(data).resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans[span.trace_id.hex()] += 1
                    if shard_for(span.trace_id, self.workers) != self.shard:
                        self.strangers += 1

    def close(self) -> dict[str, Any]:
        return {"spans": dict(self.spans), "strangers": self.strangers, "pid": os.getpid()}


def requests(count: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    traces = [rng.randbytes(16) for _ in range(25)]
    out = []
    for _ in range(count):
        request = ExportTraceServiceRequest()
        scope = request.resource_spans.add().scope_spans.add()
        for _ in range(rng.randint(1, 30)):
            scope.spans.add(trace_id=rng.choice(traces), span_id=rng.randbytes(8), name="s")
        out.append(request.SerializeToString())
    return out


def expected_counts(bodies: list[bytes]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for body in bodies:
        for rs in parse_trace_request(body).resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    counts[span.trace_id.hex()] += 1
    return counts


def merged(results: dict[int, Any]) -> Counter[str]:
    total: Counter[str] = Counter()
    owners: dict[str, int] = {}
    for shard, result in results.items():
        assert result["strangers"] == 0
        for trace_id, count in result["spans"].items():
            assert owners.setdefault(trace_id, shard) == shard  # one worker per trace
            total[trace_id] += count
    return total


def wait_until(condition: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.05)


@pytest.mark.parametrize("start_method", ["spawn", "forkserver"])
def test_every_span_reaches_the_worker_that_owns_its_trace_and_stop_drains(start_method):
    workers = 3
    pool = WorkerPool(
        PoolConfig(workers=workers, start_method=start_method),
        functools.partial(SpanCounter, workers=workers),
    )
    pool.start()
    bodies = requests(40, seed=1)
    try:
        for body in bodies:
            pool.submit(route_traces(body, workers).shards, "traces")
    finally:
        # Nothing waited for: stop itself must drain what the queues hold.
        results = pool.stop()
    assert sorted(results) == [0, 1, 2]
    assert merged(results) == expected_counts(bodies)
    assert len({r["pid"] for r in results.values()}) == workers
    assert pool.stats.requests_submitted == len(bodies)


def test_a_worker_killed_with_sigkill_is_restarted_and_rebuilt_from_the_replay():
    workers = 2
    given: dict[int, list[bytes]] = {0: [], 1: []}  # what a spool would hold, per shard

    def replay(shard: int) -> list[tuple[str, bytes]]:
        return [("traces", body) for body in given[shard]]

    pool = WorkerPool(
        PoolConfig(workers=workers),
        functools.partial(SpanCounter, workers=workers),
        on_restart=replay,  # type: ignore[arg-type]
    )
    pool.start()
    bodies = requests(30, seed=2)
    try:
        for body in bodies[:15]:
            shards = route_traces(body, workers).shards
            pool.submit(shards, "traces")
            for shard, part in shards.items():
                given[shard].append(part)
        assert pool.wait_idle(60)
        victim = pool.health()["workers"][0]["pid"]
        os.kill(victim, signal.SIGKILL)
        wait_until(lambda: pool.stats.restarts == 1)
        restarted = pool.health()["workers"][0]
        assert restarted["pid"] != victim and restarted["alive"]
        assert pool.stats.replayed_requests == len(given[0])
        for body in bodies[15:]:
            pool.submit(route_traces(body, workers).shards, "traces")
    finally:
        results = pool.stop()
    # The new worker holds what the dead one had (replayed) and everything after.
    assert merged(results) == expected_counts(bodies)
    assert results[0]["pid"] != victim
    assert pool.stats.restarts == 1


def test_a_worker_behind_refuses_whole_requests():
    workers = 2
    pool = WorkerPool(
        PoolConfig(workers=workers, queue_max_requests=2),
        functools.partial(SpanCounter, workers=workers, delay_s=0.5),
    )
    pool.start()
    rng = random.Random(3)
    # Trace ids that route to each worker.
    for_shard: dict[int, bytes] = {}
    while len(for_shard) < 2:
        trace_id = rng.randbytes(16)
        for_shard.setdefault(shard_for(trace_id, workers), trace_id)

    def request(*trace_ids: bytes) -> bytes:
        r = ExportTraceServiceRequest()
        scope = r.resource_spans.add().scope_spans.add()
        for trace_id in trace_ids:
            scope.spans.add(trace_id=trace_id, span_id=rng.randbytes(8))
        return r.SerializeToString()

    try:
        only_1 = request(for_shard[1])
        pool.submit(route_traces(only_1, workers).shards, "traces")
        pool.submit(route_traces(only_1, workers).shards, "traces")
        both = route_traces(request(for_shard[0], for_shard[1]), workers).shards
        assert set(both) == {0, 1}
        with pytest.raises(WorkerBusy, match="worker 1 is behind"):
            pool.submit(both, "traces")
        assert pool.stats.requests_refused == 1
        assert pool.wait_idle(60)
        pool.submit(both, "traces")  # room again
    finally:
        results = pool.stop()
    # Worker 0 got its part of the refused request never, of the retried one once.
    assert results[0]["spans"] == {for_shard[0].hex(): 1}
    assert results[1]["spans"] == {for_shard[1].hex(): 3}


def test_a_worker_that_dies_too_often_is_not_restarted_and_its_shard_refuses():
    pool = WorkerPool(
        PoolConfig(workers=2, max_restarts=0), functools.partial(SpanCounter, workers=2)
    )
    pool.start()
    try:
        os.kill(pool.health()["workers"][1]["pid"], signal.SIGKILL)
        wait_until(lambda: pool.health()["workers"][1]["failed"])
        assert pool.stats.restarts == 0
        with pytest.raises(WorkerFailed):
            pool.submit({1: b""}, "traces")
        pool.submit({0: b""}, "traces")
    finally:
        results = pool.stop()
    assert list(results) == [0]


def test_bad_pool_settings_are_refused_before_anything_starts():
    for bad in (
        PoolConfig(workers=0),
        PoolConfig(workers=2, queue_max_requests=0),
        PoolConfig(workers=2, start_method="fork"),  # type: ignore[arg-type]
    ):
        with pytest.raises(ValueError):
            WorkerPool(bad, functools.partial(SpanCounter, workers=2))
