"""The handler of a worker process (`WorkerFactory` builds it there, `worker_main` feeds it):
decodes the parts it is handed and runs them through a pipeline of its own (limits, redaction,
normalization, windows, detectors, ticks, the exporter), so every run lives wholly in one worker.

What it reports back to the receiving process, in order, over its pool channel: the spool
segments its open runs start to hold, the parts (spool sequence numbers) whose rows are stored,
and the runs closed (with the segments they held) once their findings and signature are stored.
Control items tell it which runs were closed before a replay, when a replay ends, to close the
runs holding a spool segment (the spool is past its share), and to report its health.
"""

from __future__ import annotations

import gc
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from mast_otel.collector.config import Config
from mast_otel.collector.otlp.decode import (
    OtlpDecodeError,
    decode_logs,
    decode_spans,
    parse_logs_request,
    parse_trace_request,
)
from mast_otel.collector.pipeline import Pipeline, SegmentLedger
from mast_otel.collector.spool import SpoolEntry
from mast_otel.collector.store import Store, open_store
from mast_otel.collector.store.batching import ClickHouseExporter
from mast_otel.collector.workers.parts import REPLAYED, STORED, read_part
from mast_otel.collector.workers.store_owner import StoreClient
from mast_otel.collector.workers.worker_main import Signal

log = logging.getLogger(__name__)


def make_exporter(store: Store, config: Config) -> ClickHouseExporter:
    return ClickHouseExporter.of(store, config.storage)


class _SegmentHolds:
    """Collects the segments a worker's runs start to hold, sent with the next report."""

    def __init__(self) -> None:
        self.pending: list[int] = []

    def hold(self, segment: int, count: int = 1) -> None:
        self.pending.extend([segment] * count)


class _WorkerLedger(SegmentLedger):
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
        seq, segment, flags, arrived, payload = read_part(data)
        replayed = bool(flags & REPLAYED)
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
            stored=bool(flags & STORED),
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

    def close(self, left: int = 0) -> dict[str, Any]:
        """Stop the pipeline; `left` requests were not handled (the stop's drain time ran
        out): they are in the spool, so every open run stays open there too, to be rebuilt
        whole at the next start."""
        assert self.pipeline is not None
        report = self.pipeline.stop(enqueue_wait_s=0.0, keep_open=left > 0)
        if left:
            report.requests_left += left
            report.reason = report.reason or (
                f"the stop's drain time ran out (pipeline.stop_drain_s = "
                f"{self.config.pipeline.stop_drain_s} s)"
            )
        health = self._health()
        self.store.close()
        return {"report": vars(report), "health": health}
