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

import json
import re
from dataclasses import dataclass
from typing import Any

from collector.store import Store
from processors.scoring import GroupSummary, ScoringConfig, summarize

_HEX = re.compile(r"^[0-9a-f]{32}$")
_NS = 1_000_000_000
_MODE = re.compile(r"^FM-[1-3]\.[1-6]$")


class QueryError(ValueError):
    """A filter value is malformed; the message says what is expected."""


@dataclass(frozen=True, slots=True)
class FindingFilter:
    trace_id: str | None = None
    mode: str | None = None
    since_ns: int | None = None
    limit: int = 1000


def findings(store: Store, flt: FindingFilter) -> list[dict[str, Any]]:
    """Stored findings, newest first, one row each (duplicates of a re-analysis folded)."""
    where = []
    if flt.trace_id is not None:
        trace_id = flt.trace_id.lower()
        if not _HEX.match(trace_id):
            raise QueryError(f"--trace expects 32 hex characters, got {flt.trace_id!r}")
        where.append(f"TraceId = '{trace_id}'")
    if flt.mode is not None:
        if not _MODE.match(flt.mode):
            raise QueryError(f"--mode expects a code like FM-1.3, got {flt.mode!r}")
        where.append(f"Mode = '{flt.mode}'")
    if flt.since_ns is not None:
        where.append(f"Timestamp >= fromUnixTimestamp64Nano({int(flt.since_ns)})")
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    rows = store.query(
        f"""
        SELECT TraceId AS trace_id, SpanId AS span_id, Mode AS mode, ModeName AS mode_name,
               Rule AS rule, Confidence AS confidence, Fatal AS fatal, Detector AS detector,
               DetectorVersion AS detector_version, Message AS message,
               EvidenceSpanIds AS evidence_span_ids, Evidence AS evidence,
               ServiceName AS service, AgentName AS agent, Model AS model,
               toUnixTimestamp64Nano(Timestamp) AS time_unix_nano,
               CostSeconds AS cost_seconds, CostLlmCalls AS cost_llm_calls,
               CostToolCalls AS cost_tool_calls,
               CostInputTokens + CostOutputTokens AS cost_tokens, Intervention AS intervention
        FROM {store.database}.mast_findings FINAL
        {clause}
        ORDER BY Timestamp DESC, TraceId, SpanId, Mode
        LIMIT {int(flt.limit)}
        """
    )
    for row in rows:
        row["evidence"] = json.loads(row["evidence"] or "{}")
    return rows


def signatures(
    store: Store, trace_id: str | None = None, limit: int = 1000
) -> list[dict[str, Any]]:
    """The current signature of each closed run, newest first."""
    clause = ""
    if trace_id is not None:
        if not _HEX.match(trace_id.lower()):
            raise QueryError(f"expected a 32-hex trace id, got {trace_id!r}")
        clause = f"WHERE TraceId = '{trace_id.lower()}'"
    return store.query(
        f"""
        SELECT TraceId AS trace_id, ServiceName AS service, AgentName AS agent, Model AS model,
               toUnixTimestamp64Nano(Start) AS start_unix_nano,
               toUnixTimestamp64Nano(End) AS end_unix_nano, CloseReason AS close_reason,
               Steps AS steps, LlmCalls AS llm_calls, ToolCalls AS tool_calls,
               Errors AS errors, InputTokens AS input_tokens, OutputTokens AS output_tokens,
               FailureVector AS failure_vector, Modes AS modes, ModeCounts AS mode_counts,
               FindingCount AS finding_count, Fatal AS fatal, Outcome AS outcome, Score AS score
        FROM {store.database}.mast_signatures FINAL
        {clause}
        ORDER BY Start DESC, TraceId
        LIMIT {int(limit)}
        """
    )


def span_counts(store: Store) -> dict[str, int]:
    """How many spans, and distinct span ids, the store holds (for checks and the demo)."""
    rows = store.query(
        f"SELECT count() AS spans, uniqExact(TraceId, SpanId) AS unique_spans "
        f"FROM {store.database}.otel_traces"
    )
    return {k: int(v) for k, v in rows[0].items()}


_GROUPS = {"model": "Model", "agent": "AgentName", "service": "ServiceName"}


