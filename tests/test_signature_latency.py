"""A run's signature is stored about `windows.grace_s` plus one write after its root span
arrives: the pipeline wakes when a scheduled close falls due and when the eager write of
closed runs' signatures does, instead of waiting for its next regular tick. The ticks here are
set far apart (30 s) so that a signature arriving in time can only have come from those
wake-ups; the stores are real (chDB)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from mast_otel.collector.config import Config, load_config
from mast_otel.collector.pipeline import Pipeline
from mast_otel.collector.store import ChdbStore, migrate
from mast_otel.collector.store.batching import ClickHouseExporter
from mast_otel.collector.store.exporter import MemoryExporter
from mast_otel.processors.records import SpanRecord

TICK_S = 30.0
GRACE_S = 0.2


def config(data_dir: Path) -> Config:
    base = load_config()
    return dataclasses.replace(
        base,
        pipeline=dataclasses.replace(base.pipeline, tick_interval_s=TICK_S),
        windows=dataclasses.replace(base.windows, grace_s=GRACE_S),
        storage=dataclasses.replace(
            base.storage,
            data_dir=str(data_dir),
            flush_interval_s=TICK_S,
            eager_flush_interval_s=0.1,
        ),
    )


def run_spans(trace: int) -> list[SpanRecord]:
    trace_id = f"{trace:032x}"
    start = time.time_ns()
    root = SpanRecord(
        trace_id=trace_id,
        span_id=f"{1:016x}",
        parent_span_id="",
        name="invoke_agent sre-bot",
        start_ns=start,
        end_ns=start + 3_000_000,
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "sre-bot"},
        service_name="sre-bot",
    )
    child = dataclasses.replace(
        root,
        span_id=f"{2:016x}",
        parent_span_id=root.span_id,
        name="execute_tool kubectl",
        start_ns=start + 1_000_000,
        end_ns=start + 2_000_000,
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "kubectl"},
    )
    return [child, root]


def wait_for(condition, limit_s: float) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        if condition():
            return time.monotonic() - started
        time.sleep(0.01)
    return None


def test_a_run_closes_when_its_grace_ends_not_at_the_next_tick(tmp_path):
    exporter = MemoryExporter()
    pipeline = Pipeline(config(tmp_path), exporter)
    pipeline.start()
    try:
        time.sleep(0.1)  # past the first tick, which comes at once
        pipeline.consume_spans(run_spans(1))
        took = wait_for(lambda: bool(exporter.signatures), limit_s=10.0)
    finally:
        pipeline.stop()
    assert took is not None, "the run was not closed within 10 s"
    assert GRACE_S <= took < 5.0, took


def test_a_closed_runs_signature_is_written_when_the_eager_write_is_due(tmp_path):
    store = ChdbStore(tmp_path / "store")
    migrate(store)
    cfg = config(tmp_path)
    exporter = ClickHouseExporter.of(store, cfg.storage)
    pipeline = Pipeline(cfg, exporter)
    pipeline.start()

    try:
        time.sleep(0.1)
        pipeline.consume_spans(run_spans(1))
        first = wait_for(lambda: _count(store) >= 1, limit_s=10.0)
        # A second run right after the first one's write: its signature waits for the eager
        # interval since that write, then is written without a regular tick.
        pipeline.consume_spans(run_spans(2))
        second = wait_for(lambda: _count(store) >= 2, limit_s=10.0)
    finally:
        pipeline.stop()
        store.close()
    assert first is not None and first < 5.0, first
    assert second is not None and second < 5.0, second


def _count(store: ChdbStore) -> int:
    return int(store.query("SELECT count() AS n FROM otel.mast_signatures")[0]["n"])
