"""The store fails every write for a while under load: the collector keeps acknowledging into
the spool until it is full, then refuses with OTLP's retryable status; when the store returns
the backlog drains, and every acknowledged span is stored exactly once."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

import grpc
import pyarrow as pa
from google.rpc import error_details_pb2
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

from mast_otel.collector.service import Service
from mast_otel.collector.store import ChdbStore, Store, StoreError
from tests.load import AckRecorder, Sender, sender_provider
from tests.test_backpressure import request
from tests.test_end_to_end import loopback_config


class FlakyStore:
    """The real embedded store, failing every statement while `down` is set (a store that
    stopped answering)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.database = inner.database
        self.down = threading.Event()
        self.failed = 0

    def _check(self) -> None:
        if self.down.is_set():
            self.failed += 1
            raise StoreError("Code: 210. Connection refused (the store is down)")

    def execute(self, sql: str) -> None:
        self._check()
        self.inner.execute(sql)

    def query(self, sql: str) -> list[dict[str, Any]]:
        self._check()
        return self.inner.query(sql)

    def insert_arrow(self, table: str, data: pa.Table, dedup_token: str = "") -> None:
        self._check()
        self.inner.insert_arrow(table, data, dedup_token=dedup_token)

    def close(self) -> None:
        self.inner.close()


