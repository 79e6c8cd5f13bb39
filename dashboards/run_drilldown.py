"""Dashboard 2, run drill-down: one run (by trace id) step by step, each finding at its span
with its evidence, the decisive step attribution named and the chain to it, the failure vector
and the outcome."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.models import dashboard as model

from mast_otel.dashboards import panels as p
from mast_otel.dashboards.sources import (
    DATABASE,
    FATAL,
    FATAL_MODES_SQL,
    FINDINGS,
    MODE_CODES_SQL,
    MODE_NAMES_SQL,
    SIGNATURES,
    STEP_INPUT,
    STEP_KIND,
    STEP_MODEL,
    STEP_TOOL,
    TRACES,
    one_selected,
)
from mast_otel.dashboards.variables import clickhouse_datasource, database

UID = "mast-run"
TITLE = "mast-otel · Run"

TRACE = one_selected("trace_id")
# Spans of one trace: bounded by the trace's first and last span start (the exporter's
# trace-id lookup table), so the scan touches that time span's partitions only.
_TRACE_BOUNDS = f"""Timestamp >= (SELECT min(Start) FROM {DATABASE}.otel_traces_trace_id_ts
    WHERE TraceId = {TRACE})
  AND Timestamp <= (SELECT max(End) + 1 FROM {DATABASE}.otel_traces_trace_id_ts
    WHERE TraceId = {TRACE})"""

# The span attribution named the decisive step of the run ('' when it named none).
_DECISIVE = f"""(SELECT any(DecisiveSpanId) FROM {SIGNATURES} WHERE TraceId = {TRACE})"""

# Every SQL this dashboard runs, in one place.
SQL: dict[str, str] = {
    "outcome": f"""SELECT if(Outcome = '', 'unknown', Outcome) AS outcome, Score AS score,
  Model AS model, AgentName AS agent, ServiceName AS service,
  Start AS started, (toUnixTimestamp64Milli(End) - toUnixTimestamp64Milli(Start)) / 1000
    AS duration_s,
  Steps AS steps, LlmCalls AS llm_calls, ToolCalls AS tool_calls, Errors AS errors,
  InputTokens + OutputTokens AS tokens, DistinctModes AS distinct_modes,
  arrayStringConcat(Modes, ', ') AS modes, CloseReason AS close_reason,
  ResponsibleAgent AS responsible_agent, DecisiveStep AS decisive_step,
  DecisiveSpanId AS decisive_span
FROM {SIGNATURES}
WHERE TraceId = {TRACE}""",
    "failure_vector": f"""SELECT code AS mode, name AS mode_name,
  ModeCounts[code] AS findings,
  toUInt8(has(Modes, code)) AS present,
  if(has([{FATAL_MODES_SQL}], code), 'fatal', 'benign') AS prior
FROM {SIGNATURES}
ARRAY JOIN {MODE_CODES_SQL} AS code, {MODE_NAMES_SQL} AS name
WHERE TraceId = {TRACE}
ORDER BY code""",
    "steps": f"""SELECT s.Timestamp AS time,
  (toUnixTimestamp64Nano(s.Timestamp) - min(toUnixTimestamp64Nano(s.Timestamp)) OVER ())
    / 1000000 AS offset_ms,
  s.Duration / 1000000 AS duration_ms,
  s.SpanName AS step, {STEP_KIND} AS kind, {STEP_MODEL} AS model, {STEP_TOOL} AS tool,
  substring({STEP_INPUT}, 1, 200) AS input,
  s.StatusCode AS status,
  arrayStringConcat(f.modes, ', ') AS findings,
  arrayStringConcat(f.messages, ' | ') AS evidence,
  if(s.SpanId = {_DECISIVE}, 'decisive', '') AS attribution,
  s.SpanId AS SpanId
FROM {TRACES} AS s
LEFT JOIN (
  SELECT SpanId, groupArray(Mode) AS modes, groupArray(concat(Mode, ': ', Message)) AS messages
  FROM {FINDINGS}
  WHERE TraceId = {TRACE}
  GROUP BY SpanId
) AS f ON f.SpanId = s.SpanId
WHERE s.TraceId = {TRACE}
  AND {_TRACE_BOUNDS.replace("Timestamp", "s.Timestamp", 2)}
ORDER BY s.Timestamp, s.SpanId""",
    "findings": f"""SELECT Timestamp AS time, Mode AS mode, ModeName AS mode_name, Rule AS rule,
  if({FATAL}, 'fatal', 'benign') AS prior, Confidence AS confidence, SpanId AS span,
  Message AS message, Evidence AS evidence,
  arrayStringConcat(EvidenceSpanIds, ', ') AS evidence_spans,
  CostSeconds AS cost_s, CostLlmCalls AS cost_llm_calls, CostToolCalls AS cost_tool_calls,
  CostInputTokens + CostOutputTokens AS cost_tokens, Intervention AS intervention
