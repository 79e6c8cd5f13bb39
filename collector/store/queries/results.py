"""What detection stored, read back: findings, run signatures, and the per-group summary
(success rate, modes and their lift) over signatures."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mast_otel.collector.store.backends import Store
from mast_otel.collector.store.queries.common import MODE_CODE, TRACE_ID, QueryError
from mast_otel.processors.scoring import GroupSummary, ScoringConfig, summarize


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
        if not TRACE_ID.match(trace_id):
            raise QueryError(f"--trace expects 32 hex characters, got {flt.trace_id!r}")
        where.append(f"TraceId = '{trace_id}'")
    if flt.mode is not None:
        if not MODE_CODE.match(flt.mode):
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
        if not TRACE_ID.match(trace_id.lower()):
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
               FindingCount AS finding_count, Fatal AS fatal, Outcome AS outcome, Score AS score,
               DecisiveSpanId AS decisive_span_id, DecisiveStep AS decisive_step,
               ResponsibleAgent AS responsible_agent, AttributionChain AS attribution_chain
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
