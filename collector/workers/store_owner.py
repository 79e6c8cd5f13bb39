"""The embedded store shared by worker processes: the receiving process owns it, workers write
through it.

chDB opens a data directory from one process only, so with the embedded store the receiving
process holds it (`StoreOwner`) and each worker gets a `StoreClient`: the store protocol
(`execute`, `query`, `insert_arrow`, `close`) over a local socket (an abstract Unix socket,
authenticated with a key only the workers are given), Arrow tables pickled as they are.

One thread per worker reads its requests; one store thread runs them, one statement at a time
(the store takes no more). Inserts that wait for the store thread meanwhile are written
together: the inserts into one table with one schema, from any workers, become one statement
(their rows concatenated, in arrival order), so N workers do not make N times as many inserts
and parts for the store to merge. A combined insert carries a deduplication token derived from
its parts' tokens (inserts without a token are combined only with others without one); if it
fails, each part is run again alone and answered with its own outcome, so a combined insert
can never make a part fail that alone would pass. A worker waits for each answer before its
next request, so its requests run in the order it sent them.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import logging
import os
import queue
import secrets
import threading
from dataclasses import dataclass, field
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

import pyarrow as pa

from mast_otel.collector.store import Store, StoreError

log = logging.getLogger(__name__)

# At most this many rows in one combined insert (beyond it, the rest waits for the next).
COMBINE_MAX_ROWS = 100_000


@dataclass(slots=True)
class _Request:
    message: tuple[Any, ...]
    done: threading.Event = field(default_factory=threading.Event)
    reply: tuple[Any, ...] = ()


@dataclass
class OwnerStats:
    requests: int = 0
    rows_inserted: int = 0
    # Insert statements run, and the worker inserts they held (inserts / statements: how much
    # combining saved).
    insert_statements: int = 0
    inserts: int = 0


class StoreOwner:
    """Serves the store to worker processes (see the module's docstring)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.stats = OwnerStats()
        self.authkey = secrets.token_bytes(32)
        self.address = f"\0mast-otel-store-{os.getpid()}-{secrets.token_hex(8)}"
        self._listener = Listener(self.address, "AF_UNIX", authkey=self.authkey)
        self._closed = threading.Event()
        self._connections: list[Connection] = []
        self._lock = threading.Lock()
        self._waiting: queue.Queue[_Request | None] = queue.Queue()
        self._accepting = threading.Thread(target=self._accept, name="store-owner", daemon=True)
        self._accepting.start()
        self._runner = threading.Thread(target=self._run, name="store-owner-run", daemon=True)
        self._runner.start()

    @property
    def requests(self) -> int:
        return self.stats.requests

    # -- one thread per worker ----------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                connection = self._listener.accept()
            except Exception:  # closed, or a peer without the key
                if self._closed.is_set():
                    return
                log.warning("a connection to the store owner was refused", exc_info=True)
                continue
            with self._lock:
                self._connections.append(connection)
            threading.Thread(
                target=self._serve, args=(connection,), name="store-owner-conn", daemon=True
            ).start()

    def _serve(self, connection: Connection) -> None:
        try:
            while True:
                try:
                    message = connection.recv()
                except (EOFError, OSError):
                    return
                request = _Request(message)
                self._waiting.put(request)
                request.done.wait()
                try:
                    connection.send(request.reply)
                except (EOFError, OSError):
                    return
        finally:
            # Closed once: by this thread, or by `close` when it took the connection first (a
            # second close could close a descriptor number already reused elsewhere).
            with self._lock:
                mine = connection in self._connections
                if mine:
                    self._connections.remove(connection)
            if mine:
                connection.close()

    # -- the store's thread -------------------------------------------------------------------

    def _run(self) -> None:
        # chDB's Python() table function imports pandas at its first use: a second of CPU
        # better spent now than on the first worker's write.
        with contextlib.suppress(ImportError):
            importlib.import_module("pandas")
        while True:
            request = self._waiting.get()
            if request is None:
                return
            batch = [request]
            while True:
                try:
                    more = self._waiting.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._waiting.put(None)
                    break
                batch.append(more)
            self._run_batch(batch)

    def _run_batch(self, batch: list[_Request]) -> None:
        """Inserts into one table with one schema together, the rest one by one, in order."""
        groups: dict[tuple[str, pa.Schema, bool], list[_Request]] = {}
        order: list[list[_Request]] = []
        for request in batch:
            message = request.message
            if message[0] == "insert":
                key = (message[1], message[2].schema, bool(message[3]))
                group = groups.get(key)
                rows = sum(r.message[2].num_rows for r in group) if group else 0
                if group is not None and rows + message[2].num_rows <= COMBINE_MAX_ROWS:
                    group.append(request)
                    continue
                groups[key] = [request]
                order.append(groups[key])
            else:
                order.append([request])
        for requests in order:
            if len(requests) == 1:
                self._answer(requests)
            elif not self._answer(requests, split_on_error=True):
                for request in requests:
                    self._answer([request])

    def _answer(self, requests: list[_Request], *, split_on_error: bool = False) -> bool:
        """Run one statement for `requests` and answer them; with `split_on_error`, a failure
        answers nobody and returns False (the caller runs them one by one)."""
        message = requests[0].message
        op = message[0]
        try:
            result: Any = None
            if op == "insert":
                tables = [r.message[2] for r in requests]
                data = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
                self.store.insert_arrow(message[1], data, dedup_token=_token(requests))
                self.stats.rows_inserted += data.num_rows
                self.stats.insert_statements += 1
                self.stats.inserts += len(requests)
            elif op == "query":
                result = self.store.query(message[1])
            elif op == "execute":
                self.store.execute(message[1])
            else:
                raise StoreError(f"unknown store operation {op!r}")
            self.stats.requests += len(requests)
            reply: tuple[Any, ...] = ("ok", result)
        except Exception as exc:
            if split_on_error:
                log.warning("a combined insert of %d failed (%s): run alone", len(requests), exc)
                return False
            if isinstance(exc, StoreError):
                reply = ("error", str(exc), exc.transient)
            else:
                reply = ("error", f"{type(exc).__name__}: {exc}", False)
        for request in requests:
            request.reply = reply
            request.done.set()
        return True

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        self._waiting.put(None)
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.close()


def _token(requests: list[_Request]) -> str:
    """The deduplication token of an insert: its own, or one made of its parts' tokens (parts
    are combined only if all have one, or none)."""
    tokens = [str(r.message[3]) for r in requests]
    if len(tokens) == 1 or not all(tokens):
        return tokens[0]
    return "combined-" + hashlib.blake2b("\n".join(tokens).encode(), digest_size=16).hexdigest()


class StoreClient:
    """A worker's store: every statement and insert goes to the `StoreOwner`."""

    cluster = ""

    def __init__(self, address: str, authkey: bytes, database: str) -> None:
        self.database = database
        self._connection = Client(address, "AF_UNIX", authkey=authkey)
        self._lock = threading.Lock()

    def _call(self, *message: Any) -> Any:
        with self._lock:
            try:
                self._connection.send(message)
                reply = self._connection.recv()
            except (EOFError, OSError) as exc:
                raise StoreError(f"the store's owner is gone: {exc}", transient=True) from exc
        if reply[0] == "ok":
            return reply[1]
        raise StoreError(reply[1], transient=bool(reply[2]))

    def execute(self, sql: str) -> None:
        self._call("execute", sql)

    def query(self, sql: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call("query", sql)
        return result

    def insert_arrow(self, table: str, data: pa.Table, dedup_token: str = "") -> None:
        if data.num_rows == 0:
            return
        self._call("insert", table, data, dedup_token)

    def close(self) -> None:
        with self._lock:
            self._connection.close()
