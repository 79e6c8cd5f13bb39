"""The collector's configuration: typed sections with defaults, loaded from YAML, checked
before anything starts.

Every limit the collector enforces lives here, so each is explicit, documented and
configurable. `load_config` is the one loader; command-line flags are applied on top of the
file through `apply_overrides`.

A module per section the collector owns (`receivers`, `pipeline`, `storage`, `durability`,
`security`, `sharding`, `telemetry`); the sections of what turns spans into findings (windows,
detectors, classification, scoring, judge, limits, redaction) are defined beside that code in
`processors`. `root` holds the whole `Config` and the checks across sections, `load` the
loader, `errors` the error and the endpoint check. This module is the public face: import
from here.
"""

from mast_otel.collector.config.durability import DurabilityConfig
from mast_otel.collector.config.errors import ConfigError, parse_endpoint
from mast_otel.collector.config.load import (
    EXAMPLE_HEADER,
    apply_overrides,
    example_yaml,
    load_config,
    on_free_loopback_ports,
)
from mast_otel.collector.config.pipeline import PipelineConfig
from mast_otel.collector.config.receivers import (
    GrpcReceiverConfig,
    HttpReceiverConfig,
    ReceiversConfig,
)
from mast_otel.collector.config.root import Config
from mast_otel.collector.config.security import AuthConfig, SecurityConfig, TlsConfig
from mast_otel.collector.config.sharding import ShardingConfig
from mast_otel.collector.config.storage import (
    STORAGE_BACKENDS,
    ClickHouseServerConfig,
    StorageConfig,
    TtlConfig,
)
from mast_otel.collector.config.telemetry import TelemetryConfig

__all__ = [
    "EXAMPLE_HEADER",
    "STORAGE_BACKENDS",
    "AuthConfig",
    "ClickHouseServerConfig",
    "Config",
    "ConfigError",
    "DurabilityConfig",
    "GrpcReceiverConfig",
    "HttpReceiverConfig",
    "PipelineConfig",
    "ReceiversConfig",
    "SecurityConfig",
    "ShardingConfig",
    "StorageConfig",
    "TelemetryConfig",
    "TlsConfig",
    "TtlConfig",
    "apply_overrides",
    "example_yaml",
    "load_config",
    "on_free_loopback_ports",
    "parse_endpoint",
]
