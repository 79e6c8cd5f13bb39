"""The ClickHouse store the collector writes to and the command line reads from.

Two backends behind one protocol (`execute`, `query`, `insert_arrow`, `close`), so every SQL
statement the product sends is the same on both:

- `ChdbStore`, the embedded default: chDB, ClickHouse in-process, keeping its data under a
  directory, with nothing to start;
- `ClickHouseServerStore`, a ClickHouse server or cluster through clickhouse-connect (HTTP or
  HTTPS); a thin adapter that sends the same statements and inserts the same Arrow batches.

`collector.store.migrate` brings a store's schema to the latest version.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import pyarrow as pa

if TYPE_CHECKING:
    from mast_otel.collector.config import ClickHouseServerConfig, StorageConfig

log = logging.getLogger(__name__)

PASSWORD_ENV = "MAST_CLICKHOUSE_PASSWORD"

# ClickHouse error codes worth retrying: the same statement may succeed in a moment.
TRANSIENT_CODES = frozenset(
    {
        3,  # UNEXPECTED_END_OF_FILE
        159,  # TIMEOUT_EXCEEDED
        202,  # TOO_MANY_SIMULTANEOUS_QUERIES
        209,  # SOCKET_TIMEOUT
        210,  # NETWORK_ERROR
        236,  # ABORTED
        241,  # MEMORY_LIMIT_EXCEEDED
        242,  # TABLE_IS_READ_ONLY (a replica lost its keeper session)
        252,  # TOO_MANY_PARTS
        285,  # TOO_FEW_LIVE_REPLICAS
        319,  # UNKNOWN_STATUS_OF_INSERT
        425,  # SYSTEM_ERROR
        999,  # KEEPER_EXCEPTION
    }
)
_CODE = re.compile(r"\bCode:\s*(\d+)")


class StoreError(RuntimeError):
    """A statement failed in the store; the message carries ClickHouse's own words.
    `transient` says whether retrying the same statement later may succeed."""

    def __init__(self, message: str, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


def error_code(message: str) -> int | None:
    match = _CODE.search(message)
    return int(match[1]) if match else None


class Store(Protocol):
    database: str

    def execute(self, sql: str) -> None: ...

    def query(self, sql: str) -> list[dict[str, Any]]: ...

    def insert_arrow(self, table: str, data: pa.Table, dedup_token: str = "") -> None:
        """Insert a columnar batch into `database.table` in one statement. A non-empty
        `dedup_token` makes a second insert with the same token a no-op (within the table's
        deduplication window): retries send the same token."""
        ...

    def close(self) -> None: ...


def _parse_rows(text: str) -> list[dict[str, Any]]:
    # JSONEachRow ends rows with "\n" only; str.splitlines would also split inside values
    # holding other line breaks ("\x1c", "\u2028"), which ClickHouse leaves unescaped.
    return [json.loads(line) for line in text.split("\n") if line]


def _insert_settings(dedup_token: str, cluster: str) -> dict[str, Any]:
    """Settings every insert carries; both backends send exactly these."""
    settings: dict[str, Any] = {}
    if dedup_token:
        settings["insert_deduplication_token"] = dedup_token
    if cluster:
        # Acknowledged only once the shards have the rows, and the token travels with them.
        settings["distributed_foreground_insert"] = 1
    return settings


def _settings_clause(settings: dict[str, Any]) -> str:
    parts = []
    for key, value in settings.items():
        literal = str(value) if isinstance(value, int) else "'" + str(value).replace("'", "") + "'"
        parts.append(f"{key} = {literal}")
    return ", ".join(parts)


class ChdbStore:
    """chDB under `data_dir`. One process at a time may open a directory.

    `options` are passed to the embedded engine as command-line options (for instance
    `{"config-file": path}` to give it macros or cluster definitions)."""

    cluster = ""

    def __init__(
        self, data_dir: str | Path, database: str = "otel", options: dict[str, str] | None = None
    ) -> None:
        from chdb import session

        self.database = database
        self.path = Path(data_dir)
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        target = str(self.path)
        if options:
            target += "?" + "&".join(f"{k}={v}" for k, v in options.items())
        try:
            self._session = session.Session(target)
        except Exception as exc:  # chDB raises plain exceptions for a locked or bad directory
            raise StoreError(
                f"cannot open the embedded store at {self.path}: {exc}. If a collector is "
                f"running on this directory, stop it first or point --data-dir elsewhere."
            ) from exc

    def execute(self, sql: str) -> None:
        self._run(sql, "CSV")

    def query(self, sql: str) -> list[dict[str, Any]]:
        return _parse_rows(self._run(sql, "JSONEachRow"))

    def insert_arrow(self, table: str, data: pa.Table, dedup_token: str = "") -> None:
        """One statement; chDB reads the Arrow table in place."""
        if data.num_rows == 0:
            return
        columns = ", ".join(f"`{name}`" for name in data.column_names)
        settings = _insert_settings(dedup_token, self.cluster)
        clause = f" SETTINGS {_settings_clause(settings)}" if settings else ""
        sql = (
            f"INSERT INTO {self.database}.{table} ({columns}){clause} "
            f"SELECT {columns} FROM Python(__batch__)"
        )
        with self._lock:
            scope = {"__batch__": data}
            try:
                _query_with_table(self._session, sql, scope)
            except Exception as exc:
                raise StoreError(f"insert into {table} failed: {exc}", _is_transient(exc)) from exc

    def close(self) -> None:
        with self._lock:
            self._session.close()

    def _run(self, sql: str, fmt: str) -> str:
        with self._lock:
            try:
                result = self._session.query(sql, fmt)
            except Exception as exc:
                raise StoreError(f"{exc} (in: {sql[:200]})", _is_transient(exc)) from exc
        return result.bytes().decode("utf-8", "replace") if result is not None else ""


def _query_with_table(session: Any, sql: str, scope: dict[str, pa.Table]) -> None:
    """chDB's Python() table function finds the table by name among the caller's variables."""
    __batch__ = scope["__batch__"]  # noqa: F841 (read by chDB through the frame's locals)
    session.query(sql, "CSV")


def _is_transient(exc: Exception) -> bool:
    code = getattr(exc, "code", None)
    if not isinstance(code, int):
        code = error_code(str(exc))
    if code is not None:
        return code in TRANSIENT_CODES
    # No ClickHouse code: a transport failure (refused, reset, timed out) is worth a retry.
    name = type(exc).__name__
    return name in {"OperationalError", "ConnectionError", "TimeoutError"} or isinstance(
        exc, ConnectionError | TimeoutError
    )


class ClickHouseServerStore:
    """A ClickHouse server (or cluster) through a clickhouse-connect client.

    Deliberately thin: `execute` is the client's `command`, `query` its `raw_query` in
    JSONEachRow (the format `ChdbStore` reads, so rows come back alike), `insert_arrow` its
    `insert_arrow` with the same settings `ChdbStore` puts in its statement. Open one with
    `connect`; any clickhouse-connect client will do (tests use its chDB interface)."""

    def __init__(self, client: Any, database: str = "otel", cluster: str = "") -> None:
        self.client = client
        self.database = database
        self.cluster = cluster

    @classmethod
    def connect(
        cls, server: ClickHouseServerConfig, database: str = "otel", cluster: str = ""
    ) -> ClickHouseServerStore:
        import clickhouse_connect

        try:
            client = clickhouse_connect.get_client(**client_arguments(server))
        except Exception as exc:
            raise StoreError(
                f"cannot reach ClickHouse at {server.url} as {server.username!r}: "
                f"{_without_secrets(str(exc))}. Check storage.clickhouse.url, the user and "
                f"its password ({PASSWORD_ENV} or storage.clickhouse.password_file).",
                transient=_is_transient(exc),
            ) from exc
        return cls(client, database, cluster)

    def execute(self, sql: str) -> None:
        try:
            self.client.command(sql)
        except Exception as exc:
            raise StoreError(
                f"{_without_secrets(str(exc))} (in: {sql[:200]})", _is_transient(exc)
            ) from exc

    def query(self, sql: str) -> list[dict[str, Any]]:
        try:
            raw = self.client.raw_query(sql, fmt="JSONEachRow")
        except Exception as exc:
            raise StoreError(
                f"{_without_secrets(str(exc))} (in: {sql[:200]})", _is_transient(exc)
            ) from exc
        return _parse_rows(bytes(raw).decode("utf-8", "replace"))

    def insert_arrow(self, table: str, data: pa.Table, dedup_token: str = "") -> None:
        if data.num_rows == 0:
            return
        try:
            self.client.insert_arrow(
                table,
                data,
                database=self.database,
                settings=_insert_settings(dedup_token, self.cluster),
            )
        except Exception as exc:
            raise StoreError(
                f"insert into {table} failed: {_without_secrets(str(exc))}", _is_transient(exc)
            ) from exc

    def close(self) -> None:
        self.client.close()


def _without_secrets(message: str) -> str:
    """Error text with any password the environment holds blanked out."""
    password = os.environ.get(PASSWORD_ENV)
    return message.replace(password, "***") if password else message


def read_password(server: ClickHouseServerConfig) -> str:
    """The server password: the file's first line, else $MAST_CLICKHOUSE_PASSWORD, else ""."""
    if server.password_file:
        try:
            text = Path(server.password_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise StoreError(
                f"cannot read storage.clickhouse.password_file {server.password_file}: "
                f"{exc.strerror}"
            ) from exc
        return text.splitlines()[0] if text else ""
    return os.environ.get(PASSWORD_ENV, "")


def client_arguments(server: ClickHouseServerConfig) -> dict[str, Any]:
    """Keyword arguments for clickhouse_connect.get_client (they hold the password: never
    log them)."""
    url = urlsplit(server.url)
    secure = url.scheme == "https"
    arguments: dict[str, Any] = {
        "host": url.hostname,
        "port": url.port or (8443 if secure else 8123),
        "username": server.username,
        "password": read_password(server),
        "secure": secure,
        "verify": server.verify_tls,
        "connect_timeout": server.connect_timeout_s,
        "send_receive_timeout": server.send_receive_timeout_s,
        # Statements come from several threads (exporter, queries); no shared server session.
        "autogenerate_session_id": False,
    }
    if server.ca_cert:
        arguments["ca_cert"] = server.ca_cert
    return arguments


def open_store(storage: StorageConfig) -> Store:
    """The store the configuration names."""
    if storage.backend == "clickhouse":
        return ClickHouseServerStore.connect(storage.clickhouse, storage.database, storage.cluster)
    return ChdbStore(storage.data_dir, storage.database)
