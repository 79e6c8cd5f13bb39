"""CPU per span of the redaction stage (the request screen, limits and redaction) on the
benchmark fleet's requests, as the pipeline runs it: `python scripts/bench_redaction.py
[--spans N] [--redact-module PATH]` (PATH: another version of processors/redact.py, to
compare)."""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from types import ModuleType

from mast_otel.collector.otlp.decode import decode_spans, parse_trace_request
from mast_otel.processors import redact
from mast_otel.processors.limits import LimitsConfig, RecordLimits
from tests.benchmarks.fleet import build_fleet


def _load(path: str | None) -> ModuleType:
    if path is None:
        return redact
    spec = importlib.util.spec_from_file_location("redact_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--redact-module")
    parser.add_argument(
        "--scan-all", action="store_true", help="scan every record (as JSON requests are)"
    )
    args = parser.parse_args()
    module = _load(args.redact_module)
    fleet = build_fleet(args.spans)
    best = float("inf")
    for _ in range(args.rounds):
        redactor = module.Redactor(module.RedactionConfig())
        limits = RecordLimits(LimitsConfig())
        batches = [decode_spans(parse_trace_request(body)).records for body in fleet.requests]
        started = time.thread_time()
        for body, records in zip(fleet.requests, batches, strict=True):
            scan = args.scan_all or redactor.needs_scan(body, "protobuf")
            for record in records:
                limits.span(record)
                redactor.span(record, scan)
        best = min(best, time.thread_time() - started)
    print(
        f"{fleet.spans} spans: {best / fleet.spans * 1e6:.2f} µs per span "
        f"(screened {redactor.stats['requests_screened']} of {len(fleet.requests)} requests, "
        f"{dict(redactor.stats)})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
