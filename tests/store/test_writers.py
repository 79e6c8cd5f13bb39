"""The exporter's writers on chDB: spans and log records stored once however often they are
handed over, rows of a failed write kept and written later (and not twice), and each table's
writer usable on its own through `export(batch)`."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from mast_otel.collector.store import ChdbStore, StoreError, migrate
from mast_otel.collector.store.batching import ClickHouseExporter
from mast_otel.collector.store.retry import RetryPolicy
from mast_otel.collector.store.stats import ExporterStats
from mast_otel.collector.store.writers import Batch, TableWriters
from mast_otel.processors.model import OutcomeUpdate
from mast_otel.processors.records import LogRecord
from tests.storedata import MINUTE, T0, finding, signature, span, trace_id


def _store(tmp_path: Path) -> ChdbStore:
    store = ChdbStore(tmp_path / "data")
    migrate(store)
    return store


def _count(store: ChdbStore, table: str) -> int:
    return int(store.query(f"SELECT count() AS n FROM otel.{table}")[0]["n"])


def _log(n: int) -> LogRecord:
    return LogRecord(
        time_ns=T0 + n * 1_000_000,
        trace_id=trace_id(n),
        body={"text": f"event {n}", "items": [1, 2]},
        event_name="codex.tool_result",
        service_name="svc",
        attributes={"n": n, "ok": True},
    )


def test_spans_and_logs_are_stored_once_however_often_they_come(tmp_path: Path) -> None:
    store = _store(tmp_path)
    try:
        exporter = ClickHouseExporter(store, 1000, 60.0)
        spans = [span(1, n, T0 + n * 1000) for n in range(5)]
        logs = [_log(n) for n in range(4)]
        # Twice in one batch, then again as a replay (spans flagged for a look-up; log
        # records are always looked up, they carry no id).
        exporter.add_spans(spans + spans[:2])
        exporter.add_logs(logs + logs[:1])
        assert exporter.flush(0.0, force=True)
        exporter.add_spans(spans, check=True)
        exporter.add_logs(logs)
        assert exporter.flush(0.0, force=True)
        assert _count(store, "otel_traces") == 5
        assert _count(store, "otel_logs") == 4
        assert exporter.stats.duplicates_dropped == 2 + 1 + 5 + 4
        assert exporter.stats.rows_written == {"otel_traces": 5, "otel_logs": 4}
        # Not flagged: written again (a fresh span is never looked up, which keeps it cheap).
        exporter.add_spans(spans[:1])
        exporter.flush(0.0, force=True)
        assert _count(store, "otel_traces") == 6
    finally:
        store.close()


class _FailingOnce:
    """The store, refusing (not transiently) the first insert into one table."""

    def __init__(self, store: ChdbStore, table: str) -> None:
        self.store = store
        self.database = store.database
        self.table = table
        self.failed = False

    def insert_arrow(self, table: str, data: pa.Table, dedup_token: str = "") -> None:
        if table == self.table and not self.failed:
            self.failed = True
            raise StoreError(f"insert into {table} failed: refused")
        self.store.insert_arrow(table, data, dedup_token)

    def query(self, sql: str) -> list[dict[str, object]]:
        return self.store.query(sql)

    def execute(self, sql: str) -> None:
        self.store.execute(sql)

    def close(self) -> None:
        return None


def test_a_failed_write_keeps_what_it_did_not_write(tmp_path: Path) -> None:
    store = _store(tmp_path)
    try:
        failing = _FailingOnce(store, "mast_findings")
        exporter = ClickHouseExporter(failing, 1000, 60.0, RetryPolicy(attempts=1))
        exporter.add_spans([span(2, n, T0 + n) for n in range(3)])
        exporter.add_findings([finding(2, 0, "FM-1.3", T0)])
        exporter.add_signatures([signature(2, T0 + MINUTE, {"FM-1.3": 1})])
        try:
            exporter.flush(0.0, force=True)
        except StoreError:
            pass
        else:
            raise AssertionError("the refused insert should fail the flush")
        # Spans went in before the findings failed; findings and signatures wait.
        assert exporter.buffered_rows == 2
        assert exporter.failing
        assert exporter.stats.write_errors_by_table == {"mast_findings": 1}
        assert exporter.flush(10_000.0, force=True)
        assert not exporter.failing
        assert _count(store, "otel_traces") == 3
        assert _count(store, "mast_findings") == 1
        assert _count(store, "mast_signatures") == 1
    finally:
        store.close()


def test_each_writer_exports_a_batch_on_its_own(tmp_path: Path) -> None:
    store = _store(tmp_path)
    try:
        stats = ExporterStats()
        writers = TableWriters.for_store(store, RetryPolicy(), stats)
        sig = signature(3, T0 + MINUTE, {})
        batch = Batch([sig], [False])
        writers.signatures.export(batch)
        assert len(batch) == 0  # written rows leave the batch
        outcomes = Batch(
            [
                OutcomeUpdate(trace_id(3), "success", None),
                OutcomeUpdate(trace_id(99), "failure", 0.0),
            ],
            [False, False],
        )
        writers.outcomes.export(outcomes)
        assert len(outcomes) == 0
        assert stats.outcomes_without_run == 1  # no run 99 was stored
        row = store.query(
            f"SELECT Outcome AS o FROM otel.mast_signatures FINAL WHERE TraceId = '{trace_id(3)}'"
        )
        assert row == [{"o": "success"}]
        for writer in writers.in_order():
            writer.shutdown()
    finally:
        store.close()
