"""End to end: the real OpenTelemetry SDK exports agent runs over real gRPC and HTTP to a
running collector; afterwards the embedded store holds every span once and the expected
findings at the expected spans, and clean runs and near misses raise nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mast_otel.collector.config import Config, load_config, on_free_loopback_ports
from mast_otel.collector.demo.agent import SCENARIOS, AgentRun
from mast_otel.collector.demo.dialects import DIALECTS
from mast_otel.collector.demo.runner import run_agents
from mast_otel.collector.service import Service
from mast_otel.collector.store import ChdbStore, queries


def loopback_config(data_dir: Path) -> Config:
    """The collector on free loopback ports, in one process (these tests look into its
    pipeline; the worker processes have their own tests)."""
    config = on_free_loopback_ports(load_config(), data_dir)
    config.pipeline.workers = 1
    return config


def expected_span(run: AgentRun, mode: str) -> str:
    """Where each scenario's finding must point."""
    if mode == "FM-1.3":  # the third identical pod listing
        pods = [sid for cmd, sid in run.tool_spans if cmd == "kubectl get pods -n shop"]
        return pods[2]
    if mode == "FM-1.4":  # the first model call after the history was lost
        return run.llm_spans[4]
    if mode == "FM-3.2":  # the unchecked change
        return next(sid for cmd, sid in run.tool_spans if "set resources" in cmd)
    raise AssertionError(mode)


@pytest.fixture(scope="module", params=["grpc", "http"])
def delivered(request, tmp_path_factory):
    transport = request.param
    config = loopback_config(tmp_path_factory.mktemp(f"store-{transport}"))
    sent = InMemorySpanExporter()
    service = Service(config)
    service.start()
    try:
        runs = run_agents(service, transport, list(DIALECTS), also=sent)
    finally:
        service.stop()
    store = ChdbStore(config.storage.data_dir, config.storage.database)
    try:
        stored = store.query(
            "SELECT TraceId AS t, SpanId AS s, count() AS n FROM otel.otel_traces "
            "GROUP BY TraceId, SpanId"
        )
        findings = queries.findings(store, queries.FindingFilter(limit=10_000))
        signatures = {r["trace_id"]: r for r in queries.signatures(store, limit=10_000)}
    finally:
        store.close()
    return transport, runs, sent.get_finished_spans(), stored, findings, signatures


def test_every_span_is_stored_exactly_once(delivered):
    _, runs, sent, stored, _, _ = delivered
    sent_ids = {
        (format(s.context.trace_id, "032x"), format(s.context.span_id, "016x")) for s in sent
    }
    stored_ids = {(r["t"], r["s"]) for r in stored}
    assert len(runs) == len(SCENARIOS) * len(DIALECTS)
    assert stored_ids == sent_ids
    assert all(int(r["n"]) == 1 for r in stored)


def test_expected_findings_at_expected_spans_in_every_dialect(delivered):
    _, runs, _, _, findings, _ = delivered
    by_trace: dict[str, list[dict]] = {}
    for f in findings:
        by_trace.setdefault(f["trace_id"], []).append(f)
    for run in runs:
        got = by_trace.get(run.trace_id, [])
        assert sorted(f["mode"] for f in got) == sorted(run.scenario.expected_modes), (
            run.scenario.name,
            run.dialect,
            [(f["mode"], f["rule"], f["message"]) for f in got],
        )
        for f in got:
            assert f["span_id"] == expected_span(run, f["mode"]), (run.scenario.name, run.dialect)
            assert f["span_id"] in f["evidence_span_ids"] or f["mode"] == "FM-3.2"
            assert f["evidence"]["rule"] == f["rule"]
            assert 0 < f["confidence"] <= 1


def test_every_run_has_one_signature_with_its_failure_vector(delivered):
    _, runs, _, _, _, signatures = delivered
    for run in runs:
        sig = signatures[run.trace_id]
        assert sorted(sig["modes"]) == sorted(run.scenario.expected_modes)
        assert sum(sig["failure_vector"]) == len(run.scenario.expected_modes)
        assert len(sig["failure_vector"]) == 14
        assert sig["outcome"] == run.scenario.outcome
        assert sig["service"] == "sre-agent"
        assert sig["model"] == "gpt-4o"
        assert sig["close_reason"] == "root_ended"
        assert int(sig["tool_calls"]) == len(run.tool_spans)
