"""The Arrow batches written to each table: one function per table, building its columns from
the records (spans, logs) and results (findings, run signatures) the pipeline produces. Column
names and types are those of `schemas/sql`."""

from __future__ import annotations

import json
import time

import pyarrow as pa

from mast_otel.collector.store.encoding import attr_to_str, map_array, map_lists
from mast_otel.processors.conventions import MODE_CODES, MODES_BY_CODE, fatal_prior
from mast_otel.processors.model import Finding, RunSignature
from mast_otel.processors.records import LogRecord, SpanRecord

_NS = pa.timestamp("ns", tz="UTC")
_MS = pa.timestamp("ms", tz="UTC")

# The tables the exporter writes, in write order.
TABLES: tuple[str, ...] = ("otel_traces", "otel_logs", "mast_findings", "mast_signatures")


def spans_table(spans: list[SpanRecord]) -> pa.Table:
    return pa.table(
        {
            "Timestamp": pa.array([s.start_ns for s in spans], _NS),
            "TraceId": [s.trace_id for s in spans],
            "SpanId": [s.span_id for s in spans],
            "ParentSpanId": [s.parent_span_id for s in spans],
            "TraceState": [s.trace_state for s in spans],
            "SpanName": [s.name for s in spans],
            "SpanKind": [s.kind for s in spans],
            "ServiceName": [s.service_name for s in spans],
            "ResourceAttributes": map_array(s.resource_attributes for s in spans),
            "ScopeName": [s.scope_name for s in spans],
            "ScopeVersion": [s.scope_version for s in spans],
            "SpanAttributes": map_array(s.attributes for s in spans),
            "Duration": pa.array([max(0, s.end_ns - s.start_ns) for s in spans], pa.uint64()),
            "StatusCode": [s.status_code for s in spans],
            "StatusMessage": [s.status_message for s in spans],
            "Events.Timestamp": pa.array(
                [[e.time_ns for e in s.events] for s in spans], pa.list_(_NS)
            ),
            "Events.Name": pa.array(
                [[e.name for e in s.events] for s in spans], pa.list_(pa.string())
            ),
            "Events.Attributes": map_lists([e.attributes for e in s.events] for s in spans),
            "Links.TraceId": pa.array(
                [[x.trace_id for x in s.links] for s in spans], pa.list_(pa.string())
            ),
            "Links.SpanId": pa.array(
                [[x.span_id for x in s.links] for s in spans], pa.list_(pa.string())
            ),
            "Links.TraceState": pa.array(
                [[x.trace_state for x in s.links] for s in spans], pa.list_(pa.string())
            ),
            "Links.Attributes": map_lists([x.attributes for x in s.links] for s in spans),
        }
    )


def logs_table(logs: list[LogRecord]) -> pa.Table:
    return pa.table(
        {
            "Timestamp": pa.array([r.time_ns or r.observed_time_ns for r in logs], _NS),
            "TraceId": [r.trace_id for r in logs],
            "SpanId": [r.span_id for r in logs],
            "TraceFlags": pa.array([r.flags & 0xFF for r in logs], pa.uint8()),
            "SeverityText": [r.severity_text for r in logs],
            "SeverityNumber": pa.array(
                [max(0, min(255, r.severity_number)) for r in logs], pa.uint8()
            ),
            "ServiceName": [r.service_name for r in logs],
            "Body": [attr_to_str(r.body) for r in logs],
            "ResourceAttributes": map_array(r.resource_attributes for r in logs),
            "ScopeName": [r.scope_name for r in logs],
            "ScopeVersion": [r.scope_version for r in logs],
            "LogAttributes": map_array(r.attributes for r in logs),
            "EventName": [r.event_name for r in logs],
        }
    )


