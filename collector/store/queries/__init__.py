"""The questions the command line, dashboards and reports ask the store, as named queries.

Every SQL string the product runs against stored spans, findings, signatures and rollups lives
here, so each is tested once on chDB and runs unchanged on a ClickHouse server or cluster (on a
cluster the same names are Distributed tables). The on-call questions:

- what is failing now, for which model and service: `failing_now` (from the per-minute rollup);
- since when: `failing_since` (the start of the current stretch of a mode's findings);
- how it moves: `findings_per_minute`, `runs_per_minute` (time series for panels and alerts);
- show me the run: `run_timeline` (its spans in order, with the findings at their spans);
- the raw lists: `findings`, `signatures`.

Times go in and come out as Unix nanoseconds (or seconds for per-minute buckets), never as
server-local date strings.
"""

from __future__ import annotations

from mast_otel.collector.store.queries.common import QueryError
from mast_otel.collector.store.queries.results import (
    FindingFilter,
    findings,
    signatures,
    span_counts,
    summary,
)
from mast_otel.collector.store.queries.rollups import (
    Scope,
    failing_now,
    failing_since,
    findings_per_minute,
    runs_per_minute,
)
from mast_otel.collector.store.queries.traces import (
    run_timeline,
    stored_spans,
    trace_bounds,
    trace_ids_between,
)
from mast_otel.collector.store.queries.versions import (
    counted_signature_rows,
    current_signature_rows,
    stored_finding_ids,
)

__all__ = [
    "FindingFilter",
    "QueryError",
    "Scope",
    "counted_signature_rows",
    "current_signature_rows",
    "failing_now",
    "failing_since",
    "findings",
    "findings_per_minute",
    "run_timeline",
    "runs_per_minute",
    "signatures",
    "span_counts",
    "stored_finding_ids",
    "stored_spans",
    "summary",
    "trace_bounds",
    "trace_ids_between",
]
