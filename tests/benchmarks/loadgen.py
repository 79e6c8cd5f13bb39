"""Sends a pre-built fleet of agent runs to an OTLP receiver on loopback, from its own
process, as fast as the receiver takes them (retrying refusals), for a fixed number of spans
or a duration, then stops. Writes what it saw as JSON: acknowledged spans, refusals, and when
each run's last span was acknowledged (for end-to-end latency).

    python -m tests.benchmarks.loadgen --transport grpc --endpoint 127.0.0.1:4317 \\
        --spans 100000 --threads 2 --out /tmp/loadgen.json
"""

from __future__ import annotations

import argparse
import http.client
import ipaddress
import json
import sys
import threading
import time
from dataclasses import dataclass, field

import grpc

from tests.benchmarks.fleet import Fleet, build_fleet

TRACE_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def _loopback_only(host: str) -> None:
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        if host == "localhost":
            return
    raise SystemExit(f"refusing to send load to {host}: loopback addresses only")


@dataclass
class Tally:
    acked_spans: int = 0
    acked_requests: int = 0
    refusals: int = 0
    errors: int = 0
    run_acked_at: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Sender:
    def __init__(self, transport: str, endpoint: str) -> None:
        self.transport = transport
        self.endpoint = endpoint
        if transport == "grpc":
            self.channel = grpc.insecure_channel(
                endpoint, options=[("grpc.max_send_message_length", 64 * 1024 * 1024)]
            )
            self.call = self.channel.unary_unary(
                TRACE_EXPORT, request_serializer=lambda b: b, response_deserializer=lambda b: b
            )
        else:
            host, port = endpoint.rsplit(":", 1)
            self.conn = http.client.HTTPConnection(host, int(port), timeout=30)

    def send(self, body: bytes) -> str:
        """ "ok", "refused" (retry later) or "error"."""
        if self.transport == "grpc":
            try:
                self.call(body, timeout=30)
                return "ok"
            except grpc.RpcError as exc:
                code = exc.code()  # type: ignore[attr-defined]
                if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED):
                    return "refused"
                return "error"
        try:
            self.conn.request(
                "POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"}
            )
            response = self.conn.getresponse()
            response.read()
        except (OSError, http.client.HTTPException):
            self.conn.close()
            return "refused"
        if response.status == 200:
            return "ok"
        return "refused" if response.status in (429, 503) else "error"


def send_fleet(
    fleet: Fleet, transport: str, endpoint: str, threads: int, deadline_s: float
) -> tuple[Tally, float, float]:
    tally = Tally()
    cursor = iter(range(len(fleet.requests)))
    cursor_lock = threading.Lock()
    stop_at = time.monotonic() + deadline_s

    def work() -> None:
        sender = _Sender(transport, endpoint)
        while time.monotonic() < stop_at:
            with cursor_lock:
                index = next(cursor, None)
            if index is None:
                return
            body = fleet.requests[index]
            backoff = 0.05
            while time.monotonic() < stop_at:
                outcome = sender.send(body)
                if outcome == "ok":
                    now = time.time()
                    with tally.lock:
                        tally.acked_requests += 1
                        tally.acked_spans += fleet.span_counts[index]
                        for trace_id in fleet.last_span_of[index]:
                            tally.run_acked_at[trace_id] = now
                    break
                with tally.lock:
                    if outcome == "refused":
                        tally.refusals += 1
                    else:
                        tally.errors += 1
                if outcome == "error":
                    break
                time.sleep(backoff)
                backoff = min(backoff * 2, 1.0)

    started_wall, started = time.time(), time.monotonic()
    workers = [threading.Thread(target=work) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return tally, started_wall, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transport", choices=["grpc", "http"], default="grpc")
    parser.add_argument("--endpoint", required=True, help="HOST:PORT on loopback")
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--concurrent-runs", type=int, default=500)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--duration", type=float, default=300.0, help="stop after this long")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    _loopback_only(args.endpoint.rsplit(":", 1)[0].strip("[]"))
    fleet = build_fleet(args.spans, args.batch, args.concurrent_runs)
    print(f"fleet ready: {fleet.spans} spans, {fleet.runs} runs", file=sys.stderr, flush=True)
    tally, started_wall, elapsed = send_fleet(
        fleet, args.transport, args.endpoint, args.threads, args.duration
    )
    with open(args.out, "w") as out:
        json.dump(
            {
                "transport": args.transport,
                "fleet_spans": fleet.spans,
                "fleet_runs": fleet.runs,
                "request_bytes": sum(len(r) for r in fleet.requests),
                "acked_spans": tally.acked_spans,
                "acked_requests": tally.acked_requests,
                "refusals": tally.refusals,
                "errors": tally.errors,
                "started_wall": started_wall,
                "send_seconds": elapsed,
                "run_acked_at": tally.run_acked_at,
            },
            out,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
