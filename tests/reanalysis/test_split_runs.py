"""Runs split across replicas, step by step: two replicas' pipelines on one store, driven by one
clock, in the orders the module docstring of collector/reanalysis/split_runs.py argues about;
and the load-balancing exporter's ring (tests/loadbalancing.py) against the upstream test
vectors."""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mast_otel.collector.config import Config, load_config
from mast_otel.collector.demo.agent import SCENARIOS_BY_NAME, SreAgent, tracer_provider
from mast_otel.collector.otlp.decode import decode_spans
from mast_otel.collector.pipeline import Pipeline
from mast_otel.collector.reanalysis.split_runs import SplitRunMerger
from mast_otel.collector.store import ChdbStore, migrate, queries
from mast_otel.collector.store.batching import ClickHouseExporter
from mast_otel.collector.store.exporter import MemoryExporter
from mast_otel.processors.records import SpanRecord
from tests.loadbalancing import HashRing, positions_for


class _Null(SpanExporter):
    def export(self, spans):  # type: ignore[no-untyped-def]
        return SpanExportResult.SUCCESS


def recorded_run(scenario: str) -> list[SpanRecord]:
    """One run of the demo agent through the SDK, as the collector decodes it, in the order
    its spans ended (the order an exporter sends them)."""
    memory = InMemorySpanExporter()
    provider = tracer_provider(_Null(), also=memory)
    SreAgent(provider.get_tracer("test")).run(SCENARIOS_BY_NAME[scenario])
    provider.shutdown()
    return decode_spans(encode_spans(memory.get_finished_spans())).records


def config() -> Config:
    base = load_config()
    return dataclasses.replace(
        base,
        windows=dataclasses.replace(base.windows, grace_s=0.5, idle_timeout_s=1.0),
        storage=dataclasses.replace(base.storage, flush_interval_s=0.2),
        sharding=dataclasses.replace(base.sharding, merge_split_runs=True),
    )


# The replicas' clock in these tests: seconds after T0 (the exporter measures its flush
# interval on the monotonic clock from when it was made, so T0 lies ahead of that, however
# long the test session has been running when these tests make their exporters).
T0 = time.monotonic() + 1_000_000.0


@dataclasses.dataclass
class Replica:
    pipeline: Pipeline
    merger: SplitRunMerger

    def receive(self, spans: list[SpanRecord], now: float) -> None:
        self.pipeline.process_spans(spans, T0 + now)

    def tick(self, now: float) -> None:
        self.pipeline.tick(T0 + now)


def replica(store: ChdbStore, cfg: Config) -> Replica:
    exporter = ClickHouseExporter(store, cfg.storage.batch_max_rows, cfg.storage.flush_interval_s)
    pipeline = Pipeline(cfg, exporter, clock=lambda: 0.0)
    merger = SplitRunMerger(store, cfg, exporter)
    pipeline.on_output(merger.note)
    pipeline.after_export(merger.check)
    return Replica(pipeline, merger)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ChdbStore]:
    shared = ChdbStore(tmp_path / "store")
    migrate(shared)
    yield shared
    shared.close()


def whole(spans: list[SpanRecord]) -> tuple[set[tuple[str, str, str]], dict[str, Any]]:
    """What one collector that saw every span concludes."""
    exporter = MemoryExporter()
    pipeline = Pipeline(config(), exporter, clock=lambda: 0.0)
    pipeline.process_spans(spans, 0.0)
    pipeline.close_all("idle")
    (signature,) = exporter.signatures
    findings = {(f.span_id, f.mode, f.rule) for f in exporter.findings}
    return findings, {"modes": signature.modes, "steps": signature.steps}


def stored(store: ChdbStore) -> tuple[set[tuple[str, str, str]], dict[str, Any]]:
    rows = queries.findings(store, queries.FindingFilter(limit=1000))
    (signature,) = queries.signatures(store, limit=1000)
    findings = {(r["span_id"], r["mode"], r["rule"]) for r in rows}
    return findings, {"modes": signature["modes"], "steps": int(signature["steps"])}