def summary(
    store: Store,
    config: ScoringConfig,
    by: str = "model",
    since_ns: int | None = None,
    until_ns: int | None = None,
) -> list[GroupSummary]:
    """Per model (or agent, or service) over a time range: success rate, mean score, modes
    per failed run, and each mode's lift and fatal/benign call."""
    column = _GROUPS.get(by)
    if column is None:
        raise QueryError(f"--by expects one of {', '.join(_GROUPS)}, got {by!r}")
    where = ["1"]
    if since_ns is not None:
        where.append(f"Start >= fromUnixTimestamp64Nano({int(since_ns)})")
    if until_ns is not None:
        where.append(f"Start < fromUnixTimestamp64Nano({int(until_ns)})")
    clause = " AND ".join(where)
    table = f"{store.database}.mast_signatures FINAL"
    totals = store.query(
        f"""
        SELECT {column} AS grp, Outcome AS outcome, count() AS runs,
               sum(DistinctModes) AS distinct_modes, avg(Score) AS mean_score,
               count(Score) AS scored
        FROM {table} WHERE {clause}
        GROUP BY grp, outcome ORDER BY grp, outcome
        """
    )
    per_mode = store.query(
        f"""
        SELECT {column} AS grp, mode, Outcome AS outcome, count() AS runs
        FROM {table} ARRAY JOIN Modes AS mode WHERE {clause}
        GROUP BY grp, mode, outcome
        """
    )
    groups: dict[str, dict[str, Any]] = {}
    for row in totals:
        g = groups.setdefault(
            row["grp"], {"outcomes": {}, "modes": {}, "distinct": 0, "score_sum": 0.0, "scored": 0}
        )
        g["outcomes"][row["outcome"]] = int(row["runs"])
        if row["outcome"] == "failure":
            g["distinct"] = int(row["distinct_modes"])
        if int(row["scored"]):
            g["score_sum"] += float(row["mean_score"]) * int(row["scored"])
            g["scored"] += int(row["scored"])
    for row in per_mode:
        if row["grp"] in groups:
            groups[row["grp"]]["modes"][(row["mode"], row["outcome"])] = int(row["runs"])
    return [
        summarize(
            name,
            g["outcomes"],
            g["modes"],
            g["distinct"],
            g["score_sum"] / g["scored"] if g["scored"] else None,
            config,
        )
        for name, g in sorted(groups.items())
    ]


# --- helpers ------------------------------------------------------------------------------------


