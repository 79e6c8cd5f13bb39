"""A store's schema: which migrations it has (`schema_status`), bringing it to the latest
version (`migrate`, see `schemas`) on one node or on a cluster, and the configured TTLs
(`apply_ttls`)."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from mast_otel.collector.store.backends import Store
from mast_otel.schemas import (
    SCHEMA_VERSIONS_TABLE,
    TTL_TABLES,
    Layout,
    bootstrap_statements,
    latest_version,
    migrations,
    record_version_statement,
    storage_table,
    ttl_expression,
    ttl_statement,
)

if TYPE_CHECKING:
    from mast_otel.collector.config import TtlConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SchemaStatus:
    applied: tuple[int, ...]
    latest: int

    @property
    def pending(self) -> tuple[int, ...]:
        return tuple(v for v in range(1, self.latest + 1) if v not in self.applied)

    @property
    def current(self) -> bool:
        return not self.pending


def _layout(store: Store, cluster: str | None) -> Layout:
    return Layout(store.database, getattr(store, "cluster", "") if cluster is None else cluster)


def schema_status(store: Store) -> SchemaStatus:
    """Which migrations the store has recorded (none if it has no version table)."""
    exists = store.query(
        f"SELECT count() AS n FROM system.tables WHERE database = '{store.database}' "
        f"AND name = '{SCHEMA_VERSIONS_TABLE}'"
    )
    applied: tuple[int, ...] = ()
    if exists and int(exists[0]["n"]):
        rows = store.query(
            f"SELECT DISTINCT Version FROM {store.database}.{SCHEMA_VERSIONS_TABLE} "
            f"ORDER BY Version"
        )
        applied = tuple(int(row["Version"]) for row in rows)
    return SchemaStatus(applied, latest_version())


def migrate(
    store: Store,
    cluster: str | None = None,
    ttl_days: TtlConfig | None = None,
    up_to: int | None = None,
) -> list[int]:
    """Apply every migration not yet recorded (up to version `up_to`, default all); returns
    the versions applied now. Each statement is idempotent, so a migration interrupted half
    way is simply applied again. With `ttl_days`, table TTLs are brought in line too."""
    layout = _layout(store, cluster)
    for statement in bootstrap_statements(layout):
        store.execute(statement)
    done = set(schema_status(store).applied)
    applied = []
    for migration in migrations(layout.database, layout.cluster):
        if migration.version in done or (up_to is not None and migration.version > up_to):
            continue
        log.info("applying schema migration %s", migration.name)
        for statement in migration.statements:
            store.execute(statement)
        store.execute(record_version_statement(layout, migration))
        applied.append(migration.version)
    if ttl_days is not None:
        apply_ttls(store, ttl_days, layout.cluster)
    return applied


def apply_ttls(store: Store, ttl_days: TtlConfig, cluster: str | None = None) -> list[str]:
    """Set each table group's TTL where it differs from the configured days; returns the
    tables changed. A group at 0 is left as it is (a TTL set by hand or by the
    OpenTelemetry exporter stays)."""
    layout = _layout(store, cluster)
    changed = []
    for group, days in asdict(ttl_days).items():
        if not days:
            continue
        for table, column in TTL_TABLES[group]:
            target = storage_table(layout, table)
            rows = store.query(
                f"SELECT engine_full FROM system.tables WHERE database = '{layout.database}' "
                f"AND name = '{target}'"
            )
            if not rows:
                continue
            if f"TTL {ttl_expression(column, days)}" in str(rows[0]["engine_full"]):
                continue
            for statement in ttl_statement(layout, table, column, days):
                store.execute(statement)
            changed.append(table)
    return changed
