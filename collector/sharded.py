"""The collector over several worker processes (`pipeline.workers` > 1).

The receiving process keeps the receivers, the write-ahead spool (a request is acknowledged once
its bytes are in it, as with one process), routing, replay and the spool's journal. Each request
is split by run (`sharding.route`: one request per worker, records not decoded) and each part is
handed to the worker that owns its runs (`sharding.workers`), tagged with the request's spool
sequence number and segment. A worker decodes its part and runs what one process runs today
(limits, redaction, normalization, windows, detectors, ticks, the exporter), in a `Pipeline` of
its own; every run lives wholly in one worker.

What a worker reports back, in order, over its pool channel: the spool segments its open runs
hold, the parts (spool sequence numbers) whose rows are stored, and the runs closed (with the
segments they held) once their findings and signature are stored. The receiving process
journals and releases: a request is journaled stored (`S seq`) and lets go of its segment once
every worker it went to has stored its part; a closed run (`C trace`) lets go of its segments.
So the spool on disk means what it means with one process, and a crash of the receiving process
is replayed the same way: every spooled request routed again (the shard function is the same in
every process), each part to its worker, with the closed runs sent first.

A worker that dies is started again and given, before anything newer, every request on disk
that has a part for it, routed again (those already stored by it are fed to its windows only),
so its open runs are rebuilt; the holds of the dead worker are let go once the replay is queued
to the new one.

The store: with the embedded store (chDB, one process per directory) the receiving process owns
it and each worker writes through it (`StoreOwner`/`StoreClient`: Arrow batches and queries over
a local socket); with a ClickHouse server each worker opens its own connection.

Back-pressure: a request is refused (retryable) when any worker has its bound of requests or
bytes waiting (`pipeline.worker_queue_max_*`), or the spool is full. Inside a worker the pipeline
holds at most two batches beyond the one in progress, so what waits is bytes, not records.

Stop: receivers stop, the start-up replay finishes, every worker drains, closes its runs,
writes and reports; then the spool and store close.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import secrets
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.connection import Client, Connection, Listener
from typing import Any, Literal

import pyarrow as pa
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from mast_otel.collector.config import Config
from mast_otel.collector.consumer import BatchTooLarge, RawRequest, Refused
from mast_otel.collector.otlp.decode import (
    OtlpDecodeError,
    decode_logs,
    decode_spans,
    parse_logs_request,
    parse_trace_request,
)
from mast_otel.collector.pipeline import Pipeline, StopReport, _Ledger
from mast_otel.collector.sharding.route import Routed, route_parsed, route_request, shard_for_hex
from mast_otel.collector.sharding.workers import PoolConfig, Signal, WorkerPool
from mast_otel.collector.spool import RecordKind, Recovered, Spool, SpoolEntry, SpoolFull
from mast_otel.collector.store import Store, StoreError, open_store
from mast_otel.collector.store.batching import ClickHouseExporter
from mast_otel.collector.store.retry import RetryPolicy

log = logging.getLogger(__name__)

# The header of a part handed to a worker: spool sequence number, segment, flags, and the
# wall-clock second it arrived (for a replayed request: its segment's last write).
_PART = struct.Struct("<QQBd")
_REPLAYED = 1
_STORED = 2

_KINDS: dict[tuple[str, str], RecordKind] = {
    ("traces", "protobuf"): RecordKind.TRACES_PROTOBUF,
    ("logs", "protobuf"): RecordKind.LOGS_PROTOBUF,
    ("traces", "json"): RecordKind.TRACES_JSON,
    ("logs", "json"): RecordKind.LOGS_JSON,
}
_SIGNALS: dict[RecordKind, tuple[Literal["traces", "logs"], Literal["protobuf", "json"]]] = {
    RecordKind.TRACES_PROTOBUF: ("traces", "protobuf"),
    RecordKind.LOGS_PROTOBUF: ("logs", "protobuf"),
    RecordKind.TRACES_JSON: ("traces", "json"),
    RecordKind.LOGS_JSON: ("logs", "json"),
}


def make_exporter(store: Store, config: Config) -> ClickHouseExporter:
    storage = config.storage
    return ClickHouseExporter(
        store,
        storage.batch_max_rows,
        storage.flush_interval_s,
        RetryPolicy.of(storage),
        max_buffered_rows=storage.max_buffered_rows,
        retry_initial_s=storage.retry_initial_s,
        retry_max_s=storage.retry_max_s,
        eager_flush_interval_s=storage.eager_flush_interval_s,
    )


# --- the embedded store, owned by the receiving process ---------------------------------------


class StoreOwner:
    """Serves the store to worker processes over a local socket (an abstract Unix socket,
    authenticated with a key only the workers are given). One thread per worker; the store
    itself takes one statement at a time."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.authkey = secrets.token_bytes(32)
        self.address = f"\0mast-otel-store-{os.getpid()}-{secrets.token_hex(8)}"
        self._listener = Listener(self.address, "AF_UNIX", authkey=self.authkey)
        self._closed = threading.Event()
        self._connections: list[Connection] = []
        self._lock = threading.Lock()
        self.requests = 0
        self.rows_inserted = 0
        self._accepting = threading.Thread(target=self._accept, name="store-owner", daemon=True)
        self._accepting.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                connection = self._listener.accept()
            except Exception:  # closed, or a peer without the key
                if self._closed.is_set():
                    return
                log.warning("a connection to the store owner was refused", exc_info=True)
                continue
            with self._lock:
                self._connections.append(connection)
            threading.Thread(
                target=self._serve, args=(connection,), name="store-owner-conn", daemon=True
            ).start()

    def _serve(self, connection: Connection) -> None:
        try:
            while True:
                try:
                    message = connection.recv()
                except (EOFError, OSError):
                    return
                op = message[0]
                try:
                    result: Any = None
                    if op == "insert":
                        _, table, data, token = message
                        self.store.insert_arrow(table, data, dedup_token=token)
                        self.rows_inserted += data.num_rows
                    elif op == "query":
                        result = self.store.query(message[1])
                    elif op == "execute":
                        self.store.execute(message[1])
                    else:
                        raise StoreError(f"unknown store operation {op!r}")
                    self.requests += 1
                    reply: tuple[Any, ...] = ("ok", result)
                except StoreError as exc:
                    reply = ("error", str(exc), exc.transient)
                except Exception as exc:
                    reply = ("error", f"{type(exc).__name__}: {exc}", False)
                try:
                    connection.send(reply)
                except (EOFError, OSError):
                    return
        finally:
            connection.close()
            with self._lock:
                if connection in self._connections:
                    self._connections.remove(connection)

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            connection.close()


