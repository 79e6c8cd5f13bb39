"""Storage figures on the embedded store: columnar insert rate, backfill rate, and the cost of a
second (no-op) backfill. Prints figures; asserts nothing.

    .venv/bin/python scripts/bench_storage.py [--traces 2000] [--spans 20]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

from mast_otel.collector.config import load_config
from mast_otel.collector.reanalysis.backfill import backfill
from mast_otel.collector.store import ChdbStore, migrate
from mast_otel.collector.store.batching import ClickHouseExporter
from mast_otel.processors.ids import stable_hex
from mast_otel.processors.records import SpanRecord

T0 = 1_800_000_000_000_000_000


def agent_run(n: int, spans: int) -> list[SpanRecord]:
    """A root span and tool calls, with a repeated call now and then (FM-1.3 material)."""
    trace = stable_hex("bench", str(n))
    root = stable_hex("root", str(n), length=16)
    start = T0 + n * 10_000_000_000
    out = [
        SpanRecord(
            trace,
            root,
            "",
            "invoke_agent sre",
            start,
            start + spans * 100_000_000,
            service_name="bench",
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "sre"},
        )
    ]
    for i in range(spans - 1):
        command = "kubectl get pods -n shop" if i % 4 == 0 else f"kubectl logs pod-{i}"
        t = start + (i + 1) * 100_000_000
        out.append(
            SpanRecord(
                trace,
                stable_hex("s", str(n), str(i), length=16),
                root,
                "execute_tool shell",
                t,
                t + 50_000_000,
                service_name="bench",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "shell",
                    "gen_ai.tool.call.arguments": json.dumps({"cmd": command}),
                    "gen_ai.tool.call.result": "pod-1 Running",
                },
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--traces", type=int, default=2000)
    parser.add_argument("--spans", type=int, default=20)
    args = parser.parse_args()
    config = load_config()
    with tempfile.TemporaryDirectory() as data_dir:
        store = ChdbStore(data_dir)
        migrate(store)
        exporter = ClickHouseExporter(store, config.storage.batch_max_rows, 3600)
        runs = [agent_run(n, args.spans) for n in range(args.traces)]
        spans = sum(len(r) for r in runs)
        started = time.perf_counter()
        for run in runs:
            exporter.add_spans(run)
            if exporter.buffered_rows >= config.storage.batch_max_rows:
                exporter.flush(0, force=True)
        exporter.flush(0, force=True)
        insert_s = time.perf_counter() - started
        print(
            f"insert: {spans} spans in {insert_s:.2f}s = {spans / insert_s:,.0f} spans/s "
            f"({exporter.stats.batches_written} batches)"
        )
        window = (T0 - 10**9, T0 + (args.traces + 1) * 10_000_000_000)
        first = backfill(store, config, *window)
        print(
            f"backfill: {first.traces} traces ({spans} spans) in {first.seconds:.2f}s = "
            f"{first.traces / first.seconds:,.0f} traces/s, {spans / first.seconds:,.0f} "
            f"spans/s; {first.findings_written} findings, {first.signatures_written} "
            f"signatures written"
        )
        second = backfill(store, config, *window)
        print(
            f"backfill again: {second.seconds:.2f}s, {second.findings_written} findings and "
            f"{second.signatures_written} signatures written"
        )
        store.close()


if __name__ == "__main__":
    main()
