"""The running collector: store, exporter, pipeline and receivers, started and stopped in
order. `serve` and `demo` both run one of these."""

from __future__ import annotations

import gc
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from mast_otel.collector.config import Config, parse_endpoint
from mast_otel.collector.metrics import MetricsServer, exposition, registry_for
from mast_otel.collector.pipeline import Pipeline, StopReport
from mast_otel.collector.reanalysis.split_runs import SplitRunMerger
from mast_otel.collector.receivers.grpc_receiver import GrpcReceiver
from mast_otel.collector.receivers.http_receiver import HttpReceiver
from mast_otel.collector.receivers.limits import MemoryBudget
from mast_otel.collector.security import (
    grpc_server_credentials,
    is_loopback,
    load_token,
    server_ssl_context,
)
from mast_otel.collector.spool import Spool
from mast_otel.collector.store import Store, StoreError, migrate, open_store, schema_status
from mast_otel.collector.store.batching import ClickHouseExporter
from mast_otel.collector.workers.receiving import ShardedPipeline

log = logging.getLogger(__name__)


def prepare_store(store: Store, config: Config) -> None:
    """Bring the schema up to date (storage.auto_migrate), or refuse a store that is behind:
    writing to an old schema would fail batch after batch."""
    storage = config.storage
    if storage.auto_migrate:
        migrate(store, storage.cluster, storage.ttl_days)
        return
    status = schema_status(store)
    if not status.current:
        raise StoreError(
            f"the store's schema is behind (migrations {list(status.pending)} pending) and "
            f"storage.auto_migrate is off: run `mast-otel migrate` with the same configuration"
        )


