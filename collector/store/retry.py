"""Inserting one batch: retried on transient errors with the same deduplication token (a batch
that reached the store before the error is not stored twice), and split by partition so no
insert touches more partitions than ClickHouse takes."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from mast_otel.collector.store.backends import Store, StoreError

if TYPE_CHECKING:
    from mast_otel.collector.config import StorageConfig

log = logging.getLogger(__name__)

# ClickHouse refuses an insert touching more than 100 partitions (max_partitions_per_insert_
# block); tables are partitioned by day (or month), so a batch spread over more days than this
# is written in several inserts.
MAX_DAYS_PER_INSERT = 90
DAY_NS = 86_400 * 1_000_000_000


@dataclass(frozen=True)
class RetryPolicy:
    """How a failed batch is retried: `attempts` tries in all, waiting `backoff_s`, doubling
    up to `backoff_max_s`. Only errors the store calls transient are retried."""

    attempts: int = 5
    backoff_s: float = 0.5
    backoff_max_s: float = 10.0

    @classmethod
    def of(cls, storage: StorageConfig) -> RetryPolicy:
        return cls(storage.insert_attempts, storage.retry_backoff_s, storage.retry_backoff_max_s)

    def delays(self) -> list[float]:
        """The waits between attempts."""
        return [min(self.backoff_max_s, self.backoff_s * 2**n) for n in range(self.attempts - 1)]


def insert_with_retry(
    store: Store,
    table: str,
    data: pa.Table,
    token: str,
    policy: RetryPolicy,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[StoreError], None] | None = None,
) -> None:
    """Insert one batch, retrying transient errors with the same deduplication token."""
    delays = policy.delays()
    for attempt in range(policy.attempts):
        try:
            store.insert_arrow(table, data, dedup_token=token)
            return
        except StoreError as exc:
            if not exc.transient or attempt == policy.attempts - 1:
                raise
            if on_retry is not None:
                on_retry(exc)
            log.warning(
                "insert into %s failed (%s); retry %d of %d in %.1fs",
                table,
                exc,
                attempt + 1,
                policy.attempts - 1,
                delays[attempt],
            )
            sleep(delays[attempt])


def by_partition(rows: list[Any], day_of: Callable[[Any], int]) -> list[list[Any]]:
    days: dict[int, list[Any]] = {}
    for row in rows:
        days.setdefault(day_of(row), []).append(row)
    if len(days) <= MAX_DAYS_PER_INSERT:
        return [rows]
    ordered = sorted(days)
    return [
        [row for day in ordered[i : i + MAX_DAYS_PER_INSERT] for row in days[day]]
        for i in range(0, len(ordered), MAX_DAYS_PER_INSERT)
    ]
