"""The store: where spans, logs, findings and run signatures are written and read back.

- `backends`: the ClickHouse store (embedded chDB or a server) behind one protocol;
- `migrate`: schema versions and TTLs;
- `exporter`: the interface the pipeline hands rows to, and the in-memory one;
- `batching`: the buffer-and-retry exporter around one writer per table (`writers`), which
  encode rows as Arrow batches (`arrow`, `encoding`), insert them with retries (`retry`) and
  drop rows already stored (`duplicates`);
- `signatures`: new versions of stored run signatures (outcomes, re-analysis);
- `queries`: every question asked of the stored rows;
- `stored_spans`: stored spans read back as records.

The names below are the store's surface for the rest of the collector.
"""

from __future__ import annotations

from mast_otel.collector.store.backends import (
    ChdbStore,
    ClickHouseServerStore,
    Store,
    StoreError,
    open_store,
)
from mast_otel.collector.store.migrate import SchemaStatus, apply_ttls, migrate, schema_status

__all__ = [
    "ChdbStore",
    "ClickHouseServerStore",
    "SchemaStatus",
    "Store",
    "StoreError",
    "apply_ttls",
    "migrate",
    "open_store",
    "schema_status",
]
