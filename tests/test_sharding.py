"""Scale-out by trace id: a fleet of collector replicas behind the load-balancing exporter's
trace-id routing finds what one collector finds, run for run, also when replicas are added and
removed while runs are in flight (their spans then land on two or three replicas and must be
merged, not analysed as separate runs).

Every span leaves the real OpenTelemetry SDK once and goes two ways: through a real OTLP/gRPC
exporter to a single collector (the baseline), and through the routing of the load-balancing
exporter (tests/loadbalancing.py, reimplemented from its source) to real OTLP/gRPC exporters
of several in-process collectors. The baseline and the fleet write to two databases of one
embedded store, so the comparison is exact: same spans, same clocks.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator

from mast_otel.collector.config import Config, load_config
from mast_otel.collector.demo.agent import SCENARIOS, AgentRun, SreAgent
from mast_otel.collector.demo.dialects import DIALECTS
from mast_otel.collector.service import Service
from mast_otel.collector.store import ChdbStore, queries
from mast_otel.processors.window import WindowOutput
from tests.loadbalancing import HashRing, TraceIdRouter


class SeededIds(IdGenerator):
    """Repeatable trace and span ids, so which replica a run goes to is the same every run."""

    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)

    def generate_span_id(self) -> int:
        return self._random.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self._random.getrandbits(128) or 1


class DatabaseView(ChdbStore):
    """The one embedded store seen under another database name; closing it leaves the shared
    session open (chDB serves one session per process)."""

    @classmethod
    def of(cls, store: ChdbStore, database: str) -> DatabaseView:
        view = cls.__new__(cls)
        view.__dict__.update(store.__dict__)
        view.database = database
        return view

    def close(self) -> None:
        return None


def replica_config(fleet: bool, merge: bool = True) -> Config:
    config = load_config()
    receivers = dataclasses.replace(
        config.receivers,
        grpc=dataclasses.replace(config.receivers.grpc, endpoint="127.0.0.1:0"),
        http=dataclasses.replace(config.receivers.http, enabled=False),
    )
    return dataclasses.replace(
        config,
        receivers=receivers,
        # A replica that holds only part of a run (no root span) closes it for being idle.
        windows=dataclasses.replace(config.windows, idle_timeout_s=1.0),
        storage=dataclasses.replace(
            config.storage, database="fleet" if fleet else "baseline", flush_interval_s=0.2
        ),
        sharding=dataclasses.replace(config.sharding, merge_split_runs=fleet and merge),
        # Each replica in one process: the replicas here share this test's process.
        pipeline=dataclasses.replace(config.pipeline, workers=1),
    )


@dataclasses.dataclass
class Outcome:
    runs: list[AgentRun]
    baseline_findings: list[dict[str, Any]]
    baseline_signatures: dict[str, dict[str, Any]]
    fleet_findings: list[dict[str, Any]]
    fleet_signatures: dict[str, dict[str, Any]]
    routes: dict[str, set[str]]
    # What each replica concluded live from its own part of each run, before any merge.
    live_steps: dict[str, list[int]]
    merged: int
    checked: int


def wait_until(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the collectors to close every run")
        time.sleep(0.05)


def run_fleet(
    store: ChdbStore,
    replicas: int,
    ring_for: Callable[[list[str], int], HashRing],
    merge: bool = True,
) -> Outcome:
    for database in ("baseline", "fleet"):
        store.execute(f"DROP DATABASE IF EXISTS {database}")
    baseline = Service(replica_config(fleet=False), DatabaseView.of(store, "baseline"))
    fleet = [
        Service(replica_config(fleet=True, merge=merge), DatabaseView.of(store, "fleet"))
        for _ in range(replicas)
    ]
    live_steps: dict[str, list[int]] = {}

    def remember(out: WindowOutput) -> None:
        for signature in out.signatures:
            live_steps.setdefault(signature.trace_id, []).append(signature.steps)

    for service in fleet:
        service.on_output(remember)
    for service in [baseline, *fleet]:
        service.start()
    # The ring hashes replica names, as the exporter's DNS resolver sees them; stable names
    # (not the free ports the test got) keep the routing, and so the test, the same each run.
    names = [f"mast-otel-{i}.mast-otel-headless:4317" for i in range(len(fleet))]
    endpoints = [f"127.0.0.1:{s.grpc_port}" for s in fleet]
    router = TraceIdRouter(
        {
            n: OTLPSpanExporter(endpoint=e, insecure=True)
            for n, e in zip(names, endpoints, strict=True)
        },
        lambda n: ring_for(names, n),
    )
    direct = OTLPSpanExporter(endpoint=f"127.0.0.1:{baseline.grpc_port}", insecure=True)
    provider = TracerProvider(
        resource=Resource.create({"service.name": "sre-agent"}), id_generator=SeededIds(7)
    )
    # Span by span, as they end: the ring can change between two spans of one run.
    provider.add_span_processor(SimpleSpanProcessor(direct))
    provider.add_span_processor(SimpleSpanProcessor(router))
    runs: list[AgentRun] = []
    try:
        for dialect in DIALECTS:
            agent = SreAgent(provider.get_tracer("sharding-test"), dialect=dialect)
            for scenario in SCENARIOS:
                runs.append(agent.run(scenario, conversation=f"{scenario.name}-{dialect}"))
        everyone = [baseline, *fleet]
        wait_until(lambda: all(s.pipeline.windows.active_runs == 0 for s in everyone))
        wait_until(lambda: all(s.split_runs is None or s.split_runs.pending == 0 for s in fleet))
    finally:
        provider.shutdown()
        for service in [baseline, *fleet]:
            service.stop()
    base = DatabaseView.of(store, "baseline")
    shared = DatabaseView.of(store, "fleet")
    everything = queries.FindingFilter(limit=100_000)
    return Outcome(
        runs=runs,
        baseline_findings=queries.findings(base, everything),
        baseline_signatures={r["trace_id"]: r for r in queries.signatures(base, limit=100_000)},
        fleet_findings=queries.findings(shared, everything),
        fleet_signatures={r["trace_id"]: r for r in queries.signatures(shared, limit=100_000)},
        routes=dict(router.routes),
        live_steps=live_steps,
        merged=sum(s.split_runs.stats.runs_merged for s in fleet if s.split_runs),
        checked=sum(s.split_runs.stats.runs_checked for s in fleet if s.split_runs),
    )


def static_ring(endpoints: list[str], _: int) -> HashRing:
    return HashRing(endpoints)


# Replicas come and go every few spans: 2 of 3, then all 3, then the other two, then one
# alone (which sends it every trace), ...: runs get split over two and over three replicas.
MEMBERSHIP = ((0, 1), (0, 1, 2), (1, 2), (0,), (0, 2), (2,), (0, 1, 2), (1,))
SPANS_PER_CHANGE = 7


def churning_ring(endpoints: list[str], routed: int) -> HashRing:
    members = MEMBERSHIP[(routed // SPANS_PER_CHANGE) % len(MEMBERSHIP)]
    return HashRing([endpoints[i] for i in members])


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChdbStore]:
    shared = ChdbStore(Path(tmp_path_factory.mktemp("sharding")))
    yield shared
    shared.close()


@pytest.fixture(scope="module")
def static(store: ChdbStore) -> Outcome:
    return run_fleet(store, 3, static_ring)


@pytest.fixture(scope="module")
def churn(store: ChdbStore) -> Outcome:
    return run_fleet(store, 3, churning_ring)


def finding_key(row: dict[str, Any]) -> tuple[str, str, str, str]:
    return (row["trace_id"], row["span_id"], row["mode"], row["rule"])


def assert_same_results(outcome: Outcome) -> None:
    assert len(outcome.baseline_signatures) == len(SCENARIOS) * len(DIALECTS)
    differing = {
        trace: {
            key: (value, outcome.baseline_signatures[trace].get(key))
            for key, value in signature.items()
            if outcome.baseline_signatures[trace].get(key) != value
        }
        for trace, signature in outcome.fleet_signatures.items()
        if signature != outcome.baseline_signatures.get(trace)
    }
    assert not differing, f"fleet vs one collector, per field: {differing}"
    assert outcome.fleet_signatures == outcome.baseline_signatures
    base = sorted(outcome.baseline_findings, key=finding_key)
    fleet = sorted(outcome.fleet_findings, key=finding_key)
    assert [finding_key(r) for r in fleet] == [finding_key(r) for r in base]
    assert fleet == base
    # The baseline found what each scenario is built to show, so the comparison is not empty.
    for run in outcome.runs:
        modes = outcome.baseline_signatures[run.trace_id]["modes"]
        assert sorted(modes) == sorted(run.scenario.expected_modes)


def test_static_ring_spreads_runs_and_keeps_each_whole(static: Outcome) -> None:
    used = {endpoint for endpoints in static.routes.values() for endpoint in endpoints}
    assert len(used) == 3
    assert all(len(endpoints) == 1 for endpoints in static.routes.values())
    assert static.merged == 0
    assert static.checked == len(static.runs)


def test_static_ring_finds_what_one_collector_finds(static: Outcome) -> None:
    assert_same_results(static)


def test_replicas_changing_mid_run_split_runs_across_replicas(churn: Outcome) -> None:
    split = {t for t, endpoints in churn.routes.items() if len(endpoints) > 1}
    assert len(split) >= 5, f"only {len(split)} runs were split; the test would prove little"
    assert any(len(churn.routes[t]) == 3 for t in split), "no run reached three replicas"
    for trace_id in split:
        whole = int(churn.baseline_signatures[trace_id]["steps"])
        # Each replica saw only its part of the run live ...
        assert len(churn.live_steps[trace_id]) == len(churn.routes[trace_id])
        assert all(steps < whole for steps in churn.live_steps[trace_id])
    # ... and at least one of them found the rest in the store and merged.
    assert churn.merged >= len(split)


def test_split_runs_are_merged_into_what_one_collector_finds(churn: Outcome) -> None:
    assert_same_results(churn)


def test_without_the_merge_split_runs_keep_partial_results(store: ChdbStore) -> None:
    """The control: the same churn with `sharding.merge_split_runs` off leaves every split run
    with the signature of a part, so the merge is what makes the results above whole."""
    unmerged = run_fleet(store, 3, churning_ring, merge=False)
    split = {t for t, endpoints in unmerged.routes.items() if len(endpoints) > 1}
    assert split
    for trace_id in split:
        part = int(unmerged.fleet_signatures[trace_id]["steps"])
        assert part < int(unmerged.baseline_signatures[trace_id]["steps"])
    whole = {t for t in unmerged.routes if t not in split}
    for trace_id in whole:
        assert unmerged.fleet_signatures[trace_id] == unmerged.baseline_signatures[trace_id]
