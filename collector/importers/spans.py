"""Building OTLP export requests from a transcript, in the current GenAI conventions.

Every importer turns its file into runs of `SpanSpec`s (an `invoke_agent` root, one `chat`
span per model response with `gen_ai.input.messages` / `gen_ai.output.messages`, one
`execute_tool` span per tool call with `gen_ai.tool.call.arguments` / `.result`), and this
module writes them as an `ExportTraceServiceRequest`, so imported runs take the one path every
received run takes: decode → limits → redaction → normalize → window → detectors → store.

Every span carries `mast.import.message_index`: the position, in the file's transcript, of the
message (or line) it was made from, so a finding on a span maps back to a transcript position.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from mast_otel.processors.ids import stable_hex

# Attributes the importers write (documented in schemas/conventions.md).
MESSAGE_INDEX = "mast.import.message_index"
RESULT_MESSAGE_INDEX = "mast.import.result_message_index"
RUN_INDEX = "mast.import.run_index"
SOURCE = "mast.import.source"
FORMAT = "mast.import.format"
ROLE = "mast.import.role"
CONTENT = "mast.import.content"
TASK_ID = "mast.import.task_id"
TRIAL = "mast.import.trial"

# Model input is written as the whole conversation so far, which grows quadratically over a
# run: messages older than the last `INPUT_FULL_MESSAGES` keep their role and at most
# `INPUT_OLD_PART_CHARS` characters per part (their count still says how long the history
# is), recent ones at most `INPUT_PART_CHARS`. The root keeps the task whole.
INPUT_FULL_MESSAGES = 16
INPUT_PART_CHARS = 8_000
INPUT_OLD_PART_CHARS = 200

NS = 1_000_000_000


@dataclass
class SpanSpec:
    """One span to write: ids are hex (32 for the trace, 16 for spans)."""

    span_id: str
    name: str
    start_ns: int
    end_ns: int
    parent_span_id: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)
    error: str | None = None  # set: status Error with this message
    # Span events: (name, attributes), written in order at the span's start.
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


@dataclass
class RunSpec:
    """One imported run: its trace id, its spans (root first) and where it came from."""

    trace_id: str
    spans: list[SpanSpec]
    service: str = "imported-agent"
    label: str = ""


def span_id_for(trace_id: str, *parts: str) -> str:
    """A span id derived from the run and the span's place in it (stable across imports)."""
    return stable_hex(trace_id, *parts, length=16)


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"…[{len(text) - limit} more chars]"


def text_part(text: str, kind: str = "text") -> dict[str, Any]:
    return {"type": kind, "content": text}


def tool_call_part(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    return {"type": "tool_call", "id": call_id, "name": name, "arguments": arguments}


def user_message(text: str) -> list[tuple[str, dict[str, Any]]]:
    """The events of a span that stands for a user's turn: one `gen_ai.user.message` event (the
    GenAI per-message event) carrying the text, which the normalizer reads as a HUMAN step."""
    return [("gen_ai.user.message", {"role": "user", "content": text})]


def tool_response_part(call_id: str, result: str) -> dict[str, Any]:
    return {"type": "tool_call_response", "id": call_id, "response": result}


def arguments_value(raw: Any) -> Any:
    """Tool-call arguments as the GenAI message JSON holds them: parsed when they are JSON."""
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def input_messages(history: Sequence[dict[str, Any]]) -> str:
    """The model's input (GenAI message JSON), older messages shortened (see the limits)."""
    cutoff = len(history) - INPUT_FULL_MESSAGES
    out = []
    for position, message in enumerate(history):
        limit = INPUT_PART_CHARS if position >= cutoff else INPUT_OLD_PART_CHARS
        out.append({**message, "parts": [_short_part(part, limit) for part in message["parts"]]})
    return json.dumps(out, ensure_ascii=False)


def _short_part(part: dict[str, Any], limit: int) -> dict[str, Any]:
    short = dict(part)
    for key in ("content", "response"):
        value = short.get(key)
        if isinstance(value, str):
            short[key] = cut(value, limit)
    arguments = short.get("arguments")
    if arguments is not None and not isinstance(arguments, str):
        rendered = json.dumps(arguments, ensure_ascii=False)
        if len(rendered) > limit:
            short["arguments"] = cut(rendered, limit)
    elif isinstance(arguments, str):
        short["arguments"] = cut(arguments, limit)
    return short


def request_for(run: RunSpec, scope: str = "mast-otel.importers") -> ExportTraceServiceRequest:
    """The OTLP export request carrying one run."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.append(_kv("service.name", run.service))
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.name = scope
    trace_id = bytes.fromhex(run.trace_id)
    for spec in run.spans:
        span = scope_spans.spans.add()
        span.trace_id = trace_id
        span.span_id = bytes.fromhex(spec.span_id)
        if spec.parent_span_id:
            span.parent_span_id = bytes.fromhex(spec.parent_span_id)
        span.name = spec.name
        span.kind = Span.SPAN_KIND_INTERNAL if not spec.parent_span_id else Span.SPAN_KIND_CLIENT
        span.start_time_unix_nano = spec.start_ns
        span.end_time_unix_nano = max(spec.end_ns, spec.start_ns)
        span.attributes.extend(_kv(key, value) for key, value in spec.attributes.items())
        for event_name, event_attrs in spec.events:
            event = span.events.add()
            event.name = event_name
            event.time_unix_nano = spec.start_ns
            event.attributes.extend(_kv(key, value) for key, value in event_attrs.items())
        if spec.error is not None:
            span.status.code = Status.STATUS_CODE_ERROR
            span.status.message = spec.error
        else:
            span.status.code = Status.STATUS_CODE_OK
    return request


def _kv(key: str, value: Any) -> KeyValue:
    return KeyValue(key=key, value=_any(value))


def _any(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, Iterable):
        any_value = AnyValue()
        any_value.array_value.values.extend(_any(item) for item in value)
        return any_value
    return AnyValue(string_value=str(value))


def stable_hex_trace(*parts: str) -> str:
    """A trace id (32 hex) derived from the parts."""
    return stable_hex("import", *parts, length=32)
