"""The collector's configuration: typed sections with defaults, loaded from YAML, checked
before anything starts.

Every limit the collector enforces lives here, so each is explicit, documented and
configurable. `load_config` is the one loader; command-line flags are applied on top of the
file through `apply_overrides`.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from processors.classify import ClassifierConfig
from processors.detectors.config import DetectorsConfig
from processors.judge import JudgeConfig
from processors.limits import LimitsConfig
from processors.redact import RedactionConfig
from processors.scoring import ScoringConfig
from processors.window import WindowConfig


class ConfigError(ValueError):
    """The configuration is wrong; the message says which key and what to do."""


_ENDPOINT = re.compile(r"^(?P<host>\[[0-9a-fA-F:]+\]|[^:\s]*):(?P<port>\d{1,5})$")


def parse_endpoint(value: str, key: str) -> tuple[str, int]:
    """Split "HOST:PORT" (or ":PORT", which means all interfaces) and check the port."""
    match = _ENDPOINT.match(value.strip())
    if not match:
        raise ConfigError(f"{key}: expected HOST:PORT (for example 127.0.0.1:4317), got {value!r}")
    port = int(match["port"])
    if port > 65535:
        raise ConfigError(f"{key}: port {port} is out of range (0-65535)")
    host = match["host"].strip("[]") or "0.0.0.0"
    return host, port


@dataclass
class GrpcReceiverConfig:
    """OTLP over gRPC (`opentelemetry.proto.collector.{trace,logs}.v1` services)."""

    # Serve OTLP/gRPC at all.
    enabled: bool = True
    # Loopback by default: exposing the receiver to the network is a deliberate choice.
    endpoint: str = "127.0.0.1:4317"
    # Largest request accepted; a larger one is refused with RESOURCE_EXHAUSTED.
    max_message_bytes: int = 16 * 1024 * 1024
    # Requests decoded at once (worker threads). Calls still receiving their request wait
    # on the server's event loop, not on a worker. As many threads again serve requests too
    # large for their size to bound their cost (their objects are counted first), so those
    # cannot hold up the others.
    max_workers: int = 4
    # Export calls in progress at once, receiving or decoding, from all senders together.
    # Past it a call is refused with UNAVAILABLE and a retry delay (counted as
    # rpcs_over_limit).
    max_concurrent_rpcs: int = 64
    # Export calls in progress at once from one IP address; past it a call is refused with
    # UNAVAILABLE and a retry delay (counted as rpcs_over_peer_limit). Below
    # max_concurrent_rpcs, so one peer holding calls open cannot take every slot.
    max_concurrent_rpcs_per_peer: int = 16
    # Open connections from all senders together; past it grpcio closes a new connection as
    # soon as it is accepted (inside grpcio, so not counted by the receiver).
    max_connections: int = 1024
    # Calls open at once on one HTTP/2 connection (SETTINGS_MAX_CONCURRENT_STREAMS). Enforced
    # by grpcio's HTTP/2 layer (a stream past it is refused there), which the receiver cannot
    # count; calls past max_concurrent_rpcs are counted.
    max_concurrent_streams: int = 16
    # A call must have received its whole request within this many seconds of starting;
    # past it the call ends with DEADLINE_EXCEEDED (counted as receive_timeouts).
    receive_timeout_s: float = 10.0
    # Largest request metadata (headers) accepted on a call; enforced by grpcio before the
    # call reaches the receiver (so not counted by it).
    max_metadata_bytes: int = 16 * 1024
    # The server pings a connection quiet for this long, and closes it if the ping is not
    # answered within keepalive_timeout_s.
    keepalive_time_s: float = 60.0
    # How long a keepalive ping may go unanswered.
    keepalive_timeout_s: float = 20.0
    # A connection without calls for this long is closed.
    max_connection_idle_s: float = 300.0
    # A connection older than this is asked to close (senders reconnect), so none is held
    # forever; calls in progress get max_connection_age_grace_s to finish.
    max_connection_age_s: float = 3600.0
    # Time calls in progress get when their connection reaches max_connection_age_s.
    max_connection_age_grace_s: float = 30.0


@dataclass
class HttpReceiverConfig:
    """OTLP over HTTP (`/v1/traces`, `/v1/logs`, protobuf or JSON) and `GET /healthz`."""

    # Serve OTLP/HTTP and the health endpoint at all.
    enabled: bool = True
    # Loopback by default; health checks (container, Kubernetes probes) use this port.
    endpoint: str = "127.0.0.1:4318"
    # Checked before reading and again while decompressing (a gzip bomb stops here).
    max_body_bytes: int = 16 * 1024 * 1024
    # A kept-alive connection idle for this long between requests is closed.
    socket_timeout_s: float = 30.0
    # Open connections from all senders together; past it a new connection is closed as soon
    # as it is accepted (counted as connections_over_limit).
    max_connections: int = 1024
    # Open connections from one IP address; past it a new one is closed as soon as it is
    # accepted (counted as connections_over_peer_limit).
    max_connections_per_peer: int = 64
    # A request's line and headers must arrive within this many seconds of its first byte
    # (a total, not per read: a header trickled a line at a time is cut here; counted as
    # header_timeouts). Also bounds the TLS handshake.
    header_timeout_s: float = 10.0
    # A request's body must arrive within this many seconds of its headers (a total;
    # counted as body_timeouts; answered 408).
    body_timeout_s: float = 30.0
    # Largest request line plus headers (431 past it; counted as headers_too_large).
    max_header_bytes: int = 64 * 1024
    # Export requests in progress at once (reading their body, waiting for a worker or
    # decoding); past it a request is answered 503 with Retry-After before its body is read
    # (counted as requests_over_limit). Larger than max_connections_per_peer, so one peer
    # sending slow bodies cannot take every slot.
    max_concurrent_requests: int = 256
    # Requests decoded at once (worker threads); the rest wait, their memory held in
    # receivers.memory_budget_bytes. As many threads again inflate compressed bodies and count
    # the objects of bodies too large for their size to bound their cost, so those cannot
    # hold up the others.
    max_workers: int = 4
    # gzip members in one request body (real senders send one); past it 413 (counted as
    # gzip_members_over_limit).
    max_gzip_members: int = 16


@dataclass
class ReceiversConfig:
    """Where telemetry comes in."""

    grpc: GrpcReceiverConfig = field(default_factory=GrpcReceiverConfig)
    http: HttpReceiverConfig = field(default_factory=HttpReceiverConfig)
    # Attribute values nested deeper than this (arrays in maps in arrays ...) are replaced by
    # "[truncated: depth]"; at most 256.
    max_value_depth: int = 32
    # Memory that requests in progress on both receivers may hold at once: each request's
    # body and what decoding it takes (counted from the body before decoding: about 384
    # bytes per protobuf message, 3 per body byte). A request that does not fit now is
    # refused with OTLP's retryable status (503 / UNAVAILABLE, counted as
    # memory_budget_full); one that could never fit, with 413 / INVALID_ARGUMENT.
    memory_budget_bytes: int = 1024 * 1024 * 1024
    # Objects (messages and repeated values) one request may decode into, counted from its
    # bytes before decoding: 16 MB of empty spans would be 8 million. Past it the request is
    # refused with 413 / INVALID_ARGUMENT (not retryable; counted as too_many_objects).
    max_request_objects: int = 1_000_000


@dataclass
class PipelineConfig:
    """The queue between receivers and the one worker that normalizes, windows and detects."""

    # Spans and log records decoded but not yet processed. Past this, receivers refuse with
    # OTLP's retryable status so senders back off instead of losing data.
    # Each queued span costs about 7 KB of memory once decoded.
    queue_max_items: int = 50_000
    # Request bytes (as received, decompressed) waiting in the queue: bounds memory when
    # spans are large, which the item count alone does not.
    queue_max_bytes: int = 64 * 1024 * 1024
    # How long a refused sender is told to wait before retrying.
    retry_after_s: float = 1.0
    # How often the pipeline releases steps past their grace period and closes idle runs.
    tick_interval_s: float = 0.2
    # Longest text kept per step field (tool arguments/results, model output) for detection.
    max_step_text: int = 16 * 1024
    # Allocations between two young-generation garbage collections in `serve` (Python's
    # default is 700; 0 keeps it). Each span allocates hundreds of short-lived objects: at
    # 700, collections took 11% of the pipeline's CPU on the benchmark fleet, at 50,000 2%.
    gc_gen0_threshold: int = 50_000
    # Worker processes that decode, window and detect (runs sharded by trace id, each run in
    # one worker); the receiving process routes, spools and stores. 1 keeps everything in one
    # process; 0 means one per core.
    workers: int = 1
    # Requests handed to a worker and not yet taken by it: past this, for any worker,
    # receivers refuse with OTLP's retryable status.
    worker_queue_max_requests: int = 16
    # The same bound in request bytes (held by the receiving process until the worker takes
    # them).
    worker_queue_max_bytes: int = 32 * 1024 * 1024
    # A worker that dies more often than this within `worker_restart_window_s` is not started
    # again (its runs' requests are refused, retryably, until the collector is restarted).
    worker_max_restarts: int = 5
    # The window, in seconds, over which a worker's deaths are counted.
    worker_restart_window_s: float = 60.0
    # How long a stop waits for the workers to drain before terminating them.
    worker_stop_timeout_s: float = 60.0

    def worker_count(self) -> int:
        """`workers`, with 0 read as the machine's cores."""
        return self.workers or (os.cpu_count() or 1)


