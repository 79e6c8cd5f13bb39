"""`storage`: where spans, findings and signatures are written (the embedded store or a
ClickHouse server), how writes are batched and retried, and how long rows are kept."""

from __future__ import annotations

from dataclasses import dataclass, field


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
