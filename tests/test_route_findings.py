"""Analysing runs split by `route` over N pipelines finds exactly what one pipeline finds:
the same findings and the same signatures, on the scenario corpus in every span dialect
(interleaved as a fleet sends them) and on log-only Codex conversations whose conversation id
sits on the record or on the resource. Each pipeline stands for one worker's windows and
detectors, driven as offline analysis drives them."""

from __future__ import annotations

import dataclasses
import json
import random
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from mast_otel.collector.config import Config
from mast_otel.collector.otlp.decode import (
    decode_logs,
    decode_spans,
    parse_logs_request,
    parse_trace_request,
)
from mast_otel.collector.pipeline import Pipeline
from mast_otel.collector.store.exporter import MemoryExporter
from mast_otel.collector.workers.route import route_request
from tests.benchmarks.fleet import build_fleet

T0 = 1_790_000_000_000_000_000


def codex_requests(seed: int) -> list[bytes]:
    """Eight Codex conversations, their events interleaved over requests of a few records;
    half carry `conversation.id` on each record, the others on the record for some events and
    only on their resource for the rest (one run either way)."""
    rng = random.Random(seed)
    events: list[tuple[str, bool, dict[str, Any]]] = []
    for c in range(8):
        conversation = f"conv-{c}"
        events.append(
            (conversation, False, {"event.name": "codex.user_prompt", "prompt_length": 40})
        )
        for i in range(rng.randint(2, 5)):
            events.append(
                (
                    conversation,
                    c % 2 == 1 and i % 2 == 0,
                    {
                        "event.name": "codex.tool_result",
                        "tool_name": "shell",
                        "call_id": f"call_{i}",
                        "arguments": json.dumps({"command": ["pytest", "-q"]}),
                        "duration_ms": 900,
                        "success": "false",
                        "output": "1 failed, 4 passed in 0.9s",
                    },
                )
            )
    # Each conversation's events in their own order, conversations interleaved.
    queues: dict[str, list[tuple[str, bool, dict[str, Any]]]] = {}
    for event in events:
        queues.setdefault(event[0], []).append(event)
    ordered = []
    while queues:
        conversation = rng.choice(sorted(queues))
        ordered.append(queues[conversation].pop(0))
        if not queues[conversation]:
            del queues[conversation]
    bodies = []
    for start in range(0, len(ordered), 5):
        request = ExportLogsServiceRequest()
        for n, (conversation, on_resource, attributes) in enumerate(ordered[start : start + 5]):
            resource_logs = request.resource_logs.add()
            resource = resource_logs.resource.attributes
            resource.add(key="service.name").value.string_value = "codex_cli_rs"
            if on_resource:
                resource.add(key="conversation.id").value.string_value = conversation
            record = resource_logs.scope_logs.add().log_records.add(
                time_unix_nano=T0 + (start + n) * 1_000_000_000,
                event_name=attributes["event.name"],
            )
            if not on_resource:
                record.attributes.add(key="conversation.id").value.string_value = conversation
            record.attributes.add(key="model").value.string_value = "gpt-5-codex"
            for key, value in attributes.items():
                if isinstance(value, int):
                    record.attributes.add(key=key).value.int_value = value
                else:
                    record.attributes.add(key=key).value.string_value = value
        bodies.append(request.SerializeToString())
    return bodies


def analyse(stream: list[tuple[str, bytes]], n: int) -> tuple[list[str], list[str]]:
    """Findings and signatures (canonical text, sorted) of the stream split over n pipelines."""
    exporters = [MemoryExporter() for _ in range(n)]
    pipelines = [Pipeline(Config(), exporter, clock=lambda: 0.0) for exporter in exporters]
    for signal, body in stream:
        for shard, part in route_request(body, n, signal).shards.items():  # type: ignore[arg-type]
            if signal == "traces":
                pipelines[shard].process_spans(decode_spans(parse_trace_request(part)).records)
            else:
                pipelines[shard].process_logs(decode_logs(parse_logs_request(part)).records)
    for pipeline in pipelines:
        pipeline.close_all()

    def text(item: Any) -> str:
        return json.dumps(dataclasses.asdict(item), sort_keys=True, default=str)

    findings = sorted(text(f) for e in exporters for f in e.findings)
    signatures = sorted(text(s) for e in exporters for s in e.signatures)
    return findings, signatures


def test_runs_split_over_workers_find_exactly_what_one_finds():
    fleet = build_fleet(4_000, batch_spans=128, concurrent_runs=60, seed=3)
    stream: list[tuple[str, bytes]] = [("traces", body) for body in fleet.requests]
    codex = [("logs", body) for body in codex_requests(seed=4)]
    # Logs and spans arrive interleaved, as from two kinds of agent at once.
    for i, item in enumerate(codex):
        stream.insert(min(len(stream), i * 3), item)

    one_findings, one_signatures = analyse(stream, 1)
    assert len(one_signatures) == fleet.runs + 8
    assert one_findings  # the corpus has failures to find
    assert sum('"conversation_id": "conv-' in s for s in one_signatures) == 8
    for n in (2, 3, 5):
        findings, signatures = analyse(stream, n)
        assert signatures == one_signatures
        assert findings == one_findings
