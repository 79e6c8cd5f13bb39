"""Reading OTLP/protobuf on the wire, without decoding: tags and lengths, the fields of a
message, and a record's `conversation.id` attribute as the Codex normalizer reads it.

Work is linear in the bytes and every step advances, so a hostile payload cannot make it loop;
what is malformed raises `RouteError`, an `OtlpDecodeError`, which receivers answer with
HTTP 400 / gRPC INVALID_ARGUMENT.
"""

from __future__ import annotations

from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from mast_otel.collector.otlp.decode import OtlpDecodeError, any_value_to_python
from mast_otel.processors.normalize import values
from mast_otel.processors.normalize.codex import CONVERSATION_ID

CONVERSATION_KEY = CONVERSATION_ID.encode()

# Field numbers. ExportTraceServiceRequest/ExportLogsServiceRequest: 1 = resource_spans/logs.
# ResourceSpans/ResourceLogs: 1 = resource, 2 = scope_spans/logs. ScopeSpans/ScopeLogs:
# 2 = spans/log_records. Span: 1 = trace_id. LogRecord: 9 = trace_id, 6 = attributes.
# Resource: 1 = attributes. KeyValue: 1 = key, 2 = value.
TAG_FIELD_1 = 0x0A  # field 1, length-delimited
TAG_FIELD_2 = 0x12  # field 2, length-delimited
SPAN_TRACE_ID = 1
LOG_TRACE_ID = 9
LOG_ATTRIBUTES = 6


class RouteError(OtlpDecodeError):
    """The request cannot be split because it is not a valid OTLP request. Receivers map it
    like any OtlpDecodeError: HTTP 400 / gRPC INVALID_ARGUMENT (the sender must not retry)."""


def varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    if pos >= end:
        raise RouteError("malformed OTLP/protobuf: truncated (a varint runs past its message)")
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    result = byte & 0x7F
    shift = 7
    pos += 1
    while True:
        if pos >= end:
            raise RouteError("malformed OTLP/protobuf: truncated (a varint runs past its message)")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise RouteError("malformed OTLP/protobuf: a varint is longer than 10 bytes")


def skip(buf: bytes, key: int, pos: int, end: int) -> tuple[int, int]:
    """Skip one field's value; returns (payload start, field end). The payload start is only
    meaningful for length-delimited fields."""
    wire_type = key & 7
    if key >> 3 == 0:
        raise RouteError("malformed OTLP/protobuf: field number 0")
    if wire_type == 2:
        length, pos = varint(buf, pos, end)
        stop = pos + length
        if stop > end:
            raise RouteError(
                f"malformed OTLP/protobuf: a field of {length} bytes runs past the end of its "
                f"message ({end - pos} bytes left)"
            )
        return pos, stop
    if wire_type == 0:
        _, stop = varint(buf, pos, end)
        return pos, stop
    if wire_type == 1:
        stop = pos + 8
    elif wire_type == 5:
        stop = pos + 4
    else:
        raise RouteError(
            f"malformed OTLP/protobuf: wire type {wire_type} (field {key >> 3}) is not used by OTLP"
        )
    if stop > end:
        raise RouteError(
            "malformed OTLP/protobuf: truncated (a fixed-size field runs past the end)"
        )
    return pos, stop


def bytes_fields(buf: bytes, start: int, end: int, number: int) -> list[tuple[int, int]]:
    """Where every length-delimited field `number` (< 16) of a message lies (payload start and
    end, in order). One-byte tags and lengths, the usual case, are read inline; anything longer
    goes through `_varint`."""
    wanted = (number << 3) | 2
    found: list[tuple[int, int]] = []
    pos = start
    while pos < end:
        tag = buf[pos]
        if tag < 0x80:
            pos += 1
            wire_type = tag & 7
            if tag < 8:
                raise RouteError("malformed OTLP/protobuf: field number 0")
        else:
            tag, pos = varint(buf, pos, end)
            wire_type = tag & 7
        if wire_type == 2:
            if pos >= end:
                raise RouteError("malformed OTLP/protobuf: truncated (a length runs past the end)")
            length = buf[pos]
            if length < 0x80:
                pos += 1
            else:
                length, pos = varint(buf, pos, end)
            stop = pos + length
            if stop > end:
                raise RouteError(
                    f"malformed OTLP/protobuf: a field of {length} bytes runs past the end of "
                    f"its message ({end - pos} bytes left)"
                )
            if tag == wanted:
                found.append((pos, stop))
            pos = stop
        else:
            _, pos = skip(buf, tag, pos, end)
    return found


