"""Show me the run: stored spans of traces (each once), the time bounds and ids of traces,
and one run's timeline with its findings at their spans."""

from __future__ import annotations

from typing import Any

from mast_otel.collector.store.backends import Store
from mast_otel.collector.store.queries.common import NS, checked_trace_id, id_list
from mast_otel.collector.store.queries.results import FindingFilter, findings, signatures


def trace_bounds(store: Store, trace_ids: list[str]) -> dict[str, tuple[int, int]]:
    """First and last span time (Unix seconds) of each trace, from the trace-id index the
    OpenTelemetry exporter's schema keeps (`otel_traces_trace_id_ts`)."""
    if not trace_ids:
        return {}
    rows = store.query(
        f"""
        SELECT TraceId AS trace_id, toUnixTimestamp(min(Start)) AS start,
               toUnixTimestamp(max(End)) AS end
        FROM {store.database}.otel_traces_trace_id_ts
        WHERE TraceId IN ({id_list(trace_ids)})
        GROUP BY TraceId
        """
    )
    return {r["trace_id"]: (int(r["start"]), int(r["end"])) for r in rows}


def trace_ids_between(store: Store, since_ns: int, until_ns: int) -> list[str]:
    """Traces whose first span starts in [since, until), oldest first, from the trace-id
    index (its times are whole seconds, so the range is too)."""
    rows = store.query(
        f"""
        SELECT TraceId AS trace_id
        FROM {store.database}.otel_traces_trace_id_ts
        GROUP BY TraceId
        HAVING min(Start) >= toDateTime({int(since_ns // NS)})
           AND min(Start) < toDateTime({int(-(-until_ns // NS))})
        ORDER BY min(Start), TraceId
        """
    )
    return [r["trace_id"] for r in rows]


_SPAN_COLUMNS = """
    TraceId AS trace_id, SpanId AS span_id, ParentSpanId AS parent_span_id,
    TraceState AS trace_state, SpanName AS name, SpanKind AS kind,
    ServiceName AS service_name, ResourceAttributes AS resource_attributes,
    ScopeName AS scope_name, ScopeVersion AS scope_version, SpanAttributes AS attributes,
    toString(toUnixTimestamp64Nano(Timestamp)) AS start_ns, toString(Duration) AS duration_ns,
    StatusCode AS status_code, StatusMessage AS status_message,
    arrayMap(t -> toString(toUnixTimestamp64Nano(t)), Events.Timestamp) AS event_times_ns,
    Events.Name AS event_names, Events.Attributes AS event_attributes,
    Links.TraceId AS link_trace_ids, Links.SpanId AS link_span_ids,
    Links.TraceState AS link_trace_states, Links.Attributes AS link_attributes
"""


def stored_spans(store: Store, trace_ids: list[str]) -> list[dict[str, Any]]:
    """Every stored span of the traces, oldest first, each once (a span stored twice, by two
    collectors or a retried batch, comes back once). The trace-id index narrows the time range
    first, so only the partitions holding those traces are read. The bounds are DateTime64
    like the column: compared with a DateTime, skip indexes have been seen to drop matching
    granules."""
    bounds = trace_bounds(store, trace_ids)
    if not bounds:
        return []
    low = min(b[0] for b in bounds.values())
    high = max(b[1] for b in bounds.values()) + 1
    return store.query(
        f"""
        SELECT {_SPAN_COLUMNS}
        FROM {store.database}.otel_traces
        WHERE TraceId IN ({id_list(list(bounds))})
          AND Timestamp >= toDateTime64({low}, 9) AND Timestamp < toDateTime64({high}, 9)
        ORDER BY Timestamp, TraceId, SpanId
        LIMIT 1 BY TraceId, SpanId
        """
    )


def run_timeline(store: Store, trace_id: str) -> dict[str, Any] | None:
    """One run as on-call reads it: its signature, and its spans in start order (offset from
    the run's start, duration, depth under the root, status) with the findings shown at each
    span and the findings each span is evidence for. None if the store has no span of it."""
    trace_id = checked_trace_id(trace_id)
    spans = stored_spans(store, [trace_id])
    if not spans:
        return None
    found = findings(store, FindingFilter(trace_id=trace_id, limit=100_000))
    sig = signatures(store, trace_id=trace_id, limit=1)
    at: dict[str, list[dict[str, Any]]] = {}
    evidence_for: dict[str, list[str]] = {}
    for f in found:
        brief = {
            "mode": f["mode"],
            "mode_name": f["mode_name"],
            "rule": f["rule"],
            "fatal": int(f["fatal"]),
            "confidence": f["confidence"],
            "message": f["message"],
            "intervention": f["intervention"],
        }
        at.setdefault(f["span_id"], []).append(brief)
        for span_id in f["evidence_span_ids"]:
            evidence_for.setdefault(span_id, []).append(f["mode"])
    parents = {s["span_id"]: s["parent_span_id"] for s in spans}
    start = min(int(s["start_ns"]) for s in spans)
    timeline = []
    for s in sorted(spans, key=lambda r: (int(r["start_ns"]), r["span_id"])):
        depth, parent, seen = 0, s["parent_span_id"], {s["span_id"]}
        while parent and parent in parents and parent not in seen:
            seen.add(parent)
            depth += 1
            parent = parents[parent]
        timeline.append(
            {
                "span_id": s["span_id"],
                "parent_span_id": s["parent_span_id"],
                "name": s["name"],
                "service": s["service_name"],
                "depth": depth,
                "offset_ms": (int(s["start_ns"]) - start) / 1e6,
                "duration_ms": int(s["duration_ns"]) / 1e6,
                "status": s["status_code"],
                "status_message": s["status_message"],
                "findings": at.get(s["span_id"], []),
                "evidence_for": sorted(set(evidence_for.get(s["span_id"], []))),
            }
        )
    return {
        "trace_id": trace_id,
        "start_unix_nano": start,
        "signature": sig[0] if sig else None,
        "spans": timeline,
        "findings": found,
    }