@dataclass
class TtlConfig:
    """Days each group of tables keeps its rows (0: mast-otel sets no TTL and leaves any TTL
    the table already has alone). Applied by `migrate` when it differs from the table's."""

    spans: int = 0  # otel_traces and its trace-id index
    logs: int = 0  # otel_logs
    findings: int = 0  # mast_findings
    signatures: int = 0  # mast_signatures
    rollups: int = 0  # the per-minute materialized views


@dataclass
class ClickHouseServerConfig:
    """A ClickHouse server (storage.backend: clickhouse), reached over HTTP(S) with
    clickhouse-connect. The password is never part of the configuration: it is read from
    `password_file`, else from the MAST_CLICKHOUSE_PASSWORD environment variable."""

    # The server's HTTP(S) interface: http://HOST:8123 or https://HOST:8443.
    url: str = "http://127.0.0.1:8123"
    # The ClickHouse user (needs CREATE/ALTER for migrations, INSERT and SELECT on the database).
    username: str = "default"
    # A file whose first line is the password (a mounted secret); "" reads the environment.
    password_file: str = ""
    # For https:// URLs: check the server's certificate (against `ca_cert` when set).
    verify_tls: bool = True
    # A CA bundle (PEM) for the server's certificate; "" uses the system's.
    ca_cert: str = ""
    # Seconds to establish a connection.
    connect_timeout_s: float = 10.0
    # Seconds to wait for a statement's answer (migrations and backfill reads can be long).
    send_receive_timeout_s: float = 300.0


