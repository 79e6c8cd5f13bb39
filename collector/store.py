"""The ClickHouse store the collector writes to and the command line reads from.

`ChdbStore` is the embedded default: chDB, ClickHouse in-process, keeping its data under a
directory, with nothing to start. Every statement goes through `execute`/`query`/`insert_arrow`,
so the same SQL serves a ClickHouse server through a thin adapter with the same three calls.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

from schemas import migrations


class StoreError(RuntimeError):
    """A statement failed in the store; the message carries ClickHouse's own words."""


class Store(Protocol):
    database: str

    def execute(self, sql: str) -> None: ...

    def query(self, sql: str) -> list[dict[str, Any]]: ...

    def insert_arrow(self, table: str, data: pa.Table) -> None: ...

    def close(self) -> None: ...


class ChdbStore:
    """chDB under `data_dir`. One process at a time may open a directory."""

    def __init__(self, data_dir: str | Path, database: str = "otel") -> None:
        from chdb import session

        self.database = database
        self.path = Path(data_dir)
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._session = session.Session(str(self.path))
        except Exception as exc:  # chDB raises plain exceptions for a locked or bad directory
            raise StoreError(
                f"cannot open the embedded store at {self.path}: {exc}. If a collector is "
                f"running on this directory, stop it first or point --data-dir elsewhere."
            ) from exc

    def execute(self, sql: str) -> None:
        self._run(sql, "CSV")

    def query(self, sql: str) -> list[dict[str, Any]]:
        text = self._run(sql, "JSONEachRow")
        # JSONEachRow ends rows with "\n" only; str.splitlines would also split inside values
        # holding other line breaks ("\x1c", "\u2028"), which ClickHouse leaves unescaped.
        return [json.loads(line) for line in text.split("\n") if line]

    def insert_arrow(self, table: str, data: pa.Table) -> None:
        """Insert a columnar batch in one statement (chDB reads the Arrow table in place)."""
        if data.num_rows == 0:
            return
        columns = ", ".join(f"`{name}`" for name in data.column_names)
        sql = (
            f"INSERT INTO {self.database}.{table} ({columns}) "
            f"SELECT {columns} FROM Python(__batch__)"
        )
        with self._lock:
            scope = {"__batch__": data}
            try:
                _query_with_table(self._session, sql, scope)
            except Exception as exc:
                raise StoreError(f"insert into {table} failed: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            self._session.close()

    def _run(self, sql: str, fmt: str) -> str:
        with self._lock:
            try:
                result = self._session.query(sql, fmt)
            except Exception as exc:
                raise StoreError(f"{exc} (in: {sql[:200]})") from exc
        return result.bytes().decode("utf-8", "replace") if result is not None else ""


def _query_with_table(session: Any, sql: str, scope: dict[str, pa.Table]) -> None:
    """chDB's Python() table function finds the table by name among the caller's variables."""
    __batch__ = scope["__batch__"]  # noqa: F841 (read by chDB through the frame's locals)
    session.query(sql, "CSV")


def migrate(store: Store) -> list[int]:
    """Apply every migration not yet recorded; returns the versions applied now."""
    store.execute(f"CREATE DATABASE IF NOT EXISTS {store.database}")
    store.execute(
        f"CREATE TABLE IF NOT EXISTS {store.database}.mast_schema_versions "
        f"(Version UInt32, Name String, AppliedAt DateTime DEFAULT now()) "
        f"ENGINE = ReplacingMergeTree ORDER BY Version"
    )
    done = {
        int(row["Version"])
        for row in store.query(f"SELECT Version FROM {store.database}.mast_schema_versions")
    }
    applied = []
    for migration in migrations(store.database):
        if migration.version in done:
            continue
        for statement in migration.statements:
            store.execute(statement)
        store.execute(
            f"INSERT INTO {store.database}.mast_schema_versions (Version, Name) "
            f"VALUES ({migration.version}, '{migration.name}')"
        )
        applied.append(migration.version)
    return applied
