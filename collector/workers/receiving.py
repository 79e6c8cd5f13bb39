"""The receivers' consumer when `pipeline.workers` > 1: routes each request by run, spools it,
and hands each part to the worker that owns its runs (see the package's docstring)."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from mast_otel.collector.config import Config
from mast_otel.collector.consumer import BatchTooLarge, RawRequest, Refused
from mast_otel.collector.otlp.redact_request import RequestRedactor
from mast_otel.collector.pipeline import StopReport
from mast_otel.collector.spool import Recovered, Spool, SpoolEntry, SpoolFull
from mast_otel.collector.store import Store
from mast_otel.collector.workers.health import WorkerHealth
from mast_otel.collector.workers.ledger import SpoolLedger
from mast_otel.collector.workers.parts import SPOOL_KINDS, Signal, part
from mast_otel.collector.workers.pool import PoolConfig, WorkerPool
from mast_otel.collector.workers.replay import replay_for, replay_spool
from mast_otel.collector.workers.route import Routed, route_parsed
from mast_otel.collector.workers.store_owner import StoreOwner
from mast_otel.collector.workers.worker_pipeline import WorkerFactory

log = logging.getLogger(__name__)


@dataclass
class ShardedStats:
    requests_routed: int = 0
    spans_routed: int = 0
    logs_routed: int = 0
    requests_refused: int = 0
    spool_refusals: int = 0
    replayed_requests: int = 0
    worker_replays: int = 0


class ShardedPipeline:
    """Routes, spools and hands over; the workers decode, analyse and write."""

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
        self.recovered = recovered
        self.stats = ShardedStats()
        self.store = store
        # Requests are redacted before they are written ahead: no secret reaches the spool.
        self.request_redactor = (
            RequestRedactor(config.redaction, config.receivers.max_value_depth) if spool else None
        )
        # The embedded store opens from one process only: this one, for every worker.
        self.owner = StoreOwner(store) if config.storage.backend != "clickhouse" else None
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
                drain_s=pipeline.stop_drain_s if spool is not None else None,
                retry_after_s=pipeline.retry_after_s,
                # Workers are forks of a server that imported the pipeline once: a restart
                # takes a fraction of a second instead of an interpreter's start.
                start_method="forkserver",
                preload=("mast_otel.collector.workers.worker_pipeline",),
            ),
            self.factory,
            on_restart=lambda shard: replay_for(self, shard),
            on_report=self._on_report,
        )
        self.ledger = (
            SpoolLedger(
                spool,
                self.workers,
                config.durability,
                lambda shard, data: self.pool.give(shard, "control", data),
            )
            if spool is not None
            else None
        )
        self.worker_health = WorkerHealth(self)
        self._lock = threading.Lock()
        self._seq = 0
        self._stopping = threading.Event()
        self.replay_done = threading.Event()
        self._replayer: threading.Thread | None = None
        self.stop_report: StopReport | None = None
        self.worker_results: dict[int, Any] = {}

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        self.pool.start()
        if self.spool is not None and self.spool.replaying:
            self._replayer = threading.Thread(
                target=replay_spool, args=(self,), name="mast-replay", daemon=True
            )
            self._replayer.start()
        else:
            self.replay_done.set()

    def stop(self) -> StopReport:
        """Take no more; finish the start-up replay; drain every worker (each closes its runs,
        or with `durability.resume_open_runs` keeps those in progress for the next start)."""
        self._stopping.set()
        # From here on a worker that dies is not started again: it would be replayed in the
        # middle of the stop. What it held stays in the spool.
        self.pool.begin_stop()
        if self._replayer is not None:
            self._replayer.join()
        results = self.pool.stop()
        self.worker_results = results
        report = StopReport(durable=self.spool is not None)
        for shard in range(self.workers):
            result = results.get(shard)
            if result is None:
                report.requests_left += 1
                report.reason = report.reason or (
                    f"worker {shard} died during the stop or did not drain within "
                    f"pipeline.worker_stop_timeout_s"
                )
                continue
            worker = result["report"]
            report.requests_left += worker["requests_left"]
            report.rows_unstored += worker["rows_unstored"]
            report.runs_left_open += worker["runs_left_open"]
            report.reason = report.reason or worker["reason"]
        if self.spool is not None:
            self.spool.idle_rotate()
        if self.owner is not None:
            self.owner.close()
        self.stop_report = report
        return report

    def kill(self) -> list[int]:
        """Stop now: the workers are killed; everything they had not stored stays in the
        spool. Returns the shards killed."""
        self._stopping.set()
        return self.pool.kill()

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
        if not self.replay_done.wait(retry):
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
        self.pool.check({shard: len(body) for shard, body in routed.shards.items()})
        if self._stopping.is_set():
            raise Refused("the collector is shutting down", retry)
        if self.spool is not None:
            try:
                entry = self.spool.append(SPOOL_KINDS[(raw.signal, raw.encoding)], raw.data)
            except SpoolFull as exc:
                self.stats.spool_refusals += 1
                self.stats.requests_refused += 1
                raise Refused(str(exc), retry) from exc
        else:
            with self._lock:
                self._seq += 1
                entry = SpoolEntry(self._seq, 0)
        # Durable now: handed over past the bounds if another request took the room since.
        self.hand_over(entry, raw.signal, routed, 0, time.time())
        self.stats.requests_routed += 1
        if raw.signal == "traces":
            self.stats.spans_routed += total
        else:
            self.stats.logs_routed += total
        return total, routed.rejected, routed.reason

    def hand_over(
        self, entry: SpoolEntry, signal: Signal, routed: Routed, flags: int, arrived: float
    ) -> None:
        """Give each worker its part of a spooled request (past the bounds: it is accepted)."""
        parts = {
            shard: part(entry.seq, entry.segment, flags, arrived, body)
            for shard, body in routed.shards.items()
        }
        ledger = self.ledger
        if not parts:
            if ledger is not None:
                ledger.finish_record(entry.seq, entry.segment)
            return
        given = (lambda: ledger.handed_over(entry, len(parts))) if ledger is not None else None
        self.pool.submit(parts, signal, force=True, given=given)

    # -- what workers report ----------------------------------------------------------------

    def _on_report(self, shard: int, generation: int, message: Any) -> None:
        if message[0] == "health":
            self.worker_health.reply(shard, message[1], message[2])
        elif self.ledger is not None:
            self.ledger.report(shard, generation, message)

    # -- health -----------------------------------------------------------------------------

    def routing_stats(self) -> dict[str, int]:
        stats = vars(self.stats).copy()
        if self.ledger is not None:
            stats.update(vars(self.ledger.stats))
        return stats

    def health(self) -> dict[str, Any]:
        status = self.worker_health.status()
        if self.spool is not None:
            status["durability"]["replaying"] = not self.replay_done.is_set()
        return status

    def stage_cpu_seconds(self, workers: dict[int, Any] | None = None) -> dict[str, float]:
        return self.worker_health.stage_cpu_seconds(workers)