STORAGE_BACKENDS = ("chdb", "clickhouse")


@dataclass
class StorageConfig:
    """Where spans, findings and signatures are written."""

    # "chdb": ClickHouse embedded in the process, a directory on disk, nothing to start.
    # "clickhouse": a ClickHouse server or cluster (see `clickhouse` below).
    backend: str = "chdb"
    # The embedded store's directory (one process at a time may open it).
    data_dir: str = "./mast-data"
    # The OpenTelemetry Collector's ClickHouse exporter writes to "otel" by default; sharing the
    # name lets the two share a store.
    database: str = "otel"
    # Buffered rows (all tables together) that trigger a write before the interval is up.
    batch_max_rows: int = 20_000
    # Buffered rows are written at least this often: one columnar insert per table.
    flush_interval_s: float = 1.0
    # When nothing is queued and a closed run's signature waits, write this soon instead (0:
    # off): signatures are queryable about this long after the grace period, at the cost of
    # more, smaller inserts only while the collector has time to spare.
    eager_flush_interval_s: float = 0.25
    # A batch that fails with a transient error (connection, timeout, too many parts, ...) is
    # tried this many times in all. Retries carry the batch's deduplication token, so a batch
    # the store did take before the error is not stored twice.
    insert_attempts: int = 5
    # Wait before the first retry; each later wait is twice as long.
    retry_backoff_s: float = 0.5
    # Longest wait between two tries.
    retry_backoff_max_s: float = 10.0
    # Apply pending schema migrations at start; when off, start refuses an out-of-date store
    # and `mast-otel migrate` applies them.
    auto_migrate: bool = True
    # "" for a single node; a cluster name (as in remote_servers, or '{cluster}') makes the
    # schema ON CLUSTER, with Replicated*MergeTree local tables and Distributed tables over them.
    cluster: str = ""
    ttl_days: TtlConfig = field(default_factory=TtlConfig)
    clickhouse: ClickHouseServerConfig = field(default_factory=ClickHouseServerConfig)
    # Traces analysed (and held in memory) at a time by `mast-otel backfill`.
    backfill_batch_traces: int = 500
    # Rows waiting for the store. While the store fails writes they accumulate up to this
    # bound; past it the pipeline stops taking batches, its queue fills, and receivers refuse
    # with OTLP's retryable status.
    max_buffered_rows: int = 50_000
    # A failed write is retried after this delay, doubled on each failure up to the maximum.
    retry_initial_s: float = 0.5
    # The longest wait between two attempts while the store keeps failing.
    retry_max_s: float = 30.0


