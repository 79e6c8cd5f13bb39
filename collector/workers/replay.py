"""Replaying the spool to workers: at start, what the previous process left; at a worker's
restart, every request on disk that has a part for it.

Both route each spooled request again through the one shard function (the same runs reach the
same workers) and tell each worker first which of its runs were closed, so a replay neither
re-writes stored rows nor reopens closed runs. Each part carries the last write of its spool
segment as its arrival: a rebuilt run's idle time counts from there, not from the restart.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Protocol

from mast_otel.collector.otlp.decode import OtlpDecodeError
from mast_otel.collector.spool import Recovered, Spool, SpoolEntry
from mast_otel.collector.workers.ledger import SpoolLedger
from mast_otel.collector.workers.parts import REPLAYED, SIGNALS, STORED, part
from mast_otel.collector.workers.pool import WorkerPool
from mast_otel.collector.workers.route import Routed, route_request, shard_for_hex
from mast_otel.collector.workers.route import Signal as RecordSignal
from mast_otel.collector.workers.worker_main import Signal

log = logging.getLogger(__name__)


class ReplayCounts(Protocol):
    """The routing counters a replay adds to."""

    replayed_requests: int
    worker_replays: int


class ReplaySources(Protocol):
    """What a replay reads and calls in the receiving process: the spool and what the previous
    process left in it, the worker pool, the spool's ledger, the counters, the hand-over of one
    spooled request's parts, and the event that lets new requests in."""

    @property
    def workers(self) -> int: ...

    @property
    def spool(self) -> Spool | None: ...

    @property
    def recovered(self) -> Recovered | None: ...

    @property
    def pool(self) -> WorkerPool: ...

    @property
    def ledger(self) -> SpoolLedger | None: ...

    @property
    def stats(self) -> ReplayCounts: ...

    @property
    def replay_done(self) -> threading.Event: ...

    def hand_over(
        self, entry: SpoolEntry, signal: RecordSignal, routed: Routed, flags: int, arrived: float
    ) -> None: ...


def control(message: dict[str, object]) -> bytes:
    return json.dumps(message).encode()


def replay_spool(sources: ReplaySources) -> None:
    """What the previous process left, routed again before any new request (on its own
    thread; new requests wait for `replay_done`)."""
    spool, pool, workers = sources.spool, sources.pool, sources.workers
    assert spool is not None
    recovered = sources.recovered or Recovered()
    started = time.monotonic()
    log.info(
        "replaying %d spool segment(s), %d bytes, left by the previous run, over %d workers",
        recovered.segments,
        recovered.bytes,
        workers,
    )
    closed: list[list[str]] = [[] for _ in range(workers)]
    for trace_id in recovered.closed:
        closed[shard_for_hex(trace_id, workers)].append(trace_id)
    for shard, traces in enumerate(closed):
        if traces:
            pool.give(shard, "control", control({"closed": traces}))
    count = 0
    try:
        for entry, kind, payload in spool.replay():
            signal, encoding = SIGNALS[kind]
            try:
                routed = route_request(payload, workers, signal, encoding)
            except (OtlpDecodeError, ValueError) as exc:
                log.error("cannot route spooled request %d: %s", entry.seq, exc)
                routed = Routed()
            flags = REPLAYED | (STORED if entry.seq in recovered.stored else 0)
            written = spool.written_at(entry.segment) or time.time()
            for shard in routed.shards:
                while not pool.has_room(shard):
                    time.sleep(0.005)
            count += 1
            sources.stats.replayed_requests += 1
            sources.hand_over(entry, signal, routed, flags, written)
    except Exception as exc:
        log.error("the replay stopped: %s", exc)
    finally:
        for shard in range(workers):
            try:
                pool.give(shard, "control", control({"replay_end": "start"}))
            except Exception:
                log.exception("cannot tell worker %d the replay is done", shard)
        sources.replay_done.set()
    log.info(
        "replay done: %d request(s) in %.1f s, routed to %d workers",
        count,
        time.monotonic() - started,
        workers,
    )


def replay_for(sources: ReplaySources, shard: int) -> Iterator[tuple[Signal, bytes]]:
    """A restarted worker's requests, before anything newer (under the pool's lock)."""
    sources.stats.worker_replays += 1
    spool, ledger = sources.spool, sources.ledger
    if spool is None or ledger is None:
        yield "control", control({"replay_end": "restart"})
        return
    given, parts_stored = ledger.restarted(shard)
    journal = spool.journaled()
    closed = [t for t in journal.closed if shard_for_hex(t, sources.workers) == shard]
    if closed:
        yield "control", control({"closed": closed})
    replayed = 0
    for entry, kind, payload in spool.read_live():
        if entry.seq not in given:
            continue
        signal, encoding = SIGNALS[kind]
        try:
            routed = route_request(payload, sources.workers, signal, encoding)
        except (OtlpDecodeError, ValueError):
            continue
        body = routed.shards.get(shard)
        if body is None:
            continue
        stored = entry.seq in journal.stored or parts_stored.get(entry.seq, True)
        flags = REPLAYED | (STORED if stored else 0)
        written = spool.written_at(entry.segment) or time.time()
        replayed += 1
        yield signal, part(entry.seq, entry.segment, flags, written, body)
    log.info("worker %d restarted: %d spooled request(s) replayed to it", shard, replayed)
    yield "control", control({"replay_end": "restart"})
