"""Rows already in the store: spans by (TraceId, SpanId), log records (which carry no id) by
what identifies them as stored. Looked up before writing rows that may have been stored
already (replayed after a crash, re-sent by a sender, or left buffered by a failed write)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from mast_otel.collector.store.backends import Store
from mast_otel.collector.store.encoding import attr_to_str, sql_string, str_map
from mast_otel.processors.records import LogRecord, SpanRecord

# Trace ids per existence query: keeps the statement well under max_query_size.
_IDS_PER_QUERY = 2_000
# Candidates further apart than this in time are looked up by separate queries.
_CLUSTER_GAP_NS = 3_600 * 1_000_000_000
_HEX_ID = re.compile(r"^[0-9a-f]{32}$")

Item = TypeVar("Item")


def _clusters(items: list[Item], time_ns: Callable[[Item], int]) -> list[list[Item]]:
    """`items` in time order, in runs no more than `_CLUSTER_GAP_NS` apart: each run is looked up
    by a query of its own, so one row with a wild clock does not make a look-up scan the whole
    table."""
    clusters: list[list[Item]] = [[]]
    for item in sorted(items, key=time_ns):
        if clusters[-1] and time_ns(item) - time_ns(clusters[-1][-1]) > _CLUSTER_GAP_NS:
            clusters.append([])
        clusters[-1].append(item)
    return clusters


def existing_spans(store: Store, candidates: list[SpanRecord]) -> set[tuple[str, str]]:
    """(TraceId, SpanId) of the candidates already in the store. Looked up by trace id within
    the candidates' time range (clusters of it), which the table's bloom filter and partitions
    make cheap."""
    found: set[tuple[str, str]] = set()
    wanted = {(s.trace_id, s.span_id) for s in candidates}
    for cluster in _clusters(candidates, lambda s: s.start_ns):
        traces = sorted({s.trace_id for s in cluster if _HEX_ID.match(s.trace_id)})
        low, high = cluster[0].start_ns, cluster[-1].start_ns
        for i in range(0, len(traces), _IDS_PER_QUERY):
            listed = ",".join(f"'{t}'" for t in traces[i : i + _IDS_PER_QUERY])
            rows = store.query(
                f"SELECT TraceId AS t, SpanId AS s FROM {store.database}.otel_traces "
                f"WHERE Timestamp >= fromUnixTimestamp64Nano(toInt64({low})) "
                f"AND Timestamp <= fromUnixTimestamp64Nano(toInt64({high})) "
                f"AND TraceId IN ({listed})"
            )
            for row in rows:
                key = (row["t"], row["s"])
                if key in wanted:
                    found.add(key)
    return found


def log_key(record: LogRecord) -> tuple[Any, ...]:
    """What identifies a log record (OTLP logs carry no id): its time, source, trace context,
    event, body and attributes, as stored."""
    return (
        record.service_name,
        record.time_ns or record.observed_time_ns,
        record.trace_id,
        record.span_id,
        record.event_name,
        attr_to_str(record.body),
        tuple(sorted(str_map(record.attributes))),
    )


def existing_logs(store: Store, records: list[LogRecord]) -> set[tuple[Any, ...]]:
    """Keys of the records already in the store, looked up by service and time (the table's
    primary key)."""
    if not records:
        return set()
    wanted = {log_key(r) for r in records}
    found: set[tuple[Any, ...]] = set()
    services = sorted({r.service_name for r in records})
    times = [r.time_ns or r.observed_time_ns for r in records]
    listed = ",".join(sql_string(s) for s in services)
    # Service names are sender-controlled: a huge one must not push the statement past the
    # server's max_query_size (the time range alone still finds the rows).
    where_service = f"ServiceName IN ({listed}) AND " if len(listed) < 32_768 else ""
    for cluster in _clusters(times, lambda t: t):
        rows = store.query(
            f"SELECT ServiceName AS service, toUnixTimestamp64Nano(Timestamp) AS ts, "
            f"TraceId AS trace_id, SpanId AS span_id, EventName AS event, Body AS body, "
            f"LogAttributes AS attributes FROM {store.database}.otel_logs "
            f"WHERE {where_service}"
            f"Timestamp >= fromUnixTimestamp64Nano(toInt64({cluster[0]})) "
            f"AND Timestamp <= fromUnixTimestamp64Nano(toInt64({cluster[-1]}))"
        )
        for row in rows:
            key = (
                row["service"],
                int(row["ts"]),
                row["trace_id"],
                row["span_id"],
                row["event"],
                row["body"],
                tuple(sorted(row["attributes"].items())),
            )
            if key in wanted:
                found.add(key)
    return found
