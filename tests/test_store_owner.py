"""The embedded store shared by worker processes: inserts waiting together are written as one
statement, a combined insert that fails is run again part by part, and a worker's client reaches
the store over the owner's socket. On a real chDB store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from mast_otel.collector.store import ChdbStore, StoreError
from mast_otel.collector.workers.store_owner import StoreClient, StoreOwner, _Request


class Recording:
    """A store that records each insert statement, and refuses those past `max_rows`."""

    def __init__(self, store: ChdbStore, max_rows: int = 1_000_000) -> None:
        self.store = store
        self.max_rows = max_rows
        self.inserts: list[tuple[str, int, str]] = []
        self.database = store.database

    def insert_arrow(self, table: str, data: pa.Table, dedup_token: str = "") -> None:
        if data.num_rows > self.max_rows:
            raise StoreError(f"{data.num_rows} rows is too many", transient=False)
        self.inserts.append((table, data.num_rows, dedup_token))
        self.store.insert_arrow(table, data, dedup_token=dedup_token)

    def query(self, sql: str) -> list[dict[str, Any]]:
        return self.store.query(sql)

    def execute(self, sql: str) -> None:
        self.store.execute(sql)

    def close(self) -> None:
        self.store.close()


@pytest.fixture
def store(tmp_path: Path) -> Any:
    store = ChdbStore(tmp_path / "store")
    store.execute("CREATE DATABASE IF NOT EXISTS otel")
    store.execute("CREATE TABLE otel.t (a Int64) ENGINE = MergeTree ORDER BY a")
    yield store
    store.close()


def inserts(count: int) -> list[_Request]:
    return [
        _Request(("insert", "t", pa.table({"a": pa.array([i, 100 + i], pa.int64())}), f"t{i}"))
        for i in range(count)
    ]


def stored(store: ChdbStore) -> list[int]:
    return [int(row["a"]) for row in store.query("SELECT a FROM otel.t ORDER BY a")]


def test_inserts_waiting_together_are_one_statement(store: ChdbStore) -> None:
    recording = Recording(store)
    owner = StoreOwner(recording)  # type: ignore[arg-type]
    try:
        requests = inserts(3)
        owner._run_batch(requests)
    finally:
        owner.close()
    assert [(table, rows) for table, rows, _ in recording.inserts] == [("t", 6)]
    assert recording.inserts[0][2].startswith("combined-")
    assert [r.reply for r in requests] == [("ok", None)] * 3
    assert owner.stats.insert_statements == 1 and owner.stats.inserts == 3
    assert stored(store) == [0, 1, 2, 100, 101, 102]


def test_a_combined_insert_that_fails_is_run_part_by_part(store: ChdbStore) -> None:
    recording = Recording(store, max_rows=2)
    owner = StoreOwner(recording)  # type: ignore[arg-type]
    try:
        requests = inserts(3)
        owner._run_batch(requests)
    finally:
        owner.close()
    assert [(rows, token) for _, rows, token in recording.inserts] == [
        (2, "t0"),
        (2, "t1"),
        (2, "t2"),
    ]
    assert [r.reply for r in requests] == [("ok", None)] * 3
    assert stored(store) == [0, 1, 2, 100, 101, 102]


def test_a_worker_client_writes_and_reads_through_the_owner(store: ChdbStore) -> None:
    owner = StoreOwner(store)
    client = StoreClient(owner.address, owner.authkey, "otel")
    try:
        client.insert_arrow("t", pa.table({"a": pa.array([7, 8], pa.int64())}), "x")
        assert int(client.query("SELECT sum(a) AS s FROM otel.t")[0]["s"]) == 15
        with pytest.raises(StoreError):
            client.insert_arrow("missing", pa.table({"a": pa.array([1], pa.int64())}), "y")
    finally:
        client.close()
        owner.close()
