"""CPU per span that redacting a request before it is written ahead adds to its
acknowledgement (`collector/otlp/redact_request.py`, in the receiving process), on the benchmark
fleet's requests: `python scripts/bench_spool_redaction.py [--spans N]`.

Three cases: the fleet as it is (no rule's hint, no secret-named key, no flag in any
request: two RE2 passes over its bytes, nothing else), every request holding a hint (each
record scanned), and every request carrying a secret (scanned, redacted and serialized
again). Beside them: the protobuf parse of the same requests, which the receivers do anyway."""

from __future__ import annotations

import argparse
import time

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from mast_otel.collector.otlp.redact_request import RequestRedactor
from mast_otel.processors.redact_rules import RedactionConfig
from tests.benchmarks.fleet import build_fleet

SECRET = "AKIAIOSFODNN7EXAMPLE"


def _with_secret(body: bytes) -> bytes:
    request = ExportTraceServiceRequest.FromString(body)
    span = request.resource_spans[0].scope_spans[0].spans[0]
    attribute = span.attributes.add()
    attribute.key, attribute.value.string_value = "tool.output", f"aws_access_key_id={SECRET}"
    return request.SerializeToString()


def _measure(bodies: list[bytes], rounds: int, *, force_scan: bool) -> tuple[float, int]:
    """Best CPU seconds over `rounds` passes, and how many requests changed."""
    best, changed = float("inf"), 0
    for _ in range(rounds):
        redactor = RequestRedactor(RedactionConfig())
        requests = [ExportTraceServiceRequest.FromString(body) for body in bodies]
        started = time.thread_time()
        for body, request in zip(bodies, requests, strict=True):
            # A body that holds a value rule's hint has every record scanned.
            data = body + b" password=" if force_scan else body
            if redactor.redact(request, data, "protobuf"):
                request.SerializeToString()
        best = min(best, time.thread_time() - started)
        changed = redactor.requests_changed
    return best, changed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    fleet = build_fleet(args.spans)
    bodies = list(fleet.requests)
    spans = fleet.spans
    parse = float("inf")
    for _ in range(args.rounds):
        started = time.thread_time()
        for body in bodies:
            ExportTraceServiceRequest.FromString(body)
        parse = min(parse, time.thread_time() - started)
    secret_bodies = [_with_secret(body) for body in bodies]
    for label, data, force in (
        ("no hint (the fleet as it is)", bodies, False),
        ("every request holds a hint", bodies, True),
        ("every request carries a secret", secret_bodies, False),
    ):
        seconds, changed = _measure(data, args.rounds, force_scan=force)
        print(
            f"{label}: {seconds / spans * 1e6:.2f} µs per span "
            f"({changed} of {len(data)} requests changed)"
        )
    print(f"protobuf parse of the same requests: {parse / spans * 1e6:.2f} µs per span")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
