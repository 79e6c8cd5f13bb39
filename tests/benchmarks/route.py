"""The routing ceiling: how fast one process splits OTLP requests by run for N workers
(collector/workers/route.py), next to what a full decode of the same requests costs
(collector/otlp/decode.py: parse and decode every span into records), in one run on the same
payloads: the load generator's fleet, 512 spans per request.

    .venv/bin/python -m tests.benchmarks.route [--spans 20000] [--repeat 5] [--json-requests 4]

Times are CPU seconds of this thread, best of `--repeat` passes over all requests (the machine
is shared; the best pass is the least disturbed one). Rates are per core. The router's cache of
recent runs' shards is emptied before each pass, so each run is hashed once per pass, as in live
traffic where a run's spans come over many requests.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from mast_otel.collector.otlp.decode import (
    decode_logs,
    decode_spans,
    parse_logs_request,
    parse_trace_request,
)
from mast_otel.collector.otlp.jsonpb import parse_trace_json
from mast_otel.collector.workers import shard as shard_module
from mast_otel.collector.workers.route import route_logs, route_request, route_traces
from tests.benchmarks.fleet import build_fleet
from tests.fuzzing import to_json

SHARDS = (1, 2, 4, 8)


def best_seconds(requests: list[bytes], work: Callable[[bytes], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        # Each pass meets every run for the first time, as live traffic does once per run.
        shard_module._shard_cache.clear()
        started = time.thread_time()
        for body in requests:
            work(body)
        best = min(best, time.thread_time() - started)
    return best


def log_requests(count: int, batch: int, seed: int = 5) -> list[bytes]:
    """Codex-shaped log events from 500 open conversations: half carry a trace id, half only
    their `conversation.id` (keyed by the run id the normalizer derives from it)."""
    rng = random.Random(seed)
    conversations = [f"conv-{rng.getrandbits(64):016x}" for _ in range(500)]
    trace_ids = {c: rng.getrandbits(128).to_bytes(16, "big") for c in conversations}
    bodies = []
    for _ in range(count):
        request = ExportLogsServiceRequest()
        resource_logs = request.resource_logs.add()
        resource_logs.resource.attributes.add(key="service.name").value.string_value = "codex"
        scope = resource_logs.scope_logs.add()
        for _ in range(batch):
            conversation = rng.choice(conversations)
            record = scope.log_records.add(
                time_unix_nano=time.time_ns(), event_name="codex.tool_result"
            )
            if rng.random() < 0.5:
                record.trace_id = trace_ids[conversation]
            attributes = record.attributes
            attributes.add(key="conversation.id").value.string_value = conversation
            attributes.add(key="tool_name").value.string_value = "shell"
            attributes.add(key="call_id").value.string_value = f"call_{rng.getrandbits(32)}"
            attributes.add(key="arguments").value.string_value = '{"command": ["pytest", "-q"]}'
            attributes.add(key="output").value.string_value = "1 failed, 4 passed " * 20
            attributes.add(key="duration_ms").value.int_value = 900
        bodies.append(request.SerializeToString())
    return bodies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=512, help="spans per request")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--json-requests", type=int, default=4, help="requests also timed as OTLP/JSON (0: none)"
    )
    args = parser.parse_args()

    fleet = build_fleet(args.spans, batch_spans=args.batch)
    requests = fleet.requests
    spans = fleet.spans
    megabytes = sum(len(body) for body in requests) / 1e6
    print(
        f"{len(requests)} requests, {spans:,} spans, {megabytes:.1f} MB "
        f"({megabytes * 1e6 / spans:,.0f} bytes per span), best of {args.repeat} passes\n"
    )

    decode_s = best_seconds(
        requests, lambda body: decode_spans(parse_trace_request(body)), args.repeat
    )
    parse_s = best_seconds(requests, parse_trace_request, args.repeat)
    rows = [
        ("full decode (parse + decode_spans)", decode_s),
        ("protobuf parse alone (no records)", parse_s),
    ]
    for validate in (True, False):
        for n in SHARDS:

            def route(body: bytes, n: int = n, validate: bool = validate) -> object:
                return route_traces(body, n, validate=validate)

            seconds = best_seconds(requests, route, args.repeat)
            how = "validated" if validate else "wire walk only"
            rows.append((f"route N={n} ({how})", seconds))

    print("| what | spans/s per core | MB/s per core | µs per span | speed vs full decode |")
    print("|---|---|---|---|---|")
    for name, seconds in rows:
        print(
            f"| {name} | {spans / seconds:,.0f} | {megabytes / seconds:,.1f} | "
            f"{seconds / spans * 1e6:.2f} | {decode_s / seconds:.1f} |"
        )

    logs = log_requests(len(requests), args.batch)
    log_records = len(logs) * args.batch
    log_mb = sum(len(body) for body in logs) / 1e6
    log_decode = best_seconds(logs, lambda body: decode_logs(parse_logs_request(body)), args.repeat)
    log_route = best_seconds(logs, lambda body: route_logs(body, 4), args.repeat)
    print(
        f"\nLogs ({len(logs)} requests of {args.batch} Codex-shaped records, half with a trace "
        f"id, half keyed by conversation.id; {log_mb:.1f} MB):\n"
    )
    print("| what | records/s per core | MB/s per core | speed vs full decode |")
    print("|---|---|---|---|")
    for name, seconds in (("full decode", log_decode), ("route N=4 (validated)", log_route)):
        print(
            f"| {name} | {log_records / seconds:,.0f} | {log_mb / seconds:,.1f} | "
            f"{log_decode / seconds:.2f} |"
        )

    if args.json_requests:
        subset = [to_json(parse_trace_request(body)) for body in requests[: args.json_requests]]
        json_spans = sum(fleet.span_counts[: args.json_requests])
        json_mb = sum(len(body) for body in subset) / 1e6
        json_decode = best_seconds(
            subset, lambda body: decode_spans(parse_trace_json(body)), args.repeat
        )
        json_route = best_seconds(
            subset, lambda body: route_request(body, 4, "traces", "json"), args.repeat
        )
        print(f"\nOTLP/JSON ({len(subset)} requests, {json_spans:,} spans, {json_mb:.1f} MB):\n")
        print("| what | spans/s per core | MB/s per core | speed vs full decode |")
        print("|---|---|---|---|")
        for name, seconds in (("full decode", json_decode), ("route N=4", json_route)):
            print(
                f"| {name} | {json_spans / seconds:,.0f} | {json_mb / seconds:,.1f} | "
                f"{json_decode / seconds:.2f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