def wait_for(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_store_outage_fills_the_spool_refuses_then_drains(tmp_path):
    config = loopback_config(tmp_path / "data")
    config = dataclasses.replace(
        config,
        durability=dataclasses.replace(
            config.durability, max_spool_bytes=400_000, segment_bytes=50_000
        ),
        storage=dataclasses.replace(
            config.storage, flush_interval_s=0.2, retry_initial_s=0.1, retry_max_s=0.5
        ),
        windows=dataclasses.replace(config.windows, grace_s=0.2),
    )
    store = FlakyStore(ChdbStore(config.storage.data_dir, config.storage.database))
    service = Service(config, store=store)
    service.start()
    recorder = AckRecorder(
        OTLPSpanExporter(endpoint=f"127.0.0.1:{service.grpc_port}", insecure=True)
    )
    provider = sender_provider(recorder)
    sender = Sender(provider.get_tracer("outage"), runs_per_second=40, name="sender")
    sender.start()
    try:
        time.sleep(1.0)
        store.down.set()
        # Acknowledged into the spool until it is full, then refused.
        wait_for(lambda: service.pipeline.stats.spool_refusals > 0, 20, "the spool to fill")
        spool_bytes = service.spool.bytes if service.spool else 0
        assert spool_bytes <= config.durability.max_spool_bytes
        channel = grpc.insecure_channel(f"127.0.0.1:{service.grpc_port}")
        try:
            # Larger than what the full spool has left (at most one refused sender batch).
            probe = request(50, 7)
            probe.resource_spans[0].scope_spans[0].spans[0].name = "x" * 200_000
            trace_service_pb2_grpc.TraceServiceStub(channel).Export(probe, timeout=5)
            raise AssertionError("a request was accepted into a full spool")
        except grpc.RpcError as refused:
            assert refused.code() == grpc.StatusCode.UNAVAILABLE
            trailers = dict(refused.trailing_metadata() or ())
            retry = error_details_pb2.RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"])
            assert retry.retry_delay.ToNanoseconds() > 0
        finally:
            channel.close()
        acked_during_outage = len(recorder.acked)
        time.sleep(1.0)
        store.down.clear()
        # The backlog drains: the senders' retries get in, the spool empties.
        wait_for(
            lambda: (
                service.exporter.stats.rows_written.get("otel_traces", 0) > 0
                and service.exporter.buffered_rows == 0
            ),
            30,
            "the backlog to drain",
        )
        sender.stop_event.set()
        sender.join(timeout=10)
        assert provider.force_flush(30_000)
        wait_for(
            lambda: service.pipeline.queue_depth == 0 and service.exporter.buffered_rows == 0,
            30,
            "the last requests",
        )
        health = service.health()
    finally:
        sender.stop_event.set()
        provider.shutdown()
        service.stop()

    print(
        f"\noutage: {store.failed} failed statements, spool peaked near {spool_bytes} bytes, "
        f"{health['grpc']['requests_refused']} requests refused, "
        f"{acked_during_outage} spans acknowledged by then, {len(recorder.acked)} in all"
    )
    assert store.failed > 0
    assert health["store"]["write_errors"] > 0
    assert health["grpc"]["requests_refused"] > 0
    assert health["pipeline"]["spool_refusals"] > 0

    check = ChdbStore(config.storage.data_dir)
    try:
        rows = check.query(
            "SELECT TraceId AS t, SpanId AS s, count() AS n FROM otel.otel_traces "
            "GROUP BY TraceId, SpanId"
        )
        signed = {
            r["t"] for r in check.query("SELECT DISTINCT TraceId AS t FROM otel.mast_signatures")
        }
    finally:
        check.close()
    stored = {(r["t"], r["s"]): int(r["n"]) for r in rows}
    assert not recorder.acked - stored.keys(), "acknowledged spans were lost"
    assert all(n == 1 for n in stored.values()), "a span was stored twice"
    assert {t for t, _ in stored} <= signed
    # Everything stored and every run closed: a clean stop leaves nothing to replay.
    assert not list((tmp_path / "data" / "spool").glob("*.wal"))


class SlowStore(FlakyStore):
    """The real embedded store, whose inserts wait while `hold` is set (a store that takes
    its time), saying when one is waiting."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.hold = threading.Event()
        self.waiting = threading.Event()

    def insert_arrow(self, table: str, data: pa.Table, dedup_token: str = "") -> None:
        if self.hold.is_set():
            self.waiting.set()
            while self.hold.is_set():
                time.sleep(0.01)
        super().insert_arrow(table, data, dedup_token)


def test_the_pipeline_goes_on_while_the_store_writes(tmp_path):
    """Writes run on a thread of their own: while an insert takes its time, requests are
    still acknowledged and analysed, and everything is stored once when it is done."""
    config = loopback_config(tmp_path / "data")
    config = dataclasses.replace(
        config, storage=dataclasses.replace(config.storage, flush_interval_s=0.1)
    )
    store = SlowStore(ChdbStore(config.storage.data_dir, config.storage.database))
    service = Service(config, store=store)
    service.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{service.grpc_port}")
    export = trace_service_pb2_grpc.TraceServiceStub(channel).Export
    try:
        store.hold.set()
        export(request(10, 1), timeout=5)
        wait_for(store.waiting.is_set, 10, "a write to start")
        for trace in range(2, 6):
            export(request(10, trace), timeout=5)
        # Processed while the first write still waits.
        wait_for(lambda: service.pipeline.stats.spans_received == 50, 10, "the pipeline")
        assert store.waiting.is_set() and store.hold.is_set()
        assert service.exporter.buffered_rows >= 50
        assert service.exporter.stats.rows_written.get("otel_traces", 0) == 0
        store.hold.clear()
        wait_for(
            lambda: (
                service.exporter.stats.rows_written.get("otel_traces", 0) == 50
                and service.exporter.buffered_rows == 0
            ),
            20,
            "the writes",
        )
    finally:
        store.hold.clear()
        channel.close()
        service.stop()
    store = ChdbStore(config.storage.data_dir, config.storage.database)
    try:
        rows = store.query(
            "SELECT count() AS n, uniqExact(TraceId, SpanId) AS u FROM otel.otel_traces"
        )
    finally:
        store.close()
    assert int(rows[0]["n"]) == int(rows[0]["u"]) == 50


def test_a_stop_while_the_store_is_down_says_what_it_leaves(tmp_path):
    """SIGTERM while the store refuses writes: the stop does not claim everything is stored;
    it says what stays in the spool, and the next start stores it."""
    from mast_otel.collector.config import load_config
    from mast_otel.collector.spool import RecordKind
    from tests.test_spool import _request, open_spool

    config = load_config()
    config.storage.data_dir = str(tmp_path / "data")
    config.receivers.grpc.enabled = False
    config.receivers.http.enabled = False
    config.pipeline.workers = 1
    spool = open_spool(config.spool_dir(), segment_bytes=1_000_000)
    now_ns = time.time_ns()
    for trace in range(1, 6):
        spool.append(RecordKind.TRACES_PROTOBUF, _request(trace, 3, True, now_ns))
    spool.close()

    store = FlakyStore(ChdbStore(config.storage.data_dir))
    service = Service(config, store=store)
    store.down.set()
    service.start()
    wait_for(lambda: service.pipeline.stats.replayed_requests == 5, 20, "the replay")
    report = service.stop()
    assert not report.complete and report.rows_unstored > 0, report
    assert report.describe().startswith("NOT everything accepted is stored")
    assert "stay in the spool" in report.describe()
    assert list(config.spool_dir().glob("*.wal"))

    service = Service(config)
    service.start()
    report = service.stop()
    assert report.complete, report
    check = ChdbStore(config.storage.data_dir)
    try:
        assert check.query("SELECT count() AS n FROM otel.otel_traces")[0]["n"] == 15
    finally:
        check.close()