def split_after(spans: list[SpanRecord], tool_command: str) -> int:
    """Index just past the tool span whose arguments hold `tool_command`."""
    for i, span in enumerate(spans):
        if tool_command in str(span.attributes.get("gen_ai.tool.call.arguments", "")):
            return i + 1
    raise AssertionError(tool_command)


def test_partial_false_finding_is_retracted_when_the_check_landed_elsewhere(
    store: ChdbStore,
) -> None:
    """A healthy fix whose check (and root span) moved to another replica: the first replica
    alone sees an unchecked change (FM-3.2), the whole run has none."""
    spans = recorded_run("healthy_fix")
    cut = split_after(spans, "set resources")
    a, b = replica(store, config()), replica(store, config())
    seen_by_a: list[str] = []
    a.pipeline.on_output(lambda out: seen_by_a.extend(f.mode for f in out.findings))
    a.receive(spans[:cut], now=0.0)
    b.receive(spans[cut:], now=0.0)
    # B closes on its root span first, before A has written anything: B sees only its part.
    b.tick(0.6)
    assert b.merger.stats.runs_merged == 0
    # A closes its part when idle, writes its (wrong) FM-3.2, then finds B's spans: merges.
    a.tick(1.5)
    assert seen_by_a == ["FM-3.2"]
    assert a.merger.stats.runs_merged == 1
    assert whole(spans) == stored(store) == (set(), {"modes": [], "steps": len(spans)})


def test_split_repetition_is_found_once_the_parts_meet(store: ChdbStore) -> None:
    """A loop over the pod list, cut in the middle of the loop: neither part repeats enough,
    the whole run does (FM-1.3)."""
    spans = recorded_run("stuck_loop")
    pods = [i for i, s in enumerate(spans) if "get pods" in str(s.attributes)]
    cut = pods[1] + 1
    a, b = replica(store, config()), replica(store, config())
    a.receive(spans[:cut], now=0.0)
    a.tick(0.3)  # A's spans are written early this time
    b.receive(spans[cut:], now=0.4)
    b.tick(1.0)  # B closes on its root and finds A's spans: merges at once
    assert b.merger.stats.runs_merged == 1
    a.tick(2.0)  # A closes its part later and finds B's: merges again, to the same result
    assert a.merger.stats.runs_merged == 1
    findings, signature = whole(spans)
    assert signature["modes"] == ["FM-1.3"]
    assert stored(store) == (findings, signature)
    # Both replicas' partial signatures were cancelled in the runs rollup: one run.
    runs = queries.runs_per_minute(store, queries.Scope(0))
    assert sum(r["runs"] for r in runs) == 1


def test_merged_signature_wins_over_a_partial_one_from_a_clock_ahead(store: ChdbStore) -> None:
    spans = recorded_run("blind_fix")
    cut = len(spans) // 2
    a, b = replica(store, config()), replica(store, config())
    a.receive(spans[:cut], now=0.0)
    b.receive(spans[cut:], now=0.0)
    b.tick(0.6)
    # The replica that wrote the partial signature had its clock an hour ahead.
    store.execute(
        "INSERT INTO otel.mast_signatures SELECT * REPLACE "
        "(Version + 3600000000000 AS Version) FROM otel.mast_signatures"
    )
    a.tick(1.5)
    assert a.merger.stats.runs_merged == 1
    assert stored(store)[1] == whole(spans)[1]


class FlakyStore(ChdbStore):
    """The shared store whose next query fails (a ClickHouse restart, say)."""

    failures = 0

    @classmethod
    def over(cls, store: ChdbStore) -> FlakyStore:
        flaky = cls.__new__(cls)
        flaky.__dict__.update(store.__dict__)
        return flaky

    def query(self, sql: str) -> list[dict[str, Any]]:
        # The merger's look (the exporter's duplicate check before writing is let through).
        if self.failures and "uniqExact(SpanId)" in sql:
            self.failures -= 1
            raise RuntimeError("connection refused")
        return super().query(sql)


