"""OTLP export requests to records.

Both receivers (gRPC and HTTP) and the offline file reader end up here, so the OTLP rules live
in one place: ids become lowercase hex, malformed spans are counted as rejected instead of
failing the whole request (OTLP partial success), and attribute values become plain Python
values with a bounded nesting depth so a hostile payload cannot exhaust the stack.

Decoding walks the generated protobuf objects directly: converting through `MessageToDict`
would be several times slower and would turn 64-bit integers into strings.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from mast_otel.processors.records import (
    Attributes,
    AttrValue,
    LogRecord,
    SpanEvent,
    SpanLink,
    SpanRecord,
)

__all__ = [
    "DEFAULT_MAX_VALUE_DEPTH",
    "MAX_ALLOWED_VALUE_DEPTH",
    "TRUNCATED_VALUE",
    "DecodeResult",
    "OtlpDecodeError",
    "any_value_to_python",
    "attributes_to_dict",
    "decode_logs",
    "decode_spans",
    "parse_logs_request",
    "parse_trace_request",
]

DEFAULT_MAX_VALUE_DEPTH = 32
# Conversion recurses once per nesting level (two frames with the comprehension), so the cap
# must stay well below Python's default recursion limit of 1000.
MAX_ALLOWED_VALUE_DEPTH = 256
TRUNCATED_VALUE = "[truncated: depth]"

# Indexed by the protobuf enum value; spelled like the OpenTelemetry Collector's ClickHouse
# exporter so rows written by either tool look the same.
_SPAN_KINDS = ("Unspecified", "Internal", "Server", "Client", "Producer", "Consumer")
_STATUS_CODES = ("Unset", "Ok", "Error")

R = TypeVar("R")
M = TypeVar("M", bound=Message)


class OtlpDecodeError(ValueError):
    """The payload is not a valid OTLP request (bad protobuf, bad JSON, bad hex id, wrong
    field type). Receivers map it to gRPC INVALID_ARGUMENT / HTTP 400, which tells the sender
    not to retry; the message is meant to be read by the person who configured the sender."""


@dataclass(slots=True)
class DecodeResult(Generic[R]):
    """Decoded records plus what had to be dropped, so the receiver can report an OTLP partial
    success instead of refusing a whole batch for one bad span."""

    records: list[R]
    rejected: int = 0
    reason: str = ""


def _check_depth(max_value_depth: int) -> None:
    if not 1 <= max_value_depth <= MAX_ALLOWED_VALUE_DEPTH:
        raise ValueError(
            f"max_value_depth must be between 1 and {MAX_ALLOWED_VALUE_DEPTH}, "
            f"got {max_value_depth}"
        )


def _value(v: AnyValue, depth_left: int) -> AttrValue:
    if depth_left <= 0:
        return TRUNCATED_VALUE
    kind = v.WhichOneof("value")
    # Scalars first: they are the overwhelmingly common case.
    if kind == "string_value":
        return v.string_value
    if kind == "int_value":
        return v.int_value
    if kind == "bool_value":
        return v.bool_value
    if kind == "double_value":
        return v.double_value
    if kind is None:
        return None
    if kind == "bytes_value":
        return bytes(v.bytes_value)
    if kind == "array_value":
        return [_value(item, depth_left - 1) for item in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value, depth_left - 1) for kv in v.kvlist_value.values}
    return None  # pragma: no cover - a oneof member added by a newer proto


def any_value_to_python(value: AnyValue, max_depth: int = DEFAULT_MAX_VALUE_DEPTH) -> AttrValue:
    """Convert an OTLP AnyValue to a plain Python value.

    The top-level value is at depth 1; anything nested deeper than `max_depth` becomes
    `TRUNCATED_VALUE`. Protobuf objects built in memory can nest without limit, and the
    stored row is more useful with a marker than with a recursion error.
    """
    _check_depth(max_depth)
    return _value(value, max_depth)


def _attrs(kvs: Iterable[KeyValue], max_depth: int) -> Attributes:
    out: Attributes = {}
    for kv in kvs:
        value = kv.value
        # Most values are non-empty strings, and a non-empty `string_value` can only mean the
        # oneof holds a string: one read instead of asking which member is set first.
        text = value.string_value
        out[kv.key] = text if text else _value(value, max_depth)
    return out


def attributes_to_dict(
    kvs: Iterable[KeyValue], max_depth: int = DEFAULT_MAX_VALUE_DEPTH
) -> Attributes:
    """Convert repeated OTLP KeyValue to a dict (a later duplicate key wins, as in the
    Collector's pdata)."""
    _check_depth(max_depth)
    return _attrs(kvs, max_depth)


def _service_name(resource_attributes: Attributes) -> str:
    name = resource_attributes.get("service.name")
    return name if isinstance(name, str) else ""


def _id_problem(trace_id: bytes, span_id: bytes, parent_span_id: bytes) -> str:
    if len(trace_id) != 16:
        return f"trace_id must be 16 bytes, got {len(trace_id)}"
    if len(span_id) != 8:
        return f"span_id must be 8 bytes, got {len(span_id)}"
    if len(parent_span_id) not in (0, 8):
        return f"parent_span_id must be empty or 8 bytes, got {len(parent_span_id)}"
    return ""


def decode_spans(
    request: ExportTraceServiceRequest, *, max_value_depth: int = DEFAULT_MAX_VALUE_DEPTH
) -> DecodeResult[SpanRecord]:
    """Decode every span of an export request.

    Spans with ids of the wrong length are counted in `rejected` (with the first reason) and
    left out: they cannot be joined to a trace, and OTLP lets a receiver drop them while
    accepting the rest.
    """
    _check_depth(max_value_depth)
    depth = max_value_depth
    records: list[SpanRecord] = []
    rejected = 0
    reason = ""
    for resource_spans in request.resource_spans:
        resource_attributes = _attrs(resource_spans.resource.attributes, depth)
        service_name = _service_name(resource_attributes)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope
            scope_name = scope.name
            scope_version = scope.version
            for span in scope_spans.spans:
                trace_id = span.trace_id
                span_id = span.span_id
                parent_span_id = span.parent_span_id
                if len(trace_id) != 16 or len(span_id) != 8 or len(parent_span_id) not in (0, 8):
                    rejected += 1
                    if not reason:
                        reason = _id_problem(trace_id, span_id, parent_span_id)
                    continue
                kind = span.kind
                status = span.status
                status_code = status.code
                events = span.events
                links = span.links
                # Positional, in SpanRecord's field order: keyword matching for seventeen
                # fields costs as much again as building the record.
                records.append(
                    SpanRecord(
                        trace_id.hex(),  # trace_id
                        span_id.hex(),  # span_id
                        parent_span_id.hex(),  # parent_span_id
                        span.name,  # name
                        span.start_time_unix_nano,  # start_ns
                        span.end_time_unix_nano,  # end_ns
                        _SPAN_KINDS[kind]
                        if 0 <= kind < len(_SPAN_KINDS)
                        else "Unspecified",  # kind
                        span.trace_state,  # trace_state
                        (
                            _STATUS_CODES[status_code]
                            if 0 <= status_code < len(_STATUS_CODES)
                            else "Unset"
                        ),
                        status.message,  # status_message
                        service_name,  # service_name
                        # Copied so a stage that edits one record cannot change its siblings.
                        dict(resource_attributes),  # resource_attributes
                        scope_name,  # scope_name
                        scope_version,  # scope_version
                        _attrs(span.attributes, depth),  # attributes
                        [
                            SpanEvent(
                                event.time_unix_nano,
                                event.name,
                                _attrs(event.attributes, depth),
                            )
                            for event in events
                        ]
                        if events
                        else [],
                        [
                            SpanLink(
                                link.trace_id.hex(),
                                link.span_id.hex(),
                                link.trace_state,
                                _attrs(link.attributes, depth),
                            )
                            for link in links
                        ]
                        if links
                        else [],
                    )
                )
    return DecodeResult(records, rejected, reason)


def decode_logs(
    request: ExportLogsServiceRequest, *, max_value_depth: int = DEFAULT_MAX_VALUE_DEPTH
) -> DecodeResult[LogRecord]:
    """Decode every log record of an export request.

    Log records may legitimately carry no trace context, so ids of the wrong length are
    blanked rather than rejected: the event itself is still worth keeping.
    """
    _check_depth(max_value_depth)
    depth = max_value_depth
    records: list[LogRecord] = []
    for resource_logs in request.resource_logs:
        resource_attributes = _attrs(resource_logs.resource.attributes, depth)
        service_name = _service_name(resource_attributes)
        for scope_logs in resource_logs.scope_logs:
            scope = scope_logs.scope
            scope_name = scope.name
            scope_version = scope.version
            for log in scope_logs.log_records:
                trace_id = log.trace_id
                span_id = log.span_id
                attributes = _attrs(log.attributes, depth)
                event_name = log.event_name
                if not event_name:
                    legacy = attributes.get("event.name")
                    if isinstance(legacy, str):
                        event_name = legacy
                records.append(
                    LogRecord(
                        time_ns=log.time_unix_nano,
                        observed_time_ns=log.observed_time_unix_nano,
                        trace_id=trace_id.hex() if len(trace_id) == 16 else "",
                        span_id=span_id.hex() if len(span_id) == 8 else "",
                        severity_text=log.severity_text,
                        severity_number=log.severity_number,
                        body=_value(log.body, depth) if log.HasField("body") else None,
                        event_name=event_name,
                        service_name=service_name,
                        resource_attributes=dict(resource_attributes),
                        scope_name=scope_name,
                        scope_version=scope_version,
                        attributes=attributes,
                        flags=log.flags,
                    )
                )
    return DecodeResult(records, 0, "")


def _parse(message_type: type[M], data: bytes | memoryview, what: str) -> M:
    message = message_type()
    try:
        message.ParseFromString(bytes(data))
    except DecodeError as exc:
        # python-protobuf validates UTF-8 in `string` fields while parsing, so invalid text
        # ends up here too; the upstream message names the offending message type.
        raise OtlpDecodeError(f"malformed OTLP/protobuf {what}: {exc}") from exc
    except RecursionError as exc:  # pragma: no cover - upb limits nesting itself
        raise OtlpDecodeError(f"malformed OTLP/protobuf {what}: nested too deeply") from exc
    return message


def parse_trace_request(data: bytes | memoryview) -> ExportTraceServiceRequest:
    """Parse a serialized ExportTraceServiceRequest, raising OtlpDecodeError on bad input."""
    return _parse(ExportTraceServiceRequest, data, "ExportTraceServiceRequest")


def parse_logs_request(data: bytes | memoryview) -> ExportLogsServiceRequest:
    """Parse a serialized ExportLogsServiceRequest, raising OtlpDecodeError on bad input."""
    return _parse(ExportLogsServiceRequest, data, "ExportLogsServiceRequest")