class Service:
    """`store` replaces the embedded store (a ClickHouse server adapter, or a test's wrapper
    that fails on demand)."""

    def __init__(
        self, config: Config, store: Store | None = None, *, verbose: bool = False
    ) -> None:
        config.validate()
        self.config = config
        # Read before anything starts, so a bad token file or certificate stops the start.
        self.auth_token = load_token(config.security.auth)
        self.ssl_context = server_ssl_context(config.security.tls)
        self.grpc_credentials = grpc_server_credentials(config.security.tls)
        storage = config.storage
        self.store: Store = store or open_store(storage)
        prepare_store(self.store, config)
        self.exporter = ClickHouseExporter.of(self.store, storage)
        self.spool: Spool | None = None
        recovered = None
        durability = config.durability
        if durability.mode == "durable":
            self.spool = Spool(
                config.spool_dir(),
                durability.max_spool_bytes,
                durability.segment_bytes,
                fsync=durability.fsync == "group",
                group_commit_s=durability.group_commit_ms / 1000.0,
            )
            recovered = self.spool.open()
        self.sharded: ShardedPipeline | None = None
        if config.pipeline.worker_count() > 1:
            # Worker processes decode, analyse and write; this process routes and spools.
            self.sharded = ShardedPipeline(
                config, self.store, spool=self.spool, recovered=recovered, verbose=verbose
            )
        self.pipeline = Pipeline(config, self.exporter, spool=self.spool, recovered=recovered)
        self.split_runs: SplitRunMerger | None = None
        if config.sharding.merge_split_runs and self.sharded is None:
            self.split_runs = SplitRunMerger(self.store, config, self.exporter)
            self.pipeline.on_output(self.split_runs.note)
            self.pipeline.after_export(self.split_runs.check)
        self.grpc: GrpcReceiver | None = None
        self.http: HttpReceiver | None = None
        self.metrics_registry = registry_for(self.health)
        self.metrics_server: MetricsServer | None = None
        self._stopped = threading.Event()

    def start(self) -> None:
        threshold = self.config.pipeline.gc_gen0_threshold
        if threshold:
            # Process-wide: the collector is the process's one job.
            gc.set_threshold(threshold, *gc.get_threshold()[1:])
        consumer: Any = self.pipeline
        if self.sharded is not None:
            self.sharded.start()
            consumer = self.sharded
        else:
            self.pipeline.start()
        receivers = self.config.receivers
        # One budget for both receivers: it bounds the memory requests hold in all.
        budget = MemoryBudget(receivers.memory_budget_bytes)
        if receivers.grpc.enabled:
            host, port = parse_endpoint(receivers.grpc.endpoint, "receivers.grpc.endpoint")
            self.grpc = GrpcReceiver(
                consumer,
                endpoint=f"{host}:{port}",
                max_message_bytes=receivers.grpc.max_message_bytes,
                max_workers=receivers.grpc.max_workers,
                max_value_depth=receivers.max_value_depth,
                credentials=self.grpc_credentials,
                auth_token=self.auth_token,
                limits=receivers.grpc,
                max_request_objects=receivers.max_request_objects,
                budget=budget,
            )
            self._warn_if_exposed("receivers.grpc.endpoint", host)
            self.grpc.start()
        if receivers.http.enabled:
            host, port = parse_endpoint(receivers.http.endpoint, "receivers.http.endpoint")
            self.http = HttpReceiver(
                consumer,
                endpoint=f"{host}:{port}",
                max_body_bytes=receivers.http.max_body_bytes,
                max_value_depth=receivers.max_value_depth,
                socket_timeout_s=receivers.http.socket_timeout_s,
                health_check=lambda: (200, json.dumps(self.health())),
                ssl_context=self.ssl_context,
                auth_token=self.auth_token,
                health_open=self.config.security.auth.health_open,
                metrics=lambda: exposition(self.metrics_registry),
                limits=receivers.http,
                max_request_objects=receivers.max_request_objects,
                budget=budget,
            )
            self._warn_if_exposed("receivers.http.endpoint", host)
            self.http.start()
        if self.config.telemetry.metrics_endpoint:
            host, port = parse_endpoint(
                self.config.telemetry.metrics_endpoint, "telemetry.metrics_endpoint"
            )
            self.metrics_server = MetricsServer(self.metrics_registry, host, port)

    def _warn_if_exposed(self, key: str, host: str) -> None:
        if is_loopback(host):
            return
        missing = [
            what
            for what, present in (
                ("TLS (security.tls)", self.ssl_context is not None),
                ("a bearer token (security.auth)", bool(self.auth_token)),
            )
            if not present
        ]
        if missing:
            log.warning(
                "%s listens on %s, beyond this machine, without %s: anyone who can reach it "
                "can send telemetry%s",
                key,
                host,
                " or ".join(missing),
                "" if self.ssl_context else " and read what is sent in the clear",
            )

    @property
    def grpc_port(self) -> int:
        return self.grpc.port if self.grpc else 0

    @property
    def http_port(self) -> int:
        return self.http.port if self.http else 0

    def health(self) -> dict[str, Any]:
        if self.sharded is not None:
            return self._sharded_health(self.sharded)
        status = self.pipeline.health()
        exporter = self.exporter.stats
        status["store"] = {
            "buffered_rows": self.exporter.buffered_rows,
            "write_errors": exporter.write_errors,
            "write_retries": exporter.retries,
            "outcomes_without_run": exporter.outcomes_without_run,
            "rows_written": dict(exporter.rows_written),
            "batches_written": exporter.batches_written,
            "write_errors_by_table": dict(exporter.write_errors_by_table),
            "write_seconds": exporter.write_seconds.snapshot(),
            "duplicates_dropped": exporter.duplicates_dropped,
            "rows_unwritable": exporter.rows_unwritable,
            "max_buffered_rows": self.exporter.max_buffered_rows,
        }
        if self.split_runs:
            status["sharding"] = self.split_runs.health()
        if self.grpc:
            status["grpc"] = self.grpc.stats
        if self.http:
            status["http"] = self.http.stats
        receive = (self.grpc.cpu_seconds if self.grpc else 0.0) + (
            self.http.cpu_seconds if self.http else 0.0
        )
        # CPU seconds by stage: what to divide by spans received to see where time goes.
        status["stages"] = {"receive": receive, **self.pipeline.stage_cpu_seconds()}
        return status

    def _sharded_health(self, sharded: ShardedPipeline) -> dict[str, Any]:
        status = sharded.health()
        workers = status.pop("_worker_status")
        rows: dict[str, int] = {}
        for worker in workers.values():
            for table, count in worker.get("rows_written", {}).items():
                rows[table] = rows.get(table, 0) + count
        status["store"] = {
            "buffered_rows": sum(w.get("buffered_rows", 0) for w in workers.values()),
            "rows_written": rows,
            "owner_requests": sharded.owner.requests if sharded.owner else 0,
        }
        if self.grpc:
            status["grpc"] = self.grpc.stats
        if self.http:
            status["http"] = self.http.stats
        receive = (self.grpc.cpu_seconds if self.grpc else 0.0) + (
            self.http.cpu_seconds if self.http else 0.0
        )
        status["stages"] = {"receive": receive, **sharded.stage_cpu_seconds(workers)}
        return status

    def stop(self, grace_s: float = 5.0) -> StopReport:
        """Stop taking requests, then process and store everything already accepted; returns
        what was left undone, if anything (see `StopReport`)."""
        if self._stopped.is_set():
            done = self.sharded if self.sharded is not None else self.pipeline
            return done.stop_report or StopReport()
        self._stopped.set()
        if self.grpc:
            self.grpc.shutdown(grace_s)
        if self.http:
            self.http.shutdown()
        if self.metrics_server:
            self.metrics_server.shutdown()
        report = self.sharded.stop() if self.sharded is not None else self.pipeline.stop()
        if self.spool is not None:
            self.spool.close()
        self.store.close()
        return report

    def abort(self) -> str:
        """Stop now (a second stop signal): workers are killed and nothing more is written;
        returns what stays behind. Everything acknowledged is in the spool (durable mode)
        and the next start stores it."""
        killed = self.sharded.kill() if self.sharded is not None else []
        workers = f"{len(killed)} worker(s) killed; " if killed else ""
        if self.spool is None:
            return (
                f"{workers}what was not yet stored is lost (durability.mode is memory); "
                f"{self.exporter.buffered_rows} row(s) were buffered"
            )
        # Read without the spool's lock: this runs in a signal handler.
        files, size = self.spool.segments, self.spool.bytes
        return (
            f"{workers}the spool keeps {files} file(s), {size} bytes, "
            f"in {self.spool.directory}: every request acknowledged and not yet stored, "
            "stored at the next start"
        )

    def on_output(self, listener: Callable[..., None]) -> None:
        if self.sharded is not None:
            raise ValueError("findings are made in worker processes: read them from the store")
        self.pipeline.on_output(listener)
