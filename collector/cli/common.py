"""What the commands share: the configuration their flags select (the file, then the flags
over it), the store opened for reading, and times given as flags."""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from mast_otel.collector.cli.output import shown
from mast_otel.collector.config import Config, ConfigError, apply_overrides, load_config
from mast_otel.collector.store import Store, open_store


def config_from_args(args: argparse.Namespace) -> Config:
    config = load_config(getattr(args, "config", None))
    return apply_overrides(
        config,
        {
            "receivers.grpc.endpoint": getattr(args, "grpc_endpoint", None),
            "receivers.http.endpoint": getattr(args, "http_endpoint", None),
            "storage.data_dir": getattr(args, "data_dir", None),
            "telemetry.metrics_endpoint": getattr(args, "metrics_endpoint", None),
            "pipeline.workers": getattr(args, "workers", None),
            **storage_overrides(args),
        },
    )


def storage_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Flags that point the command at a ClickHouse server instead of the embedded store."""
    url = getattr(args, "clickhouse_url", None)
    return {
        "storage.backend": "clickhouse" if url else None,
        "storage.clickhouse.url": url,
        "storage.clickhouse.username": getattr(args, "clickhouse_user", None),
        "storage.clickhouse.password_file": getattr(args, "clickhouse_password_file", None),
        "storage.database": getattr(args, "database", None),
        "storage.cluster": getattr(args, "cluster", None),
    }


def open_for_reading(config: Config) -> Store:
    """The configured store, for reading (the schema must exist; nothing is created)."""
    return open_store(config.storage)


T = TypeVar("T")


def read_store(config: Config, query: Callable[[Store], T], empty: T) -> T:
    """One read against the configured store; a store with no schema yet reads as `empty`."""
    store = open_for_reading(config)
    try:
        return query(store) if has_store(store) else empty
    finally:
        store.close()


def has_store(store: Store) -> bool:
    rows = store.query(
        f"SELECT count() AS n FROM system.tables WHERE database = '{store.database}' "
        f"AND name = 'mast_findings'"
    )
    return bool(rows and int(rows[0]["n"]))


_DURATION = re.compile(r"^(\d{1,12})([smhd])$")
# What the store's times can hold: DateTime (seconds, unsigned 32-bit) is the narrowest column
# a time filter is compared with; a moment outside is refused before any query runs.
_EARLIEST_NS = 0
_LATEST_NS = (2**32 - 1) * 1_000_000_000


def parse_since(value: str | None, flag: str = "--since") -> int | None:
    """`15m`, `2h`, `1d` ago, or an ISO-8601 time, as Unix nanoseconds; a moment before 1970
    or past 2106 (what the store's times hold) is a ConfigError naming the flag."""
    if value is None:
        return None
    expected = f"{flag} expects a duration like 15m, 2h, 1d or an ISO time"
    match = _DURATION.match(value.strip())
    if match:
        seconds = int(match[1]) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[match[2]]
        moment_ns = time.time_ns() - seconds * 1_000_000_000
    else:
        try:
            moment = datetime.fromisoformat(value.strip())
            moment_ns = int(moment.timestamp() * 1e9)
        except (ValueError, OverflowError, OSError) as exc:
            raise ConfigError(f"{expected}, got {shown(value)!r}") from exc
    if not _EARLIEST_NS <= moment_ns <= _LATEST_NS:
        raise ConfigError(
            f"{flag} {shown(value)!r} is outside what the store's times hold (1970 to 2106)"
        )
    return moment_ns