@dataclass
class DurabilityConfig:
    """When a request is acknowledged, and what survives a killed process (the spool)."""

    # durable: a request is acknowledged only once it is in the write-ahead spool on disk, so
    # a killed process loses nothing it acknowledged; memory: acknowledged once queued in
    # memory (a killed process loses what it had not stored yet).
    mode: str = "durable"
    # Where the spool lives; empty means "<storage.data_dir>/spool".
    spool_dir: str = ""
    # Spool bytes on disk. Past this, receivers refuse with OTLP's retryable status.
    max_spool_bytes: int = 1024 * 1024 * 1024
    # A spool file is closed and a new one started past this size; a closed file is deleted
    # once everything it holds is stored and every run it touched is closed and stored.
    segment_bytes: int = 64 * 1024 * 1024
    # group: each request is acknowledged after the fsync that covers it (survives a power
    # cut); requests written while an fsync runs share the next one, so fsyncs per request
    # fall as load rises. none: acknowledged once written to the operating system (survives
    # a killed process, not a power cut).
    fsync: str = "group"
    # Extra wait before each fsync to gather more requests into it (0: none; the natural
    # grouping above already batches under load).
    group_commit_ms: float = 0.0
    # Past this share of max_spool_bytes, the runs holding the oldest spool file open are
    # closed and analysed (counted as runs_closed.spool_full), so long runs cannot pin the
    # spool until it refuses everything.
    run_eviction_ratio: float = 0.75
    # At a clean stop: false closes and analyses every open run (close reason "shutdown");
    # true leaves runs still in progress in the spool and the next start resumes them, so a
    # restart does not cut them in two.
    resume_open_runs: bool = False


@dataclass
class AuthConfig:
    """Bearer-token authentication of every request on both receivers."""

    # A file holding the bearer token senders must present (Authorization: Bearer TOKEN).
    # Without it the token comes from the MAST_AUTH_TOKEN environment variable; with neither,
    # requests are not authenticated (fine on loopback, not on a network).
    token_file: str = ""
    # GET /healthz without a token (for probes that cannot send one); off: it needs one too.
    health_open: bool = False


@dataclass
class TlsConfig:
    """TLS (and mutual TLS) on both receivers."""

    # PEM files. Both set: the receivers speak TLS only.
    cert_file: str = ""
    # The private key of cert_file (PEM).
    key_file: str = ""
    # Set: mutual TLS, clients must present a certificate signed by this CA.
    client_ca_file: str = ""


@dataclass
class SecurityConfig:
    """Who may send, and over what: off by default, which suits loopback endpoints."""

    auth: AuthConfig = field(default_factory=AuthConfig)
    tls: TlsConfig = field(default_factory=TlsConfig)