class StoreClient:
    """A worker's store: every statement and insert goes to the `StoreOwner`."""

    cluster = ""

    def __init__(self, address: str, authkey: bytes, database: str) -> None:
        self.database = database
        self._connection = Client(address, "AF_UNIX", authkey=authkey)
        self._lock = threading.Lock()

    def _call(self, *message: Any) -> Any:
        with self._lock:
            try:
                self._connection.send(message)
                reply = self._connection.recv()
            except (EOFError, OSError) as exc:
                raise StoreError(f"the store's owner is gone: {exc}", transient=True) from exc
        if reply[0] == "ok":
            return reply[1]
        raise StoreError(reply[1], transient=bool(reply[2]))

    def execute(self, sql: str) -> None:
        self._call("execute", sql)

    def query(self, sql: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call("query", sql)
        return result

    def insert_arrow(self, table: str, data: pa.Table, dedup_token: str = "") -> None:
        if data.num_rows == 0:
            return
        self._call("insert", table, data, dedup_token)

    def close(self) -> None:
        with self._lock:
            self._connection.close()


# --- the worker's side ------------------------------------------------------------------------


class _SegmentHolds:
    """Collects the segments a worker's runs start to hold, sent with the next report."""

    def __init__(self) -> None:
        self.pending: list[int] = []

    def hold(self, segment: int, count: int = 1) -> None:
        self.pending.extend([segment] * count)


class _WorkerLedger(_Ledger):
    """The pipeline's ledger in a worker: what a write covered goes back to the spool's owner
    (the receiving process) instead of to a spool. Touched by the pipeline's thread only."""

    def __init__(self, send: Any) -> None:
        self.holds = _SegmentHolds()
        super().__init__(self.holds)  # type: ignore[arg-type]
        self.send = send

    def confirm(self, upto: tuple[int, int] | None = None) -> None:
        records_n, closes_n = upto if upto is not None else self.mark()
        records, closes = self._records[:records_n], self._closes[:closes_n]
        holds = self.holds.pending
        if not records and not closes and not holds:
            return
        self.holds.pending = []
        self.send(
            (
                "ledger",
                holds,
                [entry.seq for entry in records],
                [(trace_id, sorted(segments)) for trace_id, segments in closes],
            )
        )
        del self._records[:records_n]
        del self._closes[:closes_n]


@dataclass(frozen=True)
class WorkerFactory:
    """Builds a worker's handler in the worker process (pickled to it at every start)."""

    config: Config
    durable: bool
    store_address: str = ""
    store_authkey: bytes = b""
    verbose: bool = False

    def __call__(self, shard: int) -> ShardWorker:
        logging.basicConfig(
            level=logging.DEBUG if self.verbose else logging.INFO,
            format=f"%(asctime)s %(levelname)s worker-{shard} %(name)s: %(message)s",
        )
        threshold = self.config.pipeline.gc_gen0_threshold
        if threshold:
            gc.set_threshold(threshold, *gc.get_threshold()[1:])
        store: Store = (
            StoreClient(self.store_address, self.store_authkey, self.config.storage.database)
            if self.store_address
            else open_store(self.config.storage)
        )
        return ShardWorker(shard, self.config, store, self.durable)


class ShardWorker:
    """One worker: decodes its parts and runs them through a pipeline of its own."""

    def __init__(self, shard: int, config: Config, store: Store, durable: bool) -> None:
        self.shard = shard
        self.config = config
        self.store = store
        self.exporter = make_exporter(store, config)
        self.durable = durable
        self._send: Any = None
        self.ledger: _WorkerLedger | None = None
        self.pipeline: Pipeline | None = None
        self._replayed = 0
        self._depth = config.receivers.max_value_depth
        self._split_runs: Any = None

    def attach(self, send: Any) -> None:
        self._send = send
        if self.durable:
            self.ledger = _WorkerLedger(send)
        self.pipeline = Pipeline(self.config, self.exporter, ledger=self.ledger)
        if self.config.sharding.merge_split_runs:
            from mast_otel.collector.reanalysis.split_runs import SplitRunMerger

            self._split_runs = SplitRunMerger(self.store, self.config, self.exporter)
            self.pipeline.on_output(self._split_runs.note)
            self.pipeline.after_export(self._split_runs.check)
        self.pipeline.start()

    def handle(self, signal: Signal, data: bytes) -> None:
        pipeline = self.pipeline
        assert pipeline is not None
        if signal == "control":
            self._control(json.loads(data))
            return
        seq, segment, flags, arrived = _PART.unpack_from(data)
        payload = data[_PART.size :]
        replayed = bool(flags & _REPLAYED)
        now: float | None = None
        if replayed:
            self._replayed += 1
            # A rebuilt run's idle time counts from when its requests arrived (the last write
            # of their spool segment), not from the restart, as in one process.
            age = min(max(0.0, time.time() - arrived), self.config.windows.idle_timeout_s)
            now = pipeline.clock() - age
        try:
            items: list[Any]
            if signal == "traces":
                items = decode_spans(
                    parse_trace_request(payload), max_value_depth=self._depth
                ).records
            else:
                items = decode_logs(
                    parse_logs_request(payload), max_value_depth=self._depth
                ).records
        except OtlpDecodeError as exc:
            # Routed from a request that parsed: only a change of limits between two starts
            # could do this. Its spool record is let go like an empty one.
            log.error("cannot decode part of request %d: %s", seq, exc)
            items = []
        scan = pipeline.redactor.needs_scan(payload, "protobuf")
        # Hold at most two batches decoded ahead of the pipeline: the rest waits as bytes in
        # this worker's queue, which the receiving process bounds.
        while pipeline.queued_batches >= 2:
            time.sleep(0.002)
        pipeline.put(
            "spans" if signal == "traces" else "logs",
            items,
            SpoolEntry(seq, segment) if self.durable else None,
            replayed=replayed,
            stored=bool(flags & _STORED),
            scan=scan,
            size=len(payload),
            now=now,
        )

    def _control(self, message: dict[str, Any]) -> None:
        pipeline = self.pipeline
        assert pipeline is not None
        closed = message.get("closed")
        if closed:
            traces = list(closed)

            def mark() -> None:
                for trace_id in traces:
                    pipeline.windows.mark_closed(trace_id)

            pipeline.put("call", [mark])
        if message.get("relieve") is not None:
            segment = int(message["relieve"])
            pipeline.put("call", [lambda: pipeline.close_runs_holding(segment)])
        if "replay_end" in message:
            token = message["replay_end"]
            replayed = self._replayed
            self._replayed = 0

            def done() -> None:
                pipeline.replay_finished()
                log.info(
                    "worker %d: replay done: %d request(s), %d run(s) rebuilt and open",
                    self.shard,
                    replayed,
                    pipeline.windows.active_runs,
                )
                if self._send is not None:
                    # The rebuilt runs' holds first: the receiving process lets go of the
                    # dead worker's holds once it reads "replayed".
                    if self.ledger is not None and self.ledger.holds.pending:
                        holds, self.ledger.holds.pending = self.ledger.holds.pending, []
                        self._send(("ledger", holds, [], []))
                    self._send(("replayed", token))

            pipeline.put("call", [done])
        if message.get("health"):
            token = message["health"]

            def report() -> None:
                if self._send is not None:
                    self._send(("health", token, self._health()))

            pipeline.put("call", [report])

    def _health(self) -> dict[str, Any]:
        assert self.pipeline is not None
        status = self.pipeline.health()
        status["stages"] = self.pipeline.stage_cpu_seconds()
        status["buffered_rows"] = self.exporter.buffered_rows
        status["rows_written"] = dict(self.exporter.stats.rows_written)
        return status

    def close(self) -> dict[str, Any]:
        assert self.pipeline is not None
        report = self.pipeline.stop(enqueue_wait_s=0.0)
        health = self._health()
        self.store.close()
        return {"report": vars(report), "health": health}


# --- the receiving process's side -------------------------------------------------------------


@dataclass
class _Part:
    """A spooled request not yet stored by every worker it went to."""

    segment: int
    left: int
    stored: set[int] = field(default_factory=set)


@dataclass
class ShardedStats:
    requests_routed: int = 0
    spans_routed: int = 0
    logs_routed: int = 0
    requests_refused: int = 0
    spool_refusals: int = 0
    replayed_requests: int = 0
    worker_replays: int = 0
    stale_reports: int = 0
    # Times workers were asked to close the runs holding the oldest spool segment.
    spool_reliefs: int = 0


class ShardedPipeline:
    """The receivers' consumer when `pipeline.workers` > 1: routes, spools, hands over."""

    def __init__(
        self,
        config: Config,
        store: Store,
        *,
        spool: Spool | None = None,
        recovered: Recovered | None = None,
        verbose: bool = False,
    ) -> None:
        self.config = config
        self.workers = config.pipeline.worker_count()
        self.spool = spool
        self._recovered = recovered
        self.stats = ShardedStats()
        self.store = store
        self.owner: StoreOwner | None = None
        embedded = config.storage.backend != "clickhouse"
        if embedded:
            self.owner = StoreOwner(store)
        self.factory = WorkerFactory(
            config,
            durable=spool is not None,
            store_address=self.owner.address if self.owner else "",
            store_authkey=self.owner.authkey if self.owner else b"",
            verbose=verbose,
        )
        pipeline = config.pipeline
        self.pool = WorkerPool(
            PoolConfig(
                workers=self.workers,
                queue_max_requests=pipeline.worker_queue_max_requests,
                queue_max_bytes=pipeline.worker_queue_max_bytes,
                max_restarts=pipeline.worker_max_restarts,
                restart_window_s=pipeline.worker_restart_window_s,
                stop_timeout_s=pipeline.worker_stop_timeout_s,
                retry_after_s=pipeline.retry_after_s,
                # Workers are forks of a server that imported the pipeline once: a restart
                # takes a fraction of a second instead of an interpreter's start.
                start_method="forkserver",
                preload=("mast_otel.collector.sharded",),
            ),
            self.factory,
            on_restart=self._replay_for,
            on_report=self._on_report,
        )
        # Ledger state, under `_lock`: requests waiting for their parts to be stored, the
        # segments each worker's runs hold, the holds of dead workers until their successor's
        # replay is queued, and which generation of each worker is current.
        self._lock = threading.Lock()
        self._parts: dict[int, _Part] = {}
        self._held: list[Counter[int]] = [Counter() for _ in range(self.workers)]
        self._stale: dict[int, Counter[int]] = {}
        self._generation = [0] * self.workers
        # Sequence numbers handed to workers (replayed at a restart only if handed over).
        self._given: set[int] = set()
        # (segment, shard, generation) asked to close the runs holding a segment.
        self._relieving: set[tuple[int, int, int]] = set()
        self._seq = 0
        self._stopping = threading.Event()
        self._replay_done = threading.Event()
        self._replayer: threading.Thread | None = None
        self._health_replies: dict[str, dict[int, Any]] = {}
        self._health_ready = threading.Condition(self._lock)
        self.stop_report: StopReport | None = None
        self.worker_results: dict[int, Any] = {}
        self._rotate = ThreadPoolExecutor(1, thread_name_prefix="mast-spool-journal")

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        self.pool.start()
        if self.spool is not None and self.spool.replaying:
            self._replayer = threading.Thread(
                target=self._replay_spool, name="mast-replay", daemon=True
            )
            self._replayer.start()
        else:
            self._replay_done.set()

    def stop(self) -> StopReport:
        """Take no more; finish the start-up replay; drain every worker."""
        self._stopping.set()
        if self._replayer is not None:
            self._replayer.join()
        results = self.pool.stop()
        self.worker_results = results
        report = StopReport(durable=self.spool is not None)
        for shard in range(self.workers):
            result = results.get(shard)
            if result is None:
                report.requests_left += 1
                report.reason = report.reason or f"worker {shard} did not drain in time"
                continue
            part = result["report"]
            report.requests_left += part["requests_left"]
            report.rows_unstored += part["rows_unstored"]
            report.runs_left_open += part["runs_left_open"]
            report.reason = report.reason or part["reason"]
        self._rotate.shutdown()
        if self.spool is not None:
            self.spool.idle_rotate()
        if self.owner is not None:
            self.owner.close()
        self.stop_report = report
        return report

    # -- the receivers' side ----------------------------------------------------------------

    def check_room(self, request_bytes: int) -> None:
        retry = self.config.pipeline.retry_after_s
        if self._stopping.is_set():
            raise Refused("the collector is shutting down", retry)
        if self.spool is not None and self.spool.bytes + request_bytes > self.spool.max_bytes:
            self.stats.spool_refusals += 1
            self.stats.requests_refused += 1
            raise Refused(
                f"write-ahead spool is full ({self.spool.bytes} of {self.spool.max_bytes} "
                "bytes): the store is behind or unreachable",
                retry,
            )
        for shard in range(self.workers):
            if not self.pool.has_room(shard):
                self.stats.requests_refused += 1
                raise Refused(f"worker {shard} is behind: retry later", retry)

    def consume_request(
        self,
        request: ExportTraceServiceRequest | ExportLogsServiceRequest,
        raw: RawRequest,
    ) -> tuple[int, int, str]:
        """Route, spool and hand over one parsed request; returns (records, of them rejected
        for their ids, why). Raises Refused when it cannot be taken now."""
        retry = self.config.pipeline.retry_after_s
        if not self._replay_done.wait(retry):
            raise Refused("replaying the spool left by the previous run: retry later", retry)
        data = raw.data if raw.encoding == "protobuf" else request.SerializeToString()
        routed = route_parsed(request, data, self.workers)
        total = routed.total
        if not total:
            return 0, 0, ""
        limit = self.config.pipeline.queue_max_items
        if total > limit:
            raise BatchTooLarge(
                f"the request holds {total} records, more than the whole pipeline queue "
                f"(pipeline.queue_max_items = {limit}): send smaller batches"
            )
        self.pool.check({shard: len(part) for shard, part in routed.shards.items()})
        if self._stopping.is_set():
            raise Refused("the collector is shutting down", retry)
        entry = SpoolEntry(0, 0)
        if self.spool is not None:
            try:
                entry = self.spool.append(_KINDS[(raw.signal, raw.encoding)], raw.data)
            except SpoolFull as exc:
                self.stats.spool_refusals += 1
                self.stats.requests_refused += 1
                raise Refused(str(exc), retry) from exc
        else:
            with self._lock:
                self._seq += 1
                entry = SpoolEntry(self._seq, 0)
        # Durable now: handed over past the bounds if another request took the room since.
        self._hand_over(entry, raw.signal, routed, 0, time.time())
        self.stats.requests_routed += 1
        if raw.signal == "traces":
            self.stats.spans_routed += total
        else:
            self.stats.logs_routed += total
        return total, routed.rejected, routed.reason

    def _hand_over(
        self,
        entry: SpoolEntry,
        signal: Literal["traces", "logs"],
        routed: Routed,
        flags: int,
        arrived: float,
        force: bool = True,
    ) -> None:
        shards = {
            shard: _PART.pack(entry.seq, entry.segment, flags, arrived) + part
            for shard, part in routed.shards.items()
        }
        durable = self.spool is not None

        def given() -> None:
            if durable:
                with self._lock:
                    self._given.add(entry.seq)
                    self._parts[entry.seq] = _Part(entry.segment, len(shards))

        if not shards:
            if durable:
                self._finish_record(entry.seq, entry.segment)
            return
        self.pool.submit(shards, signal, force=force, given=given)

    # -- replay -----------------------------------------------------------------------------

    def _replay_spool(self) -> None:
        """What the previous process left, routed again before any new request."""
        assert self.spool is not None
        recovered = self._recovered or Recovered()
        started = time.monotonic()
        log.info(
            "replaying %d spool segment(s), %d bytes, left by the previous run, over %d workers",
            recovered.segments,
            recovered.bytes,
            self.workers,
        )
        closed: list[list[str]] = [[] for _ in range(self.workers)]
        for trace_id in recovered.closed:
            closed[shard_for_hex(trace_id, self.workers)].append(trace_id)
        for shard, traces in enumerate(closed):
            if traces:
                self.pool.give(shard, "control", json.dumps({"closed": traces}).encode())
        count = 0
        try:
            for entry, kind, payload in self.spool.replay():
                signal, encoding = _SIGNALS[kind]
                try:
                    routed = route_request(payload, self.workers, signal, encoding)
                except (OtlpDecodeError, ValueError) as exc:
                    log.error("cannot route spooled request %d: %s", entry.seq, exc)
                    routed = Routed()
                flags = _REPLAYED | (_STORED if entry.seq in recovered.stored else 0)
                written = self.spool.written_at(entry.segment) or time.time()
                for shard in routed.shards:
                    while not self.pool.has_room(shard):
                        time.sleep(0.005)
                count += 1
                self.stats.replayed_requests += 1
                self._hand_over(entry, signal, routed, flags, written)
        except Refused as exc:
            log.error("the replay stopped: %s", exc)
        finally:
            for shard in range(self.workers):
                try:
                    self.pool.give(shard, "control", json.dumps({"replay_end": "start"}).encode())
                except Exception:
                    log.exception("cannot tell worker %d the replay is done", shard)
            self._replay_done.set()
        log.info(
            "replay done: %d request(s) in %.1f s, routed to %d workers",
            count,
            time.monotonic() - started,
            self.workers,
        )

    def _replay_for(self, shard: int) -> Iterator[tuple[Signal, bytes]]:
        """A restarted worker's requests, before anything newer (under the pool's lock)."""
        with self._lock:
            self._generation[shard] += 1
            stale = self._held[shard]
            self._held[shard] = Counter()
            previous = self._stale.get(shard)
            if previous:
                stale.update(previous)
            self._stale[shard] = stale
            given = set(self._given)
            parts_stored = {seq: shard in part.stored for seq, part in self._parts.items()}
        self.stats.worker_replays += 1
        if self.spool is None:
            yield "control", json.dumps({"replay_end": "restart"}).encode()
            return
        journal = self.spool.journaled()
        closed = [t for t in journal.closed if shard_for_hex(t, self.workers) == shard]
        if closed:
            yield "control", json.dumps({"closed": closed}).encode()
        replayed = 0
        for entry, kind, payload in self.spool.read_live():
            if entry.seq not in given:
                continue
            signal, encoding = _SIGNALS[kind]
            try:
                routed = route_request(payload, self.workers, signal, encoding)
            except (OtlpDecodeError, ValueError):
                continue
            part = routed.shards.get(shard)
            if part is None:
                continue
            stored = entry.seq in journal.stored or parts_stored.get(entry.seq, True)
            flags = _REPLAYED | (_STORED if stored else 0)
            replayed += 1
            written = self.spool.written_at(entry.segment) or time.time()
            yield signal, _PART.pack(entry.seq, entry.segment, flags, written) + part
        log.info("worker %d restarted: %d spooled request(s) replayed to it", shard, replayed)
        yield "control", json.dumps({"replay_end": "restart"}).encode()

    # -- what workers report ----------------------------------------------------------------

    def _on_report(self, shard: int, generation: int, message: Any) -> None:
        kind = message[0]
        if kind == "health":
            with self._lock:
                replies = self._health_replies.get(message[1])
                if replies is not None:
                    replies[shard] = message[2]
                    self._health_ready.notify_all()
            return
        with self._lock:
            if generation != self._generation[shard]:
                self.stats.stale_reports += 1
                return
        if kind == "replayed":
            with self._lock:
                stale = self._stale.pop(shard, None)
            if stale and self.spool is not None:
                for segment, count in stale.items():
                    if count > 0:
                        self.spool.release(segment, count)
            return
        if kind != "ledger" or self.spool is None:
            return
        _, holds, stored, closes = message
        spool = self.spool
        lines: dict[int, list[str]] = {}
        releases: list[int] = []
        with self._lock:
            held = self._held[shard]
            for segment in holds:
                held[segment] += 1
                spool.hold(segment)
            for trace_id, segments in closes:
                for segment in segments:
                    lines.setdefault(segment, []).append(f"C {trace_id}")
                    releases.append(segment)
                    held[segment] -= 1
            for seq in stored:
                part = self._parts.get(seq)
                if part is None or shard in part.stored:
                    continue
                part.stored.add(shard)
                part.left -= 1
                if part.left <= 0:
                    del self._parts[seq]
                    lines.setdefault(part.segment, []).append(f"S {seq}")
                    releases.append(part.segment)
            if len(self._given) > 4 * len(self._parts) + 10_000:
                # Records in segments no longer on disk are never replayed again.
                floor = spool.oldest_segment()
                if floor is not None:
                    self._given = {seq for seq in self._given if seq >= floor}
        if lines:
            spool.journal(lines)
        for segment in releases:
            spool.release(segment)
        spool.idle_rotate()
        self._relieve_spool()

    def _relieve_spool(self) -> None:
        """Past `durability.run_eviction_ratio` of the spool, have the workers close the runs
        that alone hold its oldest segment (as one process does), once per segment and worker
        generation: the segment goes when their closes are stored."""
        spool = self.spool
        assert spool is not None
        durability = self.config.durability
        if spool.bytes <= durability.max_spool_bytes * durability.run_eviction_ratio:
            return
        oldest = spool.oldest_held()
        if oldest is None:
            return
        with self._lock:
            holders = {
                shard: held[oldest] for shard, held in enumerate(self._held) if held[oldest] > 0
            }
            if not holders or spool.refs(oldest) != sum(holders.values()):
                return  # records in it still wait for the store, or a dead worker's holds
            asked = {(oldest, shard, self._generation[shard]) for shard in holders}
            if asked <= self._relieving:
                return
            self._relieving = {key for key in self._relieving if key[0] >= oldest} | asked
        self.stats.spool_reliefs += 1
        for shard in holders:
            self.pool.give(shard, "control", json.dumps({"relieve": oldest}).encode())

    def _finish_record(self, seq: int, segment: int) -> None:
        assert self.spool is not None
        self.spool.journal({segment: [f"S {seq}"]})
        self.spool.release(segment)

    # -- health -----------------------------------------------------------------------------

    def worker_health(self, timeout_s: float = 1.0) -> dict[int, Any]:
        """Each live worker's pipeline health, asked for now (those that do not answer within
        the timeout are left out)."""
        token = secrets.token_hex(6)
        with self._lock:
            self._health_replies[token] = {}
        for shard in range(self.workers):
            try:
                self.pool.give(shard, "control", json.dumps({"health": token}).encode())
            except Exception:
                continue
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while len(self._health_replies[token]) < self.workers:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._health_ready.wait(left)
            return self._health_replies.pop(token)

    def health(self) -> dict[str, Any]:
        workers = self.worker_health()
        pool = self.pool.health()
        queue_items = sum(w.get("queue_items", 0) for w in workers.values())
        pending = sum(w["pending_requests"] for w in pool["workers"])
        pipeline_stats: Counter[str] = Counter()
        windows: Counter[str] = Counter()
        findings_by_mode: Counter[str] = Counter()
        for worker in workers.values():
            for key, value in worker["pipeline"].items():
                if isinstance(value, int):
                    pipeline_stats[key] += value
            findings_by_mode.update(worker["pipeline"].get("findings_by_mode", {}))
            for key, value in worker["windows"].items():
                if isinstance(value, int):
                    windows[key] += value
        status: dict[str, Any] = {
            # Records decoded in workers plus requests waiting for a worker.
            "queue_items": queue_items + pending,
            "queue_max_items": self.config.pipeline.queue_max_items,
            "queue_bytes": sum(w["pending_bytes"] for w in pool["workers"]),
            "queue_max_bytes": self.config.pipeline.worker_queue_max_bytes * self.workers,
            "active_runs": sum(w.get("active_runs", 0) for w in workers.values()),
            "pipeline": {**pipeline_stats, "findings_by_mode": dict(findings_by_mode)},
            "windows": dict(windows),
            "workers": {**pool, "routing": vars(self.stats).copy()},
            "durability": {"mode": self.config.durability.mode},
        }
        if self.spool is not None:
            status["durability"].update(self.spool.health())
            status["durability"]["replaying"] = not self._replay_done.is_set()
        status["_worker_status"] = workers
        return status

    def stage_cpu_seconds(self, workers: dict[int, Any] | None = None) -> dict[str, float]:
        stages: Counter[str] = Counter()
        for status in (workers or self.worker_health()).values():
            stages.update(status.get("stages", {}))
        return dict(stages)