def findings_table(findings: list[Finding]) -> pa.Table:
    now_ms = int(time.time() * 1000)
    modes = [MODES_BY_CODE.get(f.mode) for f in findings]
    return pa.table(
        {
            "Timestamp": pa.array([f.time_ns for f in findings], _NS),
            "DetectedAt": pa.array([now_ms] * len(findings), _MS),
            "FindingId": [f.finding_id for f in findings],
            "TraceId": [f.trace_id for f in findings],
            "SpanId": [f.span_id for f in findings],
            "Mode": [f.mode for f in findings],
            "ModeName": [m.name if m else "" for m in modes],
            "Category": [m.category if m else "" for m in modes],
            "Detector": [f.detector for f in findings],
            "DetectorVersion": [f.detector_version for f in findings],
            "Rule": [f.rule for f in findings],
            "Confidence": pa.array([f.confidence for f in findings], pa.float32()),
            "Fatal": pa.array([int(fatal_prior(f.mode)) for f in findings], pa.uint8()),
            "Message": [f.message for f in findings],
            "EvidenceSpanIds": pa.array(
                [list(f.evidence_span_ids) for f in findings], pa.list_(pa.string())
            ),
            "Evidence": [json.dumps(f.evidence, ensure_ascii=False, default=str) for f in findings],
            "ServiceName": [f.service for f in findings],
            "AgentName": [f.agent for f in findings],
            "Model": [f.model for f in findings],
            "CostSeconds": pa.array([f.cost.seconds for f in findings], pa.float64()),
            "CostLlmCalls": pa.array([f.cost.llm_calls for f in findings], pa.uint32()),
            "CostToolCalls": pa.array([f.cost.tool_calls for f in findings], pa.uint32()),
            "CostInputTokens": pa.array([f.cost.input_tokens for f in findings], pa.uint64()),
            "CostOutputTokens": pa.array([f.cost.output_tokens for f in findings], pa.uint64()),
            "Intervention": [m.intervention if m else "" for m in modes],
        }
    )


def signatures_table(
    signatures: list[RunSignature],
    versions: list[int] | None = None,
    signs: list[int] | None = None,
) -> pa.Table:
    """Signature rows. Each row's Version defaults to now (a later write replaces an earlier
    one); `versions` and `signs` let a replacement carry the cancelling copy of the version it
    replaces (see collector/store/signatures.py)."""
    now_ns = time.time_ns()
    if versions is None:
        versions = [now_ns] * len(signatures)
    if signs is None:
        signs = [1] * len(signatures)
    return pa.table(
        {
            "TraceId": [s.trace_id for s in signatures],
            "Start": pa.array([s.start_ns for s in signatures], _NS),
            "End": pa.array([s.end_ns for s in signatures], _NS),
            "ClosedAt": pa.array([now_ns // 1_000_000] * len(signatures), _MS),
            "ServiceName": [s.service for s in signatures],
            "AgentName": [s.agent for s in signatures],
            "Model": [s.model for s in signatures],
            "ConversationId": [s.conversation_id for s in signatures],
            "CloseReason": [s.close_reason for s in signatures],
            "Steps": pa.array([s.steps for s in signatures], pa.uint32()),
            "LlmCalls": pa.array([s.llm_calls for s in signatures], pa.uint32()),
            "ToolCalls": pa.array([s.tool_calls for s in signatures], pa.uint32()),
            "Errors": pa.array([s.errors for s in signatures], pa.uint32()),
            "InputTokens": pa.array([s.input_tokens for s in signatures], pa.uint64()),
            "OutputTokens": pa.array([s.output_tokens for s in signatures], pa.uint64()),
            "FailureVector": pa.array(
                [[1 if s.mode_counts.get(c) else 0 for c in MODE_CODES] for s in signatures],
                pa.list_(pa.uint8()),
            ),
            "Modes": pa.array([s.modes for s in signatures], pa.list_(pa.string())),
            "ModeCounts": pa.array(
                [list(s.mode_counts.items()) for s in signatures],
                pa.map_(pa.string(), pa.uint32()),
            ),
            "FindingCount": pa.array(
                [sum(s.mode_counts.values()) for s in signatures], pa.uint32()
            ),
            "DistinctModes": pa.array([len(s.modes) for s in signatures], pa.uint8()),
            "Fatal": pa.array(
                [int(any(fatal_prior(m) for m in s.modes)) for s in signatures], pa.uint8()
            ),
            "Outcome": [s.outcome for s in signatures],
            "Score": pa.array([s.score for s in signatures], pa.float64()),
            "DecisiveSpanId": [s.decisive_span_id for s in signatures],
            "DecisiveStep": pa.array([s.decisive_step for s in signatures], pa.int32()),
            "ResponsibleAgent": [s.responsible_agent for s in signatures],
            "AttributionChain": [s.attribution_chain for s in signatures],
            "Version": pa.array(versions, pa.uint64()),
            "Sign": pa.array(signs, pa.int8()),
        }
    )