@dataclass
class ShardingConfig:
    """One replica among several behind a load balancer that routes by trace id
    (deploy/scale-out.md)."""

    # When a run closes, look in the shared store for spans of its trace that other replicas
    # received (the balancer moved the trace id when replicas came or went); if there are
    # any, analyse the whole trace from the store and write its findings and signature over
    # the partial ones. Needs a store every replica writes to (a ClickHouse server or cluster).
    merge_split_runs: bool = False
    # Spans of a closed run's trace are looked for this long before and after the ones this
    # replica saw, which keeps the look-up to a few daily partitions.
    trace_time_window_s: float = 86_400.0
    # Closed runs waiting for that look (one look per storage flush); past this the oldest
    # are not looked at, counted in /healthz as sharding.checks_dropped.
    max_pending_checks: int = 100_000


@dataclass
class TelemetryConfig:
    """The collector's own metrics (Prometheus exposition of what /healthz reports)."""

    # The collector's own metrics are always on GET /metrics of the OTLP/HTTP receiver. Set
    # HOST:PORT here to serve them on a listener of their own too ("" = no extra listener).
    metrics_endpoint: str = ""


@dataclass
class Config:
    """The whole configuration; each section is a key at the top of the YAML file."""

    receivers: ReceiversConfig = field(default_factory=ReceiversConfig)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    windows: WindowConfig = field(default_factory=WindowConfig)
    detectors: DetectorsConfig = field(default_factory=DetectorsConfig)
    classification: ClassifierConfig = field(default_factory=ClassifierConfig)
    scoring: ScoringConfig = field(default_factory=ScoringConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    storage: StorageConfig = field(default_factory=StorageConfig)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    sharding: ShardingConfig = field(default_factory=ShardingConfig)
    durability: DurabilityConfig = field(default_factory=DurabilityConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    redaction: RedactionConfig = field(default_factory=RedactionConfig)
    security: SecurityConfig = field(default_factory=SecurityConfig)

    def validate(self) -> None:
        """Fail at start, with the key to fix, rather than misbehave later."""
        for key, endpoint in (
            ("receivers.grpc.endpoint", self.receivers.grpc.endpoint),
            ("receivers.http.endpoint", self.receivers.http.endpoint),
        ):
            parse_endpoint(endpoint, key)
        if self.telemetry.metrics_endpoint:
            parse_endpoint(self.telemetry.metrics_endpoint, "telemetry.metrics_endpoint")
        positive = {
            "receivers.grpc.max_message_bytes": self.receivers.grpc.max_message_bytes,
            "receivers.grpc.max_workers": self.receivers.grpc.max_workers,
            "receivers.http.max_body_bytes": self.receivers.http.max_body_bytes,
            "receivers.http.socket_timeout_s": self.receivers.http.socket_timeout_s,
            "receivers.grpc.max_concurrent_rpcs": self.receivers.grpc.max_concurrent_rpcs,
            "receivers.grpc.max_concurrent_rpcs_per_peer": (
                self.receivers.grpc.max_concurrent_rpcs_per_peer
            ),
            "receivers.grpc.max_concurrent_streams": self.receivers.grpc.max_concurrent_streams,
            "receivers.grpc.max_connections": self.receivers.grpc.max_connections,
            "receivers.grpc.receive_timeout_s": self.receivers.grpc.receive_timeout_s,
            "receivers.grpc.max_metadata_bytes": self.receivers.grpc.max_metadata_bytes,
            "receivers.grpc.keepalive_time_s": self.receivers.grpc.keepalive_time_s,
            "receivers.grpc.keepalive_timeout_s": self.receivers.grpc.keepalive_timeout_s,
            "receivers.grpc.max_connection_idle_s": self.receivers.grpc.max_connection_idle_s,
            "receivers.grpc.max_connection_age_s": self.receivers.grpc.max_connection_age_s,
            "receivers.grpc.max_connection_age_grace_s": (
                self.receivers.grpc.max_connection_age_grace_s
            ),
            "receivers.http.max_connections": self.receivers.http.max_connections,
            "receivers.http.max_connections_per_peer": self.receivers.http.max_connections_per_peer,
            "receivers.http.header_timeout_s": self.receivers.http.header_timeout_s,
            "receivers.http.body_timeout_s": self.receivers.http.body_timeout_s,
            "receivers.http.max_header_bytes": self.receivers.http.max_header_bytes,
            "receivers.http.max_concurrent_requests": self.receivers.http.max_concurrent_requests,
            "receivers.http.max_gzip_members": self.receivers.http.max_gzip_members,
            "receivers.http.max_workers": self.receivers.http.max_workers,
            "receivers.memory_budget_bytes": self.receivers.memory_budget_bytes,
            "receivers.max_request_objects": self.receivers.max_request_objects,
            "pipeline.queue_max_items": self.pipeline.queue_max_items,
            "pipeline.queue_max_bytes": self.pipeline.queue_max_bytes,
            "pipeline.tick_interval_s": self.pipeline.tick_interval_s,
            "pipeline.max_step_text": self.pipeline.max_step_text,
            "storage.batch_max_rows": self.storage.batch_max_rows,
            "storage.flush_interval_s": self.storage.flush_interval_s,
            "sharding.trace_time_window_s": self.sharding.trace_time_window_s,
            "sharding.max_pending_checks": self.sharding.max_pending_checks,
            "storage.max_buffered_rows": self.storage.max_buffered_rows,
            "storage.retry_initial_s": self.storage.retry_initial_s,
            "storage.retry_max_s": self.storage.retry_max_s,
            "durability.max_spool_bytes": self.durability.max_spool_bytes,
            "durability.segment_bytes": self.durability.segment_bytes,
        }
        for key, value in positive.items():
            if value <= 0:
                raise ConfigError(f"{key} must be greater than 0, got {value}")
        if (
            self.receivers.grpc.max_concurrent_rpcs_per_peer
            >= self.receivers.grpc.max_concurrent_rpcs
        ):
            raise ConfigError(
                "receivers.grpc.max_concurrent_rpcs_per_peer must be below "
                "receivers.grpc.max_concurrent_rpcs (one peer must not take every slot)"
            )
        if (
            self.receivers.http.max_concurrent_requests
            <= self.receivers.http.max_connections_per_peer
        ):
            raise ConfigError(
                "receivers.http.max_concurrent_requests must exceed "
                "receivers.http.max_connections_per_peer (one peer must not take every slot)"
            )
        if self.receivers.http.max_connections_per_peer > self.receivers.http.max_connections:
            raise ConfigError(
                "receivers.http.max_connections_per_peer must not exceed "
                "receivers.http.max_connections"
            )
        if self.receivers.memory_budget_bytes < max(
            self.receivers.http.max_body_bytes, self.receivers.grpc.max_message_bytes
        ):
            raise ConfigError(
                "receivers.memory_budget_bytes must hold at least one request of the largest "
                "size accepted (receivers.http.max_body_bytes, receivers.grpc.max_message_bytes)"
            )
        if not 0 <= self.pipeline.workers <= 1024:
            raise ConfigError(
                f"pipeline.workers must be from 0 (one per core) to 1024, got "
                f"{self.pipeline.workers}"
            )
        for key, value in (
            ("pipeline.worker_queue_max_requests", self.pipeline.worker_queue_max_requests),
            ("pipeline.worker_queue_max_bytes", self.pipeline.worker_queue_max_bytes),
            ("pipeline.worker_restart_window_s", self.pipeline.worker_restart_window_s),
            ("pipeline.worker_stop_timeout_s", self.pipeline.worker_stop_timeout_s),
        ):
            if value <= 0:
                raise ConfigError(f"{key} must be positive, got {value}")
        if self.pipeline.worker_max_restarts < 0:
            raise ConfigError(
                f"pipeline.worker_max_restarts must be 0 or more, got "
                f"{self.pipeline.worker_max_restarts}"
            )
        if self.pipeline.gc_gen0_threshold < 0:
            raise ConfigError(
                "pipeline.gc_gen0_threshold must be 0 (Python's default) or more, "
                f"got {self.pipeline.gc_gen0_threshold}"
            )
        if self.storage.eager_flush_interval_s < 0:
            raise ConfigError(
                "storage.eager_flush_interval_s must be 0 (off) or more, "
                f"got {self.storage.eager_flush_interval_s}"
            )
        if not 1 <= self.receivers.max_value_depth <= 256:
            raise ConfigError(
                f"receivers.max_value_depth must be between 1 and 256, "
                f"got {self.receivers.max_value_depth}"
            )
        self._validate_storage()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.storage.database):
            raise ConfigError(
                f"storage.database: {self.storage.database!r} is not a plain identifier"
            )
        self._validate_durability()
        self._validate_security()
        try:
            self.limits.validate()
            self.redaction.validate()
            self.windows.validate()
            self.detectors.validate()
            self.classification.validate()
            self.scoring.validate()
            self.judge.validate()
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc

    def _validate_storage(self) -> None:
        storage = self.storage
        if storage.backend not in STORAGE_BACKENDS:
            raise ConfigError(
                f"storage.backend: {storage.backend!r} is not supported; use one of "
                f"{', '.join(STORAGE_BACKENDS)}"
            )
        positive = {
            "storage.insert_attempts": storage.insert_attempts,
            "storage.retry_backoff_max_s": storage.retry_backoff_max_s,
            "storage.backfill_batch_traces": storage.backfill_batch_traces,
            "storage.clickhouse.connect_timeout_s": storage.clickhouse.connect_timeout_s,
            "storage.clickhouse.send_receive_timeout_s": storage.clickhouse.send_receive_timeout_s,
        }
        for key, value in positive.items():
            if value <= 0:
                raise ConfigError(f"{key} must be greater than 0, got {value}")
        if storage.retry_backoff_s < 0:
            raise ConfigError(
                f"storage.retry_backoff_s must not be negative, got {storage.retry_backoff_s}"
            )
        for group, days in dataclasses.asdict(storage.ttl_days).items():
            if days < 0:
                raise ConfigError(
                    f"storage.ttl_days.{group} must be 0 (no TTL) or more, got {days}"
                )
        if storage.cluster and not re.fullmatch(r"[A-Za-z0-9_.{}-]+", storage.cluster):
            raise ConfigError(
                f"storage.cluster: {storage.cluster!r} is not a cluster name (letters, digits, "
                f"_ . - or a macro such as {{cluster}})"
            )
        if storage.cluster and storage.backend == "chdb":
            raise ConfigError(
                "storage.cluster needs storage.backend: clickhouse (the embedded store is one "
                'node); set storage.cluster to "" or point storage.clickhouse.url at the cluster'
            )
        if storage.backend == "clickhouse":
            url = storage.clickhouse.url
            if not re.fullmatch(r"https?://[^/\s:]+(:\d{1,5})?/?", url):
                raise ConfigError(
                    f"storage.clickhouse.url: expected http(s)://HOST[:PORT], got {url!r}"
                )

    def _validate_durability(self) -> None:
        durability = self.durability
        if durability.mode not in ("durable", "memory"):
            raise ConfigError(
                f"durability.mode: {durability.mode!r} is not a mode; use 'durable' or 'memory'"
            )
        if durability.fsync not in ("group", "none"):
            raise ConfigError(
                f"durability.fsync: {durability.fsync!r} is not a policy; use 'group' or 'none'"
            )
        if durability.group_commit_ms < 0:
            raise ConfigError(
                f"durability.group_commit_ms must not be negative, got {durability.group_commit_ms}"
            )
        if durability.segment_bytes > durability.max_spool_bytes:
            raise ConfigError(
                "durability.segment_bytes must not exceed durability.max_spool_bytes "
                f"({durability.segment_bytes} > {durability.max_spool_bytes})"
            )
        if not 0 < durability.run_eviction_ratio <= 1:
            raise ConfigError(
                "durability.run_eviction_ratio must be in (0, 1], "
                f"got {durability.run_eviction_ratio}"
            )
        if self.storage.retry_max_s < self.storage.retry_initial_s:
            raise ConfigError("storage.retry_max_s must not be below storage.retry_initial_s")

    def _validate_security(self) -> None:
        tls = self.security.tls
        if bool(tls.cert_file) != bool(tls.key_file):
            raise ConfigError(
                "security.tls: set both cert_file and key_file (or neither) to serve TLS"
            )
        if tls.client_ca_file and not tls.cert_file:
            raise ConfigError(
                "security.tls.client_ca_file needs cert_file and key_file: mutual TLS is TLS"
            )
        for key, path in (
            ("security.tls.cert_file", tls.cert_file),
            ("security.tls.key_file", tls.key_file),
            ("security.tls.client_ca_file", tls.client_ca_file),
            ("security.auth.token_file", self.security.auth.token_file),
        ):
            if path and not Path(path).is_file():
                raise ConfigError(f"{key}: {path} is not a readable file")

    def spool_dir(self) -> Path:
        """Where the write-ahead spool lives (under the data directory unless set)."""
        if self.durability.spool_dir:
            return Path(self.durability.spool_dir)
        return Path(self.storage.data_dir) / "spool"


def _merge(instance: Any, values: dict[str, Any], path: str) -> Any:
    """Build a copy of dataclass `instance` with `values` applied, rejecting unknown keys."""
    if not isinstance(values, dict):
        raise ConfigError(f"{path or 'config'}: expected a mapping, got {type(values).__name__}")
    fields = {f.name: f for f in dataclasses.fields(instance)}
    changes: dict[str, Any] = {}
    for key, value in values.items():
        where = f"{path}.{key}" if path else str(key)
        if key not in fields:
            known = ", ".join(sorted(fields))
            raise ConfigError(f"{where}: unknown option (known here: {known})")
        current = getattr(instance, key)
        if dataclasses.is_dataclass(current):
            changes[key] = _merge(current, value, where)
        else:
            changes[key] = _coerce(current, value, where)
    return dataclasses.replace(instance, **changes)


def _coerce(current: Any, value: Any, where: str) -> Any:
    if isinstance(current, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if isinstance(current, int) and not isinstance(current, bool):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected a whole number, got {value!r}")
        return value
    if isinstance(current, float):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if isinstance(current, str):
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    if isinstance(current, dict):
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, list) and all(isinstance(x, str) for x in v)
            for k, v in value.items()
        ):
            raise ConfigError(f"{where}: expected a mapping of names to lists of strings")
        return value
    if isinstance(current, list | tuple):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where}: expected a list of strings, got {value!r}")
        return type(current)(value)
    return value