def _quote(value: str) -> str:
    """A ClickHouse string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _trace_id(value: str) -> str:
    trace_id = value.lower()
    if not _HEX.match(trace_id):
        raise QueryError(f"expected a 32-hex trace id, got {value!r}")
    return trace_id


def _id_list(trace_ids: list[str]) -> str:
    return ", ".join(_quote(_trace_id(t)) for t in trace_ids)


@dataclass(frozen=True, slots=True)
class Scope:
    """Which runs a rollup question is about: a time range (Unix ns, `until` open) and
    optional service, model and agent."""

    since_ns: int
    until_ns: int | None = None
    service: str | None = None
    model: str | None = None
    agent: str | None = None

    def where(self, time_column: str = "Minute") -> str:
        clauses = [f"{time_column} >= toStartOfMinute(toDateTime({int(self.since_ns // _NS)}))"]
        if self.until_ns is not None:
            clauses.append(f"{time_column} < toDateTime({int(self.until_ns // _NS)})")
        for column, value in (
            ("ServiceName", self.service),
            ("Model", self.model),
            ("AgentName", self.agent),
        ):
            if value is not None:
                clauses.append(f"{column} = {_quote(value)}")
        return " AND ".join(clauses)


_FINDING_DIMENSIONS = {
    "mode": "Mode",
    "model": "Model",
    "service": "ServiceName",
    "agent": "AgentName",
    "fatal": "Fatal",
}
_RUN_DIMENSIONS = {
    "outcome": "Outcome",
    "model": "Model",
    "service": "ServiceName",
    "agent": "AgentName",
}


def _dimensions(by: tuple[str, ...], known: dict[str, str]) -> list[tuple[str, str]]:
    unknown = [b for b in by if b not in known]
    if unknown:
        raise QueryError(f"cannot group by {unknown}; use any of {sorted(known)}")
    return [(name, known[name]) for name in by]


# --- what is failing now, and since when ---------------------------------------------------------


def failing_now(
    store: Store, scope: Scope, fatal_only: bool = False, limit: int = 100
) -> list[dict[str, Any]]:
    """Modes seen in the scope, per model, service and agent: how many findings and runs,
    first and last minute; fatal modes first, then the most frequent."""
    fatal = " AND Fatal = 1" if fatal_only else ""
    rows = store.query(
        f"""
        SELECT Mode AS mode, Model AS model, ServiceName AS service, AgentName AS agent,
               Fatal AS fatal, uniqExactMerge(Findings) AS findings, uniqExactMerge(Runs) AS runs,
               toUnixTimestamp(min(Minute)) AS first_minute_unix,
               toUnixTimestamp(max(Minute)) AS last_minute_unix
        FROM {store.database}.mast_findings_per_minute
        WHERE {scope.where()}{fatal}
        GROUP BY Mode, Model, ServiceName, AgentName, Fatal
        ORDER BY Fatal DESC, findings DESC, Mode, Model, ServiceName, AgentName
        LIMIT {int(limit)}
        """
    )
    for row in rows:
        for key in ("findings", "runs", "first_minute_unix", "last_minute_unix", "fatal"):
            row[key] = int(row[key])
    return rows


def failing_since(
    store: Store,
    mode: str,
    scope: Scope,
    quiet_minutes: int = 30,
) -> dict[str, Any] | None:
    """The current stretch of `mode` in the scope: since when it has been showing (no gap
    longer than `quiet_minutes` since), when last, how many findings and runs; None if it
    did not show in the scope at all."""
    if not _MODE.match(mode):
        raise QueryError(f"expected a mode code like FM-1.3, got {mode!r}")
    rows = store.query(
        f"""
        SELECT toUnixTimestamp(Minute) AS minute_unix, uniqExactMerge(Findings) AS findings
        FROM {store.database}.mast_findings_per_minute
        WHERE {scope.where()} AND Mode = {_quote(mode)}
        GROUP BY Minute
        ORDER BY Minute DESC
        """
    )
    if not rows:
        return None
    minutes = [(int(r["minute_unix"]), int(r["findings"])) for r in rows]
    start = minutes[0][0]
    for minute, _ in minutes[1:]:
        if start - minute > quiet_minutes * 60:
            break
        start = minute
    stretch = [m for m in minutes if m[0] >= start]
    runs = store.query(
        f"""
        SELECT uniqExactMerge(Runs) AS runs
        FROM {store.database}.mast_findings_per_minute
        WHERE {Scope(start * _NS, None, scope.service, scope.model, scope.agent).where()}
          AND Mode = {_quote(mode)}
        """
    )
    return {
        "mode": mode,
        "since_unix": start,
        "last_minute_unix": minutes[0][0],
        "findings": sum(n for _, n in stretch),
        "runs": int(runs[0]["runs"]) if runs else 0,
    }


def findings_per_minute(
    store: Store, scope: Scope, by: tuple[str, ...] = ("mode",), fatal_only: bool = False
) -> list[dict[str, Any]]:
    """Distinct findings and runs per minute, split by `by` (mode, model, service, agent,
    fatal): the series behind dashboard panels and alert rules."""
    dims = _dimensions(by, _FINDING_DIMENSIONS)
    select = "".join(f"{column} AS {name}, " for name, column in dims)
    group = "".join(f", {column}" for _, column in dims)
    fatal = " AND Fatal = 1" if fatal_only else ""
    rows = store.query(
        f"""
        SELECT toUnixTimestamp(Minute) AS minute_unix, {select}
               uniqExactMerge(Findings) AS findings, uniqExactMerge(Runs) AS runs
        FROM {store.database}.mast_findings_per_minute
        WHERE {scope.where()}{fatal}
        GROUP BY Minute{group}
        ORDER BY Minute{group}
        """
    )
    for row in rows:
        for key in ("minute_unix", "findings", "runs"):
            row[key] = int(row[key])
    return rows


def runs_per_minute(
    store: Store, scope: Scope, by: tuple[str, ...] = ("outcome",)
) -> list[dict[str, Any]]:
    """Closed runs per minute of their end, split by `by` (outcome, model, service, agent):
    how many, how many showed a fatal mode or any finding, their findings, distinct modes and
    steps (sums, so density = distinct_modes / runs)."""
    dims = _dimensions(by, _RUN_DIMENSIONS)
    select = "".join(f"{column} AS {name}, " for name, column in dims)
    group = "".join(f", {column}" for _, column in dims)
    rows = store.query(
        f"""
        SELECT toUnixTimestamp(Minute) AS minute_unix, {select}
               sum(Runs) AS runs, sum(FatalRuns) AS fatal_runs,
               sum(RunsWithFindings) AS runs_with_findings, sum(Findings) AS findings,
               sum(DistinctModes) AS distinct_modes, sum(Steps) AS steps
        FROM {store.database}.mast_runs_per_minute
        WHERE {scope.where()}
        GROUP BY Minute{group}
        HAVING runs != 0
        ORDER BY Minute{group}
        """
    )
    numbers = ("minute_unix", "runs", "fatal_runs", "runs_with_findings", "findings")
    for row in rows:
        for key in (*numbers, "distinct_modes", "steps"):
            row[key] = int(row[key])
    return rows


# --- show me the run -----------------------------------------------------------------------------


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
        WHERE TraceId IN ({_id_list(trace_ids)})
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
        HAVING min(Start) >= toDateTime({int(since_ns // _NS)})
           AND min(Start) < toDateTime({int(-(-until_ns // _NS))})
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
        WHERE TraceId IN ({_id_list(list(bounds))})
          AND Timestamp >= toDateTime64({low}, 9) AND Timestamp < toDateTime64({high}, 9)
        ORDER BY Timestamp, TraceId, SpanId
        LIMIT 1 BY TraceId, SpanId
        """
    )