def test_a_failed_look_is_counted_and_retried(store: ChdbStore) -> None:
    spans = recorded_run("healthy_fix")
    cut = split_after(spans, "set resources")
    flaky = FlakyStore.over(store)
    a, b = replica(flaky, config()), replica(store, config())
    b.receive(spans[cut:], now=0.0)
    b.tick(0.6)
    a.receive(spans[:cut], now=0.0)
    flaky.failures = 1
    a.tick(1.5)
    assert (a.merger.stats.check_errors, a.merger.pending) == (1, 1)
    a.tick(1.6)  # within the flush interval: no new look yet
    assert a.merger.stats.runs_merged == 0
    a.tick(1.8)
    assert (a.merger.stats.runs_merged, a.merger.pending) == (1, 0)
    assert stored(store) == whole(spans)


def test_pending_looks_are_bounded_and_drops_counted(store: ChdbStore) -> None:
    cfg = dataclasses.replace(
        config(), sharding=dataclasses.replace(config().sharding, max_pending_checks=2)
    )
    a = replica(store, cfg)
    for scenario in ("healthy_fix", "stuck_loop", "amnesia"):
        a.receive(recorded_run(scenario), now=0.0)
    a.pipeline.close_all("idle")  # three closed runs noted, no look yet
    assert (a.merger.pending, a.merger.stats.checks_dropped) == (2, 1)


# The ring: upstream's own test vectors (consistent_hashing_test.go).


def test_ring_positions_match_upstream() -> None:
    assert sorted(positions_for("endpoint-1", 5)) == [1401, 4175, 14133, 17836, 21667]
    ring = HashRing(["endpoint-1", "endpoint-2"], weight=5)
    assert [p for p, _ in ring.items] == [
        1401,
        4175,
        10240,
        14133,
        15002,
        17836,
        21263,
        21667,
        26806,
        27020,
    ]
    assert (
        HashRing(["endpoint-1", "endpoint-1"], weight=5).items
        == HashRing(["endpoint-1"], weight=5).items
    )


def test_ring_lookup_matches_upstream() -> None:
    ring = HashRing(["endpoint-1", "endpoint-2"])
    assert len(ring.items) == 200
    assert ring.endpoint_for(bytes([1, 2, 0, 0])) == "endpoint-1"
    assert ring.endpoint_for(bytes([128, 128, 0, 0])) == "endpoint-2"
    assert ring.endpoint_for(b"ad-service-7") == "endpoint-1"
    assert ring.endpoint_for(b"get-recommendations-1") == "endpoint-2"


def test_ring_search_finds_the_next_position_and_wraps() -> None:
    ring = HashRing([])
    ring.items = [(p, str(p)) for p in (14, 25, 33, 47, 56, 121, 134, 158, 240, 270, 350)]
    ring._positions = [p for p, _ in ring.items]
    for requested, expected in ((85, 121), (14, 14), (351, 14), (270, 270), (271, 350)):
        assert ring.endpoint_at(requested) == str(expected)


def test_adding_a_replica_moves_only_its_share_and_only_to_it() -> None:
    """What deploy/scale-out.md says a membership change does to routing."""
    rng = random.Random(3)
    trace_ids = [rng.getrandbits(128) for _ in range(20_000)]
    before = HashRing(["mast-otel-0:4317", "mast-otel-1:4317", "mast-otel-2:4317"])
    after = HashRing(
        ["mast-otel-0:4317", "mast-otel-1:4317", "mast-otel-2:4317", "mast-otel-3:4317"]
    )
    moved = [
        (before.endpoint_for_trace(t), after.endpoint_for_trace(t))
        for t in trace_ids
        if before.endpoint_for_trace(t) != after.endpoint_for_trace(t)
    ]
    assert all(new == "mast-otel-3:4317" for _, new in moved)
    assert 0.15 < len(moved) / len(trace_ids) < 0.35
