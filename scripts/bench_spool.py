#!/usr/bin/env python3
"""What durable acknowledgment costs: the spool's write + fsync per request, alone and under
concurrency, and the acknowledgment latency of a real OTLP/gRPC export with
`durability.mode: durable` against `memory`. Prints figures; writes under a temporary
directory (the fsync cost depends on that disk)."""

from __future__ import annotations

import dataclasses
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

from mast_otel.collector.spool import RecordKind, Spool
from tests.test_backpressure import request
from tests.test_end_to_end import loopback_config


def spool_append(directory: Path, size: int, threads: int, per_thread: int) -> tuple[float, float]:
    spool = Spool(directory, 1 << 34, 64 << 20, fsync=True)
    spool.open()
    payload = b"x" * size
    latencies: list[float] = []
    lock = threading.Lock()

    def run() -> None:
        mine = []
        for _ in range(per_thread):
            started = time.perf_counter()
            spool.append(RecordKind.TRACES_PROTOBUF, payload)
            mine.append(time.perf_counter() - started)
        with lock:
            latencies.extend(mine)

    workers = [threading.Thread(target=run) for _ in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    fsyncs_per_request = spool.stats.fsyncs / spool.stats.appends
    spool.close()
    print(
        f"  {size // 1024:>4} KiB x {threads:>2} threads: "
        f"median {statistics.median(latencies) * 1e3:.2f} ms, "
        f"p99 {sorted(latencies)[int(len(latencies) * 0.99)] * 1e3:.2f} ms, "
        f"{len(latencies) / elapsed:,.0f} requests/s, {fsyncs_per_request:.2f} fsyncs per request"
    )
    return statistics.median(latencies), fsyncs_per_request


def export_latency(
    directory: Path, mode: str, count: int = 300, *, redaction: bool = True, secret: bool = False
) -> float:
    """Median acknowledgement of a 100-span export. `redaction=False` turns the rules off;
    `secret` puts a key in one attribute of every request, so it is redacted and serialized
    again before it is spooled."""
    from mast_otel.collector.service import Service

    config = loopback_config(directory)
    config = dataclasses.replace(
        config,
        durability=dataclasses.replace(config.durability, mode=mode),
        redaction=dataclasses.replace(config.redaction, enabled=redaction),
    )
    service = Service(config)
    service.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{service.grpc_port}")
    stub = trace_service_pb2_grpc.TraceServiceStub(channel)
    latencies = []
    try:
        for i in range(count):
            message = request(100, 10_000 + i)
            if secret:
                span = message.resource_spans[0].scope_spans[0].spans[0]
                attribute = span.attributes.add()
                attribute.key = "tool.output"
                attribute.value.string_value = "aws_access_key_id=AKIAIOSFODNN7EXAMPLE"
            started = time.perf_counter()
            stub.Export(message, timeout=30)
            latencies.append(time.perf_counter() - started)
            time.sleep(0.002)
    finally:
        channel.close()
        service.stop()
    return statistics.median(latencies)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        print("spool append + fsync (ack waits for this):")
        for size, threads in ((4096, 1), (65536, 1), (4096, 8), (65536, 8)):
            spool_append(root / f"s-{size}-{threads}", size, threads, 200)
        print("OTLP/gRPC export of 100 spans, median acknowledgment latency:")
        memory = export_latency(root / "memory", "memory")
        durable = export_latency(root / "durable", "durable")
        print(
            f"  memory {memory * 1e3:.2f} ms, durable {durable * 1e3:.2f} ms "
            f"(+{(durable - memory) * 1e3:.2f} ms per request)"
        )
        # Requests are redacted before the spool: what that adds to the acknowledgement.
        plain = export_latency(root / "unredacted", "durable", redaction=False)
        redacted = export_latency(root / "secret", "durable", secret=True)
        print(
            f"  durable without redaction rules {plain * 1e3:.2f} ms, with them "
            f"{durable * 1e3:.2f} ms (request holds no secret), {redacted * 1e3:.2f} ms (one "
            "secret in every request: redacted and serialized again before the spool)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
