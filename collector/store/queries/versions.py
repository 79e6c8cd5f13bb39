"""What signature versioning and re-analysis read: stored finding ids, the current signature
row of each run, and the versions the runs rollup still counts."""

from __future__ import annotations

from typing import Any

from mast_otel.collector.store.backends import Store
from mast_otel.collector.store.queries.common import id_list


def stored_finding_ids(store: Store, trace_ids: list[str]) -> set[str]:
    """FindingIds already stored for the traces."""
    if not trace_ids:
        return set()
    rows = store.query(
        f"SELECT DISTINCT FindingId AS id FROM {store.database}.mast_findings "
        f"WHERE TraceId IN ({id_list(trace_ids)})"
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
               ConversationId AS conversation_id, DecisiveSpanId AS decisive_span_id,
               DecisiveStep AS decisive_step, ResponsibleAgent AS responsible_agent,
               AttributionChain AS attribution_chain, toString(Version) AS version
        FROM {store.database}.mast_signatures FINAL
        WHERE TraceId IN ({id_list(trace_ids)})
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
        WHERE TraceId IN ({id_list(trace_ids)})
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