def last_bytes_field(buf: bytes, start: int, end: int, number: int) -> bytes | None:
    """The last length-delimited field `number` of a message: when protobuf parses, the last
    occurrence of a field wins."""
    found = bytes_fields(buf, start, end, number)
    if not found:
        return None
    first, last = found[-1]
    return buf[first:last]


# The key field of a KeyValue whose key is `conversation.id`, as it is on the wire wherever it
# sits in the KeyValue: a message without these bytes has no such attribute.
_CONVERSATION_FIELD = bytes((0x0A, len(CONVERSATION_KEY))) + CONVERSATION_KEY


def conversation_of(buf: bytes, start: int, end: int, attributes_field: int) -> str | None:
    """The `conversation.id` attribute of a message whose repeated KeyValue is
    `attributes_field` (a later duplicate key wins, as in decoding); None if absent."""
    hit = buf.find(_CONVERSATION_FIELD, start, end)
    if hit < 0:
        return None
    value: bytes | None = None
    seen = False
    pattern_size = len(_CONVERSATION_FIELD)
    for payload, stop in bytes_fields(buf, start, end, attributes_field):
        if hit >= stop:
            continue
        if hit < payload:  # the bytes seen lie elsewhere: look for them again from here
            hit = buf.find(_CONVERSATION_FIELD, payload, end)
            if hit < 0:
                break
            if hit >= stop:
                continue
        # The usual shape, key then value and nothing else, read without a walk.
        value_at = payload + pattern_size
        if (
            hit == payload
            and value_at + 1 < stop
            and buf[value_at] == TAG_FIELD_2
            and buf[value_at + 1] == stop - value_at - 2 < 0x80
        ):
            seen = True
            value = buf[value_at + 2 : stop]
        elif last_bytes_field(buf, payload, stop, 1) == CONVERSATION_KEY:
            seen = True
            value = last_bytes_field(buf, payload, stop, 2)
        hit = buf.find(_CONVERSATION_FIELD, stop, end)
        if hit < 0:
            break
    if not seen:
        return None
    return _conversation_text(value or b"")


def _conversation_text(value: bytes) -> str:
    """The conversation id as the normalizer reads it (`values.name` of the decoded value)."""
    # A plain short string, the usual case: AnyValue field 1 and nothing else.
    if len(value) >= 2 and value[0] == 0x0A and value[1] == len(value) - 2 < 0x80:
        try:
            return values.name(value[2:].decode("utf-8"))
        except UnicodeDecodeError:
            pass  # the parse below words the error
    any_value = AnyValue()
    try:
        any_value.ParseFromString(value)
    except DecodeError as exc:
        raise RouteError(f"malformed OTLP/protobuf: {CONVERSATION_ID} value: {exc}") from exc
    return values.name(any_value_to_python(any_value))


def resource_conversation(data: bytes, headers: list[tuple[int, int]]) -> str | None:
    """`conversation.id` of a ResourceLogs' resource, given where its fields other than its
    records lie (field 1 is the resource; several occurrences merge, so the last attribute of
    that key over all of them wins)."""
    found: str | None = None
    for start, end in headers:
        key, pos = varint(data, start, end)
        if key != TAG_FIELD_1:
            continue
        payload, stop = skip(data, key, pos, end)
        value = conversation_of(data, payload, stop, 1)
        if value is not None:
            found = value
    return found