FROM {FINDINGS}
WHERE TraceId = {TRACE}
ORDER BY Timestamp, Mode""",
    "attribution": f"""SELECT ResponsibleAgent AS responsible_agent, DecisiveStep AS decisive_step,
  DecisiveSpanId AS decisive_span, l.1 AS link, l.2 AS span, l.3 AS what
FROM {SIGNATURES}
LEFT ARRAY JOIN arrayMap(j -> (
    if(JSONHas(j, 'finding'), 'finding', concat('step ', JSONExtractRaw(j, 'step'))),
    JSONExtractString(j, 'span_id'),
    if(JSONHas(j, 'finding'), concat(JSONExtractString(j, 'mode'), ' ',
      JSONExtractString(j, 'rule')), concat(JSONExtractString(j, 'agent'), ': ',
      JSONExtractString(j, 'why')))),
  JSONExtractArrayRaw(if(AttributionChain = '', '[]', AttributionChain))) AS l
WHERE TraceId = {TRACE}""",
    "trace": f"""SELECT TraceId AS traceID, SpanId AS spanID, ParentSpanId AS parentSpanID,
  ServiceName AS serviceName, SpanName AS operationName, Timestamp AS startTime,
  multiply(Duration, 0.000001) AS duration,
  arrayMap(key -> map('key', key, 'value', SpanAttributes[key]), mapKeys(SpanAttributes))
    AS tags,
  arrayMap(key -> map('key', key, 'value', ResourceAttributes[key]),
    mapKeys(ResourceAttributes)) AS serviceTags
FROM {TRACES}
WHERE TraceId = {TRACE}
  AND {_TRACE_BOUNDS}
ORDER BY startTime
LIMIT 1000""",
}


def trace_id_variable() -> db.TextBoxVariable:
    return (
        db.TextBoxVariable("trace_id")
        .label("Trace id")
        .description("The run's trace id (32 hex characters)")
    )


def build() -> db.Dashboard:
    fatal_red = [p.thresholds_override([(None, "transparent"), (1, "red")]), p.cell_color()]
    panels: list[p.Panel] = [
        p.ch_table(
            "Outcome",
            SQL["outcome"],
            description="The run's signature: outcome and score (when the harness reports "
            "them), who ran it, what it cost, and the modes it shows.",
            width=24,
            height=4,
            overrides=[("score", [p.unit("percentunit")])],
        ),
        p.ch_table(
            "Failure vector",
            SQL["failure_vector"],
            description="The fourteen MAST modes: present in this run or not, with the number "
            "of findings, and whether the mode is fatal by the study's prior.",
            width=8,
            height=14,
            overrides=[("present", fatal_red)],
        ),
        p.ch_table(
            "Steps",
            SQL["steps"],
            description="Every span of the run in order, with the findings made at it and "
            "their evidence; the decisive step is marked under attribution.",
            width=16,
            height=14,
            overrides=[("findings", fatal_red[1:]), ("input", [p.width(260)])],
        ),
        p.ch_table(
            "Attribution",
            SQL["attribution"],
            description="Who and where the run went wrong (no model called): the agent "
            "responsible, the decisive step (marked in Steps), and the chain from a finding "
            "back to it, each link with its span.",
            width=24,
            height=5,
        ),
        p.ch_table(
            "Findings and evidence",
            SQL["findings"],
            description="Each finding: the rule that fired, the values it saw (evidence), "
            "the spans that make the evidence, what the stretch cost and what to change.",
            width=24,
            height=8,
        ),
        p.traces_panel(
            "Trace",
            SQL["trace"],
            description="The run as a trace: span waterfall with every attribute.",
        ),
    ]
    dashboard = (
        db.Dashboard(TITLE)
        .uid(UID)
        .description("One agent run: steps, findings with evidence, failure vector, outcome.")
        .tags(["mast-otel", "on-call"])
        .time("now-24h", "now")
        .with_variable(clickhouse_datasource())
        .with_variable(database())
        .with_variable(trace_id_variable())
        .link(
            db.DashboardLink("Overview")
            .type(model.DashboardLinkType.LINK)
            .url("/d/mast-overview")
            .keep_time(True)
        )
    )
    for panel in p.with_ids(panels):
        dashboard = dashboard.with_panel(panel)
    return dashboard
