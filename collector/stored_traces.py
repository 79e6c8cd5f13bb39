"""Analysis of whole traces read back from the store.

The spans table holds every span any collector replica received, so a trace whose spans were
split across replicas (the load balancer moved its trace id when replicas came or went) is
whole there even when no single replica saw all of it. `analyze_stored_traces` runs the same
pipeline as `serve` over such traces and returns their findings and signatures, as one
collector that had seen every span would have produced them.

Stored attribute values are text (as the OpenTelemetry Collector's ClickHouse exporter writes
them); the dialect readers coerce counts, flags and JSON from text, so the steps read back are
the steps that were read live.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from collector import queries
from collector.config import Config
from collector.exporters.base import MemoryExporter
from collector.pipeline import Pipeline
from collector.store import Store
from processors.conventions import RUN_ATTRIBUTE_TYPES
from processors.model import Finding, RunSignature
from processors.records import AttrValue, SpanEvent, SpanLink, SpanRecord

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


def read_stored_spans(store: Store, trace_ids: Iterable[str]) -> list[SpanRecord]:
    """The stored spans of `trace_ids`, one per span id (a span stored twice, by a retry or by
    two replicas, counts once), in start-time order."""
    ids = sorted({t.lower() for t in trace_ids})
    if not ids:
        return []
    return [span_record(row) for row in queries.stored_spans(store, ids)]


def _typed_run_attribute(key: str, text: str) -> AttrValue:
    """A `mast.*` attribute as its sender typed it: stores keep every value as text."""
    kind = RUN_ATTRIBUTE_TYPES.get(key, str)
    if kind is bool:
        word = text.strip().lower()
        return True if word == "true" else False if word == "false" else text
    if kind is int or kind is float:
        try:
            return kind(text)
        except ValueError:
            return text
    if kind is list:
        try:
            value = json.loads(text)
        except ValueError:
            return text
        return value if isinstance(value, list) else text
    return text


def span_record(row: dict[str, Any]) -> SpanRecord:
    """A row of `queries.stored_spans` as the record the receivers would have produced (the
    run attributes with their types back, everything else as stored)."""
    attributes: dict[str, AttrValue] = dict(row["attributes"])
    for key in RUN_ATTRIBUTE_TYPES.keys() & attributes.keys():
        value = attributes[key]
        if isinstance(value, str):
            attributes[key] = _typed_run_attribute(key, value)
    start_ns = int(row["start_ns"])
    return SpanRecord(
        trace_id=row["trace_id"],
        span_id=row["span_id"],
        parent_span_id=row["parent_span_id"],
        name=row["name"],
        start_ns=start_ns,
        end_ns=start_ns + int(row["duration_ns"]),
        kind=row["kind"],
        trace_state=row["trace_state"],
        status_code=row["status_code"],
        status_message=row["status_message"],
        service_name=row["service_name"],
        resource_attributes=dict(row["resource_attributes"]),
        scope_name=row["scope_name"],
        scope_version=row["scope_version"],
        attributes=attributes,
        events=[
            SpanEvent(int(t), name, dict(attrs))
            for t, name, attrs in zip(
                row["event_times_ns"], row["event_names"], row["event_attributes"], strict=False
            )
        ],
        links=[
            SpanLink(trace_id, span_id, state, dict(attrs))
            for trace_id, span_id, state, attrs in zip(
                row["link_trace_ids"],
                row["link_span_ids"],
                row["link_trace_states"],
                row["link_attributes"],
                strict=False,
            )
        ],
    )


def analyze_stored_traces(store: Store, config: Config, trace_ids: Iterable[str]) -> StoredAnalysis:
    """Run the detectors over the whole of each trace as stored. Timing rules read span
    timestamps, not arrival, so the result does not depend on when or where spans arrived.
    Writes nothing (see `collector.backfill.write_analysis`)."""
    spans = read_stored_spans(store, trace_ids)
    exporter = MemoryExporter()
    # The deterministic detectors only: a semantic judge's verdicts arrive on their own.
    config = dataclasses.replace(config, judge=dataclasses.replace(config.judge, enabled=False))
    pipeline = Pipeline(config, exporter, clock=lambda: 0.0)
    pipeline.process_spans(spans, now=0.0)
    pipeline.close_all(CLOSE_REASON_WITHOUT_ROOT)
    return StoredAnalysis(exporter.findings, exporter.signatures, len(spans))
