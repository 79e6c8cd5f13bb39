"""The write-ahead spool on its own: records survive a reopen intact and in order, a torn tail
is cut off without losing the records before it, segments go only when nothing holds them,
journals are read back (a torn journal line is ignored), and the bound refuses."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from mast_otel.collector.spool import RecordKind, Spool, SpoolFull


def open_spool(path: Path, **kwargs: object) -> Spool:
    options: dict = {"max_bytes": 10_000_000, "segment_bytes": 2_000, "fsync": True}
    options.update(kwargs)
    spool = Spool(path, **options)
    spool.open()
    return spool


def test_records_come_back_in_order_and_numbering_continues(tmp_path):
    spool = open_spool(tmp_path)
    sent = [
        (RecordKind.TRACES_PROTOBUF if i % 2 else RecordKind.LOGS_JSON, bytes([i]) * 300)
        for i in range(20)
    ]
    entries = [spool.append(kind, payload) for kind, payload in sent]
    assert [e.seq for e in entries] == list(range(1, 21))
    assert spool.segments > 1  # 2 kB segments: several files
    spool.close()

    again = Spool(tmp_path, 10_000_000, 2_000)
    recovered = again.open()
    assert recovered.segments > 1
    replayed = list(again.replay())
    assert [(kind, payload) for _, kind, payload in replayed] == sent
    assert [entry.seq for entry, _, _ in replayed] == list(range(1, 21))
    # A new record is numbered after every old one, even before the replay reads them all:
    # journals name records by number, so a reused number would mark an old record stored.
    assert again.append(RecordKind.TRACES_PROTOBUF, b"new").seq == 21
    again.close()


def test_a_torn_tail_ends_the_segment_and_keeps_what_came_before(tmp_path):
    spool = open_spool(tmp_path, segment_bytes=1_000_000)
    for i in range(5):
        spool.append(RecordKind.TRACES_PROTOBUF, b"payload-%d" % i)
    spool.close()
    (segment,) = tmp_path.glob("*.wal")
    data = segment.read_bytes()
    segment.write_bytes(data + data[:25])  # half a record, as a killed write leaves it

    again = Spool(tmp_path, 10_000_000, 1_000_000)
    again.open()
    payloads = [payload for _, _, payload in again.replay()]
    assert payloads == [b"payload-%d" % i for i in range(5)]
    assert again.stats.torn_records == 1

    corrupt = bytearray(data)
    corrupt[-3] ^= 0xFF  # flip a bit in the last payload: the checksum catches it
    segment.write_bytes(bytes(corrupt))
    third = Spool(tmp_path, 10_000_000, 1_000_000)
    third.open()
    assert [p for _, _, p in third.replay()] == [b"payload-%d" % i for i in range(4)]


def test_segments_go_when_nothing_holds_them_and_journals_come_back(tmp_path):
    spool = open_spool(tmp_path, segment_bytes=500)
    first = [spool.append(RecordKind.TRACES_PROTOBUF, b"a" * 200) for _ in range(2)]
    second = spool.append(RecordKind.TRACES_PROTOBUF, b"b" * 200)
    assert first[0].segment == first[1].segment != second.segment
    old = first[0].segment
    spool.hold(old)  # an open run has a record there
    spool.journal({old: [f"S {first[0].seq}", f"S {first[1].seq}", "C " + "ab" * 16]})
    for entry in first:
        spool.release(entry.segment)
    assert (tmp_path / f"{old:020d}.wal").exists()  # the run still holds it
    spool.close()

    again = Spool(tmp_path, 10_000_000, 500)
    # A journal line cut by a crash is ignored rather than misread ("S 1" of "S 12").
    journal = tmp_path / f"{old:020d}.done"
    journal.write_text(journal.read_text() + "S 9")
    recovered = again.open()
    assert recovered.stored == {first[0].seq, first[1].seq}
    assert recovered.closed == {"ab" * 16}
    replayed = list(again.replay())
    assert len(replayed) == 3
    for entry, _, _ in replayed:
        again.release(entry.segment)
    assert not list(tmp_path.glob("*.wal")) and not list(tmp_path.glob("*.done"))
    assert again.bytes == 0


def test_the_bound_refuses_and_frees_up_when_segments_go(tmp_path):
    spool = open_spool(tmp_path, max_bytes=3_000, segment_bytes=1_000)
    entries = [spool.append(RecordKind.TRACES_PROTOBUF, b"x" * 900) for _ in range(3)]
    with pytest.raises(SpoolFull, match="spool is full"):
        spool.append(RecordKind.TRACES_PROTOBUF, b"x" * 900)
    assert spool.stats.refused_full == 1
    for entry in entries[:2]:
        spool.release(entry.segment)
    spool.append(RecordKind.TRACES_PROTOBUF, b"x" * 900)
    spool.close()


def test_concurrent_requests_share_fsyncs(tmp_path):
    spool = open_spool(tmp_path, segment_bytes=10_000_000)

    def send() -> None:
        for _ in range(100):
            spool.append(RecordKind.TRACES_PROTOBUF, b"y" * 2_000)

    threads = [threading.Thread(target=send) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert spool.stats.appends == 800
    assert spool.stats.fsyncs < 800
    spool.close()


def _request(trace: int, spans: int, with_root: bool, now_ns: int) -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    resource = request.resource_spans.add()
    resource.resource.attributes.add(key="service.name").value.string_value = "spooled"
    out = resource.scope_spans.add().spans
    trace_id = trace.to_bytes(16, "big")
    for i in range(spans):
        span = out.add()
        span.trace_id, span.span_id = trace_id, (trace * 100 + i + 1).to_bytes(8, "big")
        span.name = f"step {i}"
        # Children of span 1; without the root, span 1 itself has a parent never sent.
        parent = 1 if i else (0 if with_root else 999)
        if parent:
            span.parent_span_id = (trace * 100 + parent).to_bytes(8, "big")
        span.start_time_unix_nano = now_ns - 70_000_000_000 + i * 1_000_000
        span.end_time_unix_nano = span.start_time_unix_nano + 500_000
    return request.SerializeToString()


def test_runs_left_open_by_a_crash_close_once_idle_and_their_segments_go(tmp_path):
    """A run whose end never comes (its root was lost with its sender) holds its spool
    segments until it is idle. Its idle time counts from when its requests arrived, not from
    the restart: a start after a crash closes it once idle, and the spool it leaves does not
    grow from restart to restart."""
    import os

    from mast_otel.collector.config import load_config
    from mast_otel.collector.service import Service
    from mast_otel.collector.store import ChdbStore

    config = load_config()
    config.storage.data_dir = str(tmp_path / "data")
    config.receivers.grpc.enabled = False
    config.receivers.http.enabled = False
    config.pipeline.workers = 1  # replay in one process (the workers' replay: test_workers_*)
    config.windows.idle_timeout_s = 30.0
    spool = open_spool(config.spool_dir(), segment_bytes=1_000_000)
    now_ns = time.time_ns()
    spool.append(RecordKind.TRACES_PROTOBUF, _request(7, 3, with_root=False, now_ns=now_ns))
    spool.append(RecordKind.TRACES_PROTOBUF, _request(8, 3, with_root=True, now_ns=now_ns))
    spool.close()
    # Written 70 s ago (the previous process died then): past the idle timeout already.
    for segment in config.spool_dir().glob("*.wal"):
        os.utime(segment, (time.time() - 70, time.time() - 70))

    service = Service(config)
    service.start()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if not list(config.spool_dir().glob("*.wal")):
                break
            time.sleep(0.1)
        left = sorted(p.name for p in config.spool_dir().glob("*.wal"))
        closed = dict(service.pipeline.windows.stats.runs_closed)
    finally:
        report = service.stop()
    assert report.complete
    assert not left, f"segments still held after the replay: {left}, runs closed {closed}"
    assert closed.get("idle") == 1, closed
    store = ChdbStore(config.storage.data_dir)
    try:
        rows = store.query(
            "SELECT CloseReason AS r, Steps AS n FROM otel.mast_signatures FINAL ORDER BY r"
        )
    finally:
        store.close()
    assert [(row["r"], int(row["n"])) for row in rows] == [("idle", 3), ("root_ended", 3)]


def test_replayed_requests_of_closed_runs_already_stored_are_skipped(tmp_path):
    """What keeps spool files is usually a few open runs; the rest of what a restart replays
    is stored and closed (the journals say so) and costs nothing more than reading it."""
    from mast_otel.collector.config import load_config
    from mast_otel.collector.service import Service

    config = load_config()
    config.storage.data_dir = str(tmp_path / "data")
    config.receivers.grpc.enabled = False
    config.receivers.http.enabled = False
    config.pipeline.workers = 1  # replay in one process (the workers' replay: test_workers_*)
    spool = open_spool(config.spool_dir(), segment_bytes=1_000_000)
    now_ns = time.time_ns()
    entries = [
        spool.append(RecordKind.TRACES_PROTOBUF, _request(trace, 4, True, now_ns))
        for trace in (11, 12, 13)
    ]
    # 11 and 12 stored and closed; 13 stored, its run still open when the process died.
    spool.journal(
        {
            entries[0].segment: [
                *(f"S {e.seq}" for e in entries),
                f"C {(11).to_bytes(16, 'big').hex()}",
                f"C {(12).to_bytes(16, 'big').hex()}",
            ]
        }
    )
    spool.close()

    service = Service(config)
    service.start()
    try:
        deadline = time.monotonic() + 20
        while service.pipeline.stats.replayed_requests < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        stats = service.pipeline.stats
        assert stats.replayed_requests == 3
        assert stats.replay_skipped == 8
        assert service.pipeline.windows.stats.steps_received == 4  # run 13, rebuilt
    finally:
        service.stop()
