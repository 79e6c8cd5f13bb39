"""The whole configuration: a section per key at the top of the YAML file, and the checks
that hold across sections, run before anything starts."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path

from mast_otel.collector.config.durability import DurabilityConfig
from mast_otel.collector.config.errors import ConfigError, parse_endpoint
from mast_otel.collector.config.pipeline import PipelineConfig
from mast_otel.collector.config.receivers import ReceiversConfig
from mast_otel.collector.config.security import SecurityConfig
from mast_otel.collector.config.sharding import ShardingConfig
from mast_otel.collector.config.storage import STORAGE_BACKENDS, StorageConfig
from mast_otel.collector.config.telemetry import TelemetryConfig
from mast_otel.processors.classify import ClassifierConfig
from mast_otel.processors.detectors.config import DetectorsConfig
from mast_otel.processors.judge import JudgeConfig
from mast_otel.processors.limits import LimitsConfig
from mast_otel.processors.redact_rules import RedactionConfig
from mast_otel.processors.scoring import ScoringConfig
from mast_otel.processors.window import WindowConfig


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
            ("pipeline.stop_drain_s", self.pipeline.stop_drain_s),
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
