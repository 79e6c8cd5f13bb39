"""Analysis of whole traces read back from the store.

The spans table holds every span any collector replica received, so a trace whose spans were
split across replicas (the load balancer moved its trace id when replicas came or went) is
whole there even when no single replica saw all of it. `analyze_stored_traces` runs the same
pipeline as `serve` over such traces and returns their findings and signatures, as one
collector that had seen every span would have produced them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from mast_otel.collector.config import Config
from mast_otel.collector.pipeline import Pipeline
from mast_otel.collector.store.backends import Store
from mast_otel.collector.store.exporter import MemoryExporter
from mast_otel.collector.store.stored_spans import read_stored_spans
from mast_otel.processors.model import Finding, RunSignature

# A run read back from the store has no arrival times; a run without a root span is closed as
# a live collector would have closed it, for being idle.
CLOSE_REASON_WITHOUT_ROOT = "idle"


@dataclass
class StoredAnalysis:
    """Findings and one signature per trace, from the spans in the store. Unpacks as
    `findings, signatures = analyze_stored_traces(...)`."""

    findings: list[Finding] = field(default_factory=list)
    signatures: list[RunSignature] = field(default_factory=list)
    spans_read: int = 0

    def __iter__(self) -> Iterator[Any]:
        return iter((self.findings, self.signatures))


def analyze_stored_traces(store: Store, config: Config, trace_ids: Iterable[str]) -> StoredAnalysis:
    """Run the detectors over the whole of each trace as stored. Timing rules read span
    timestamps, not arrival, so the result does not depend on when or where spans arrived.
    Writes nothing (see `collector.reanalysis.backfill.write_analysis`)."""
    spans = read_stored_spans(store, trace_ids)
    exporter = MemoryExporter()
    # The deterministic detectors only: a semantic judge's verdicts arrive on their own.
    config = dataclasses.replace(config, judge=dataclasses.replace(config.judge, enabled=False))
    pipeline = Pipeline(config, exporter, clock=lambda: 0.0)
    pipeline.process_spans(spans, now=0.0)
    pipeline.close_all(CLOSE_REASON_WITHOUT_ROOT)
    return StoredAnalysis(exporter.findings, exporter.signatures, len(spans))
