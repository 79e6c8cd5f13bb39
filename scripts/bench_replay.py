"""Replay against live processing: the same requests (the benchmark fleet) processed as they
arrive, and replayed from the spool by a new start, each until every row is stored. Prints
spans per second (wall clock) and CPU seconds per 1,000 spans (the process's, steadier on
a shared machine) of each, and their ratios: `python scripts/bench_replay.py [--spans N]`."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from mast_otel.collector.config import load_config
from mast_otel.collector.consumer import RawRequest
from mast_otel.collector.otlp.decode import decode_spans, parse_trace_request
from mast_otel.collector.service import Service
from mast_otel.collector.spool import RecordKind, Spool
from tests.benchmarks.fleet import build_fleet


def _config(data_dir: Path):  # type: ignore[no-untyped-def]
    config = load_config()
    config.storage.data_dir = str(data_dir)
    config.receivers.grpc.enabled = False
    config.receivers.http.enabled = False
    config.durability.mode = "durable"
    return config


def _settle(service: Service, timeout_s: float = 600.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        spool = service.spool
        if (
            service.pipeline.queue_depth == 0
            and service.exporter.buffered_rows == 0
            and (spool is None or not spool.replaying)
            and service.pipeline.stats.spans_received >= _settle.expected  # type: ignore[attr-defined]
        ):
            return
        time.sleep(0.01)
    raise RuntimeError("did not settle")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=20_000)
    args = parser.parse_args()
    fleet = build_fleet(args.spans)
    _settle.expected = fleet.spans  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory() as tmp:
        live_dir, replay_dir = Path(tmp) / "live", Path(tmp) / "replay"
        service = Service(_config(live_dir))
        service.start()
        started, cpu = time.perf_counter(), time.process_time()
        for body in fleet.requests:
            records = decode_spans(parse_trace_request(body)).records
            service.pipeline.consume_spans(records, RawRequest("traces", "protobuf", body))
        _settle(service)
        live_s, live_cpu = time.perf_counter() - started, time.process_time() - cpu
        service.stop()

        config = _config(replay_dir)
        spool = Spool(config.spool_dir(), 1 << 40, config.durability.segment_bytes, fsync=False)
        spool.open()
        for body in fleet.requests:
            spool.append(RecordKind.TRACES_PROTOBUF, body)
        spool.close()
        service = Service(config)
        started, cpu = time.perf_counter(), time.process_time()
        service.start()
        _settle(service)
        replay_s, replay_cpu = time.perf_counter() - started, time.process_time() - cpu
        replayed = service.pipeline.stats.replayed_requests
        service.stop()
    print(
        f"{fleet.spans} spans in {len(fleet.requests)} requests: live {fleet.spans / live_s:,.0f} "
        f"spans/s ({live_s:.1f} s), replay {fleet.spans / replay_s:,.0f} spans/s "
        f"({replay_s:.1f} s, {replayed} requests); replay/live speed {live_s / replay_s:.2f}; "
        f"CPU s per 1,000 spans: live {live_cpu / fleet.spans * 1000:.3f}, replay "
        f"{replay_cpu / fleet.spans * 1000:.3f} (replay/live speed by CPU "
        f"{live_cpu / replay_cpu:.2f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
