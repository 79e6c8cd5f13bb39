"""Spans read back from the store as the records the receivers produce.

Stored attribute values are text (as the OpenTelemetry Collector's ClickHouse exporter writes
them); the run attributes (`mast.*`) get their types back here, and the dialect readers coerce
counts, flags and JSON from text, so the steps read back are the steps that were read live.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from mast_otel.collector.store import queries
from mast_otel.collector.store.backends import Store
from mast_otel.processors.conventions import RUN_ATTRIBUTE_TYPES
from mast_otel.processors.records import AttrValue, SpanEvent, SpanLink, SpanRecord


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