def load_config(path: str | Path | None = None) -> Config:
    """The defaults, with the YAML file at `path` applied on top (if given), validated."""
    config = Config()
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from exc
        config = _merge(config, data, "")
    config.validate()
    return config


def apply_overrides(config: Config, overrides: dict[str, Any]) -> Config:
    """Apply dotted-key overrides (from command-line flags) and validate again."""
    nested: dict[str, Any] = {}
    for dotted, value in overrides.items():
        if value is None:
            continue
        cursor = nested
        *parents, leaf = dotted.split(".")
        for part in parents:
            cursor = cursor.setdefault(part, {})
        cursor[leaf] = value
    updated: Config = _merge(config, nested, "")
    updated.validate()
    return updated


EXAMPLE_HEADER = (
    "# mast-otel configuration with every option at its default.\n"
    "# Copy it, keep what you change; `mast-otel serve --config FILE` reads it, flags override "
    "it.\n"
)


def example_yaml() -> str:
    """Every option at its default, as YAML (deploy/config.example.yaml is this)."""
    return EXAMPLE_HEADER + yaml.safe_dump(dataclasses.asdict(Config()), sort_keys=False, width=200)


def on_free_loopback_ports(config: Config, data_dir: str | Path | None = None) -> Config:
    """The same config with both receivers on free loopback ports (and, if given, another
    store directory): for the demo, which must not collide with a running `serve`, and tests."""
    receivers = dataclasses.replace(
        config.receivers,
        grpc=dataclasses.replace(config.receivers.grpc, endpoint="127.0.0.1:0"),
        http=dataclasses.replace(config.receivers.http, endpoint="127.0.0.1:0"),
    )
    config = dataclasses.replace(config, receivers=receivers)
    if data_dir is not None:
        storage = dataclasses.replace(config.storage, data_dir=str(data_dir))
        config = dataclasses.replace(config, storage=storage)
    return config