def run_timeline(store: Store, trace_id: str) -> dict[str, Any] | None:
    """One run as on-call reads it: its signature, and its spans in start order (offset from
    the run's start, duration, depth under the root, status) with the findings shown at each
    span and the findings each span is evidence for. None if the store has no span of it."""
    trace_id = _trace_id(trace_id)
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


# --- what re-analysis needs ----------------------------------------------------------------------


def stored_finding_ids(store: Store, trace_ids: list[str]) -> set[str]:
    """FindingIds already stored for the traces."""
    if not trace_ids:
        return set()
    rows = store.query(
        f"SELECT DISTINCT FindingId AS id FROM {store.database}.mast_findings "
        f"WHERE TraceId IN ({_id_list(trace_ids)})"
    )
    return {r["id"] for r in rows}


def current_signature_rows(store: Store, trace_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The current signature row of each trace (all columns, as stored), by trace id."""
    if not trace_ids:
        return {}
    rows = store.query(
        f"""
        SELECT TraceId AS trace_id, ServiceName AS service, AgentName AS agent, Model AS model,
               toString(toUnixTimestamp64Nano(Start)) AS start_ns,
               toString(toUnixTimestamp64Nano(End)) AS end_ns, CloseReason AS close_reason,
               Steps AS steps, LlmCalls AS llm_calls, ToolCalls AS tool_calls, Errors AS errors,
               InputTokens AS input_tokens, OutputTokens AS output_tokens,
               ModeCounts AS mode_counts, Outcome AS outcome, Score AS score,
               ConversationId AS conversation_id, toString(Version) AS version
        FROM {store.database}.mast_signatures FINAL
        WHERE TraceId IN ({_id_list(trace_ids)})
        """
    )
    return {r["trace_id"]: r for r in rows}


def counted_signature_rows(store: Store, trace_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Every signature version of each trace that the runs rollup still counts (`net`, the sum
    of its rows' Sign, is not zero), with the values the rollup counted it with, newest first.
    Usually one per run; more when collectors wrote signatures of parts of one run."""
    if not trace_ids:
        return {}
    rows = store.query(
        f"""
        SELECT TraceId AS trace_id, toString(Version) AS version,
               toString(toUnixTimestamp64Nano(any(Start))) AS start_ns,
               toString(toUnixTimestamp64Nano(any(End))) AS end_ns,
               any(ServiceName) AS service, any(AgentName) AS agent, any(Model) AS model,
               any(Outcome) AS outcome, any(Fatal) AS fatal, any(FindingCount) AS finding_count,
               any(DistinctModes) AS distinct_modes, any(Steps) AS steps, sum(Net) AS net
        FROM {store.database}.mast_signature_counts
        WHERE TraceId IN ({_id_list(trace_ids)})
        GROUP BY TraceId, Version
        HAVING net != 0
        ORDER BY TraceId, Version DESC
        """
    )
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        row["net"] = int(row["net"])
        out.setdefault(row["trace_id"], []).append(row)
    return out
