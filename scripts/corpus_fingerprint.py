"""Replay the scenario corpus offline and print a digest of every finding and run signature.

.venv/bin/python scripts/corpus_fingerprint.py [--dump FILE]

The scripted agent (tests/corpus.py, every dialect) records its spans through the real
OpenTelemetry SDK with sequential ids and a clock that steps 10 ms per reading, so two replays
of the same code give the same spans. The spans are encoded as OTLP export requests and fed to
the same pipeline `mast-otel analyze` uses (decode, normalize, run windows, detectors), with no
network. The first line printed is the SHA-256 of the sorted JSON of all findings and
signatures (without their attribution), the second that of the signatures' attribution; the
JSON itself follows (or goes to FILE with --dump).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import itertools
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import opentelemetry.sdk.trace as sdk_trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

from mast_otel.collector.config import load_config
from mast_otel.collector.demo.agent import SreAgent
from mast_otel.collector.demo.dialects import DIALECTS
from mast_otel.collector.otlp.decode import decode_spans
from mast_otel.collector.pipeline import Pipeline
from mast_otel.collector.store.exporter import MemoryExporter
from tests.corpus import CORPUS

START_NS = 1_700_000_000_000_000_000
TICK_NS = 10_000_000
SPANS_PER_REQUEST = 64


class SequentialIds(IdGenerator):
    """Ids in order, so every replay names its spans the same."""

    def __init__(self) -> None:
        self._spans = itertools.count(1)
        self._traces = itertools.count(1)

    def generate_span_id(self) -> int:
        return next(self._spans)

    def generate_trace_id(self) -> int:
        return 0x0AF7651916CD43DD0000000000000000 + next(self._traces)


def record_corpus() -> list[Any]:
    """Every scenario in every dialect, as the SDK's finished spans."""
    ticks = itertools.count()
    real_clock = sdk_trace.time_ns
    sdk_trace.time_ns = lambda: START_NS + next(ticks) * TICK_NS  # type: ignore[assignment]
    try:
        memory = InMemorySpanExporter()
        provider = sdk_trace.TracerProvider(
            resource=sdk_trace.Resource.create({"service.name": "sre-agent"}),
            id_generator=SequentialIds(),
        )
        provider.add_span_processor(SimpleSpanProcessor(memory))
        tracer = provider.get_tracer("mast-otel.demo")
        for dialect in DIALECTS:
            agent = SreAgent(tracer, dialect=dialect)
            for scenario in CORPUS:
                agent.run(scenario, conversation=f"{scenario.name}-{dialect}")
        provider.shutdown()
        return list(memory.get_finished_spans())
    finally:
        sdk_trace.time_ns = real_clock  # type: ignore[assignment]


def analyse(spans: list[Any]) -> tuple[list[Any], list[Any]]:
    """Findings and signatures of the spans, through the offline pipeline."""
    config = load_config()
    exporter = MemoryExporter()
    pipeline = Pipeline(config, exporter, clock=lambda: 0.0)
    depth = config.receivers.max_value_depth
    for i in range(0, len(spans), SPANS_PER_REQUEST):
        request = encode_spans(spans[i : i + SPANS_PER_REQUEST])
        pipeline.process_spans(decode_spans(request, max_value_depth=depth).records)
    pipeline.close_all()
    return exporter.findings, exporter.signatures


# Attribution's fields: digested apart (`attribution_fingerprint`), so the first digest stays
# comparable with stores written before the signature carried them.
ATTRIBUTION_FIELDS = ("decisive_span_id", "decisive_step", "responsible_agent", "attribution_chain")
ATTRIBUTION_DIGEST = ""


def _without_attribution(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in ATTRIBUTION_FIELDS}


def fingerprint() -> tuple[str, str]:
    findings, signatures = analyse(record_corpus())
    rows = {
        "findings": sorted(
            (dataclasses.asdict(f) for f in findings),
            key=lambda r: json.dumps(r, sort_keys=True, default=str),
        ),
        "signatures": sorted(
            (_without_attribution(dataclasses.asdict(s)) for s in signatures),
            key=lambda r: json.dumps(r, sort_keys=True, default=str),
        ),
    }
    text = json.dumps(rows, sort_keys=True, indent=1, default=str)
    blamed = sorted(
        json.dumps([s.trace_id, *(getattr(s, k) for k in ATTRIBUTION_FIELDS)]) for s in signatures
    )
    global ATTRIBUTION_DIGEST
    ATTRIBUTION_DIGEST = hashlib.sha256("\n".join(blamed).encode()).hexdigest()
    return hashlib.sha256(text.encode()).hexdigest(), text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dump", help="write the JSON here instead of printing it")
    args = parser.parse_args()
    digest, text = fingerprint()
    data = json.loads(text)
    print(f"{digest}  findings={len(data['findings'])} signatures={len(data['signatures'])}")
    print(f"{ATTRIBUTION_DIGEST}  attribution")
    if args.dump:
        Path(args.dump).write_text(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
