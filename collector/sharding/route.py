"""One OTLP export request split into one request per worker, by run.

A run lives wholly in one worker, so every span and log record goes to the worker that owns its
run. The run of a span is its trace id. The run of a log record is its trace id when it has one
(16 bytes, as `decode_logs` requires); otherwise it is the Codex conversation the record belongs
to (`conversation.id` on the record, else on its resource), whose run trace id the Codex
normalizer derives as `stable_hex("codex", conversation)`. Routing on that derived id sends a
log-only run to the same worker as any span that carries the id. A log record with neither a
trace id nor a conversation id is routed as the conversation "" (the normalizer puts all of them
in the run `stable_hex("codex", "")`), so it, too, lands where its run is: one fixed worker for
a given number of workers, whatever its resource. The key is read from the record as it was
sent; the worker's limits run before the normalizer, so a conversation id they change (one past
`max_attributes_per_span` attributes, or longer than `max_attribute_value_bytes`) would be keyed
differently there: such a run would be split.

`shard_for` is the one shard function, the same in every process and every run (a keyed 64-bit
BLAKE2b of the key, modulo N): replay after a crash calls it again on the spooled bytes and gets
the same workers for the same N (a restart with another N replays every spooled request through
it again, so runs still land whole). It does not reuse the CRC32 ring of the load balancer in
front of a fleet of replicas (deploy/scale-out.md): a replica receives the trace ids of a few
arcs of that ring, and a hash correlated with it would spread them unevenly over the replica's
workers.

How a request is split, without decoding its records into Python objects: the protobuf wire
format is walked (tags and lengths) at the four levels that matter (request → ResourceSpans →
ScopeSpans → Span, the same for logs), and each record's bytes are sliced out whole. Each
shard's request is assembled from those slices: the fields of every container other than its
records (Resource and Scope, schema_url, unknown fields) are copied as they are into every
shard that gets records from that container; a container all of whose records go to one shard
is copied whole; containers with no records for a shard are left out of it. Field order is kept
within each repeated field, so each shard decodes to exactly the input's records of that shard,
with their resource and scope.

Validation (`validate=True`, the default) first parses the whole request with the protobuf
runtime the receivers use (C, no Python objects per attribute), so a request is refused by the
router exactly when a receiver would refuse it today, before it is acknowledged; the record keys
then come from the parsed message, which also counts the spans a decode would reject for their
ids (`Routed.rejected`: the receiving process can answer the same OTLP partial success). With
`validate=False` nothing but the wire format is read: the keys come from walking each record's
own top-level fields (the last occurrence of a field wins, as when protobuf parses), and what
lies inside a record (attribute values, their nesting) is not checked. Both give the same
shards on any request that parses; the walk alone is the slower of the two (one Python step per
field of every record against one C parse), so it is there for bytes that need no protobuf
runtime, and as a second reading that tests hold the first to.

Work is linear in the request's bytes and every step advances, so a hostile payload cannot make
it loop; what is malformed raises `RouteError`, an `OtlpDecodeError`, which receivers answer
with HTTP 400 / gRPC INVALID_ARGUMENT.

OTLP/JSON bodies are parsed as the receivers parse them and re-encoded as protobuf before
routing, so every shard's request is protobuf, whatever the body's encoding.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Literal

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from mast_otel.collector.otlp.decode import (  # the decoder's own id rule, so both reject alike
    OtlpDecodeError,
    _id_problem,
    any_value_to_python,
    parse_logs_request,
    parse_trace_request,
)
from mast_otel.collector.otlp.jsonpb import parse_logs_json, parse_trace_json
from mast_otel.processors.ids import stable_hex
from mast_otel.processors.normalize import values
from mast_otel.processors.normalize.codex import CONVERSATION_ID

__all__ = [
    "MAX_SHARDS",
    "SHARD_CACHE_KEYS",
    "RouteError",
    "Routed",
    "log_run_key",
    "route_logs",
    "route_parsed",
    "route_request",
    "route_traces",
    "shard_for",
    "shard_for_hex",
]

Signal = Literal["traces", "logs"]
Encoding = Literal["protobuf", "json"]

# More workers than this is a configuration mistake, not a machine.
MAX_SHARDS = 1024

# Keys the hash, so shard numbers are this collector's own and not any other tool's.
_PERSON = b"mast-otel/shard"
_CONVERSATION_KEY = CONVERSATION_ID.encode()

# Field numbers. ExportTraceServiceRequest/ExportLogsServiceRequest: 1 = resource_spans/logs.
# ResourceSpans/ResourceLogs: 1 = resource, 2 = scope_spans/logs. ScopeSpans/ScopeLogs:
# 2 = spans/log_records. Span: 1 = trace_id. LogRecord: 9 = trace_id, 6 = attributes.
# Resource: 1 = attributes. KeyValue: 1 = key, 2 = value.
_TAG_FIELD_1 = 0x0A  # field 1, length-delimited
_TAG_FIELD_2 = 0x12  # field 2, length-delimited
_SPAN_TRACE_ID = 1
_LOG_TRACE_ID = 9
_LOG_ATTRIBUTES = 6


class RouteError(OtlpDecodeError):
    """The request cannot be split because it is not a valid OTLP request. Receivers map it
    like any OtlpDecodeError: HTTP 400 / gRPC INVALID_ARGUMENT (the sender must not retry)."""


@dataclass(slots=True)
class Routed:
    """Each shard's request (protobuf) and how many records it holds. Shards with no records
    are absent; a request with no records gives no shard at all."""

    shards: dict[int, bytes] = field(default_factory=dict)
    records: dict[int, int] = field(default_factory=dict)
    # Spans among them that a receiver's decode rejects for their ids (OTLP partial success),
    # with the first reason; counted only when the request was validated (0 otherwise). They
    # are routed all the same: the worker's decode leaves them out as it does today.
    rejected: int = 0
    reason: str = ""

    @property
    def total(self) -> int:
        return sum(self.records.values())


# --- the shard function -----------------------------------------------------------------------


def _check_n(n: int) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_SHARDS:
        raise ValueError(
            f"the number of shards must be an integer from 1 to {MAX_SHARDS}, got {n!r}"
        )


# A run's spans arrive over many requests: remembering recent keys' shards saves most hashes.
# Bounded: emptied when it reaches this many keys (per number of shards).
SHARD_CACHE_KEYS = 65_536
_shard_cache: dict[int, dict[bytes, int]] = {}


def _shard(key: bytes, n: int) -> int:
    digest = hashlib.blake2b(key, digest_size=8, person=_PERSON).digest()
    return int.from_bytes(digest, "little") % n


def _cache_for(n: int) -> dict[bytes, int]:
    cache = _shard_cache.get(n)
    if cache is None or len(cache) >= SHARD_CACHE_KEYS:
        cache = _shard_cache[n] = {}
    return cache


def shard_for(key: bytes, n: int) -> int:
    """The shard (0 ≤ shard < n) of a run key: a span's raw trace id, or `log_run_key` of a log
    record. The same in every process, run and machine."""
    _check_n(n)
    return _shard(key, n) if n > 1 else 0


def shard_for_hex(trace_id: str, n: int) -> int:
    """`shard_for` of a trace id written in hex, as records and steps carry it."""
    try:
        key = bytes.fromhex(trace_id)
    except ValueError as exc:
        raise ValueError(f"trace id {trace_id[:40]!r} is not hex") from exc
    return shard_for(key, n)


_conversation_keys: dict[str, bytes] = {}


def log_run_key(trace_id: bytes, conversation: str) -> bytes:
    """The run key of a log record: its trace id if it has a valid one, else the trace id the
    Codex normalizer gives the conversation's run."""
    if len(trace_id) == 16:
        return trace_id
    key = _conversation_keys.get(conversation)
    if key is None:
        if len(_conversation_keys) >= SHARD_CACHE_KEYS:
            _conversation_keys.clear()
        key = _conversation_keys[conversation] = bytes.fromhex(
            stable_hex("codex", conversation, length=32)
        )
    return key


# --- the wire format --------------------------------------------------------------------------


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
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


def _skip(buf: bytes, key: int, pos: int, end: int) -> tuple[int, int]:
    """Skip one field's value; returns (payload start, field end). The payload start is only
    meaningful for length-delimited fields."""
    wire_type = key & 7
    if key >> 3 == 0:
        raise RouteError("malformed OTLP/protobuf: field number 0")
    if wire_type == 2:
        length, pos = _varint(buf, pos, end)
        stop = pos + length
        if stop > end:
            raise RouteError(
                f"malformed OTLP/protobuf: a field of {length} bytes runs past the end of its "
                f"message ({end - pos} bytes left)"
            )
        return pos, stop
    if wire_type == 0:
        _, stop = _varint(buf, pos, end)
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


def _bytes_fields(buf: bytes, start: int, end: int, number: int) -> list[tuple[int, int]]:
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
            tag, pos = _varint(buf, pos, end)
            wire_type = tag & 7
        if wire_type == 2:
            if pos >= end:
                raise RouteError("malformed OTLP/protobuf: truncated (a length runs past the end)")
            length = buf[pos]
            if length < 0x80:
                pos += 1
            else:
                length, pos = _varint(buf, pos, end)
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
            _, pos = _skip(buf, tag, pos, end)
    return found


def _last_bytes_field(buf: bytes, start: int, end: int, number: int) -> bytes | None:
    """The last length-delimited field `number` of a message: when protobuf parses, the last
    occurrence of a field wins."""
    found = _bytes_fields(buf, start, end, number)
    if not found:
        return None
    first, last = found[-1]
    return buf[first:last]


# The key field of a KeyValue whose key is `conversation.id`, as it is on the wire wherever it
# sits in the KeyValue: a message without these bytes has no such attribute.
_CONVERSATION_FIELD = bytes((0x0A, len(_CONVERSATION_KEY))) + _CONVERSATION_KEY


def _conversation(buf: bytes, start: int, end: int, attributes_field: int) -> str | None:
    """The `conversation.id` attribute of a message whose repeated KeyValue is
    `attributes_field` (a later duplicate key wins, as in decoding); None if absent."""
    hit = buf.find(_CONVERSATION_FIELD, start, end)
    if hit < 0:
        return None
    value: bytes | None = None
    seen = False
    pattern_size = len(_CONVERSATION_FIELD)
    for payload, stop in _bytes_fields(buf, start, end, attributes_field):
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
            and buf[value_at] == _TAG_FIELD_2
            and buf[value_at + 1] == stop - value_at - 2 < 0x80
        ):
            seen = True
            value = buf[value_at + 2 : stop]
        elif _last_bytes_field(buf, payload, stop, 1) == _CONVERSATION_KEY:
            seen = True
            value = _last_bytes_field(buf, payload, stop, 2)
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


@dataclass(slots=True)
class _Scope:
    start: int  # where the field (tag) starts
    end: int
    headers: list[tuple[int, int]]
    # (field start, field end, shard) per record
    records: list[tuple[int, int, int]]


@dataclass(slots=True)
class _Resource:
    start: int
    end: int
    headers: list[tuple[int, int]]
    scopes: list[_Scope]


# --- splitting --------------------------------------------------------------------------------


@dataclass(slots=True)
class _Parsed:
    """What the parsed request says: each record's key in wire order (None for a log record
    without a trace id: its conversation decides, read from the wire), and the spans a
    receiver's decode would reject for their ids (so the receiving process can still answer an
    OTLP partial success)."""

    keys: list[bytes | None]
    rejected: int = 0
    reason: str = ""


def _read_parsed(message: ExportTraceServiceRequest | ExportLogsServiceRequest) -> _Parsed:
    parsed = _Parsed([])
    keys = parsed.keys
    if isinstance(message, ExportTraceServiceRequest):
        for resource_spans in message.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    trace_id = span.trace_id
                    keys.append(trace_id)
                    span_id = span.span_id
                    parent = span.parent_span_id
                    if len(trace_id) != 16 or len(span_id) != 8 or len(parent) not in (0, 8):
                        parsed.rejected += 1
                        parsed.reason = parsed.reason or _id_problem(trace_id, span_id, parent)
    else:
        for resource_logs in message.resource_logs:
            for scope_logs in resource_logs.scope_logs:
                for record in scope_logs.log_records:
                    trace_id = record.trace_id
                    keys.append(trace_id if len(trace_id) == 16 else None)
    return parsed


def _split(
    data: bytes, n: int, signal: Signal, keys: list[bytes | None] | None
) -> tuple[list[tuple[int, int]], list[_Resource], dict[int, int]]:
    """Walk the request; every record tagged with its shard."""
    traces = signal == "traces"
    end = len(data)
    request_headers: list[tuple[int, int]] = []
    resources: list[_Resource] = []
    counts: dict[int, int] = {}
    cache = _cache_for(n)
    index = 0
    pos = 0
    while pos < end:
        field_start = pos
        key, pos = _varint(data, pos, end)
        r_start, pos = _skip(data, key, pos, end)
        if key != _TAG_FIELD_1:
            request_headers.append((field_start, pos))
            continue
        resource = _Resource(field_start, pos, [], [])
        resources.append(resource)
        r_end = pos
        resource_conversation: str | None = None
        resource_conversation_read = False
        q = r_start
        while q < r_end:
            scope_start = q
            key, q = _varint(data, q, r_end)
            s_start, q = _skip(data, key, q, r_end)
            if key != _TAG_FIELD_2:
                resource.headers.append((scope_start, q))
                continue
            scope = _Scope(scope_start, q, [], [])
            resource.scopes.append(scope)
            s_end = q
            s = s_start
            records = scope.records
            while s < s_end:
                # The one loop that runs once per record: one-byte tags and lengths inline.
                record_start = s
                if data[s] == _TAG_FIELD_2 and s + 2 < s_end:
                    length = data[s + 1]
                    if length < 0x80:
                        payload = s + 2
                    elif data[s + 2] < 0x80:
                        length = (length & 0x7F) | (data[s + 2] << 7)
                        payload = s + 3
                    else:
                        length, payload = _varint(data, s + 1, s_end)
                    s = payload + length
                    if s > s_end:
                        raise RouteError(
                            f"malformed OTLP/protobuf: a record of {length} bytes runs past "
                            f"the end of its scope ({s_end - payload} bytes left)"
                        )
                else:
                    key, s = _varint(data, s, s_end)
                    payload, s = _skip(data, key, s, s_end)
                    if key != _TAG_FIELD_2:
                        scope.headers.append((record_start, s))
                        continue
                if keys is not None:
                    if index >= len(keys):
                        raise RouteError("malformed OTLP/protobuf: records do not match the parse")
                    trace_id = keys[index]
                    index += 1
                elif traces:
                    trace_id = _last_bytes_field(data, payload, s, _SPAN_TRACE_ID) or b""
                else:
                    trace_id = _last_bytes_field(data, payload, s, _LOG_TRACE_ID)
                    if trace_id is not None and len(trace_id) != 16:
                        trace_id = None
                if trace_id is not None:
                    run_key = trace_id
                else:
                    # As the Codex normalizer reads it: an empty value on the record falls
                    # back to the resource's.
                    conversation = _conversation(data, payload, s, _LOG_ATTRIBUTES)
                    if not conversation:
                        if not resource_conversation_read:
                            resource_conversation = _resource_conversation(data, resource)
                            resource_conversation_read = True
                        conversation = resource_conversation
                    run_key = log_run_key(b"", conversation or "")
                if n == 1:
                    shard = 0
                else:
                    shard = cache.get(run_key, -1)
                    if shard < 0:
                        shard = cache[run_key] = _shard(run_key, n)
                records.append((record_start, s, shard))
                counts[shard] = counts.get(shard, 0) + 1
    if keys is not None and index != len(keys):
        raise RouteError("malformed OTLP/protobuf: records do not match the parse")
    return request_headers, resources, counts


def _resource_conversation(data: bytes, resource: _Resource) -> str | None:
    """`conversation.id` of the resource (field 1 of ResourceLogs; several occurrences merge,
    so the last attribute of that key over all of them wins)."""
    found: str | None = None
    for start, end in resource.headers:
        key, pos = _varint(data, start, end)
        if key != _TAG_FIELD_1:
            continue
        payload, stop = _skip(data, key, pos, end)
        value = _conversation(data, payload, stop, 1)
        if value is not None:
            found = value
    return found


def _field(tag: int, body: bytes) -> bytes:
    length = len(body)
    out = bytearray((tag,))
    while length >= 0x80:
        out.append((length & 0x7F) | 0x80)
        length >>= 7
    out.append(length)
    out += body
    return bytes(out)


def _assemble(
    data: bytes, request_headers: list[tuple[int, int]], resources: list[_Resource]
) -> dict[int, bytes]:
    view = memoryview(data)
    head = b"".join(view[a:b] for a, b in request_headers)
    parts: dict[int, list[bytes | memoryview]] = {}
    for resource in resources:
        resource_parts: dict[int, list[bytes | memoryview]] = {}
        for scope in resource.scopes:
            if not scope.records:
                continue
            first = scope.records[0][2]
            if all(shard == first for _, _, shard in scope.records):
                resource_parts.setdefault(first, []).append(view[scope.start : scope.end])
                continue
            by_shard: dict[int, list[bytes | memoryview]] = {}
            for start, end, shard in scope.records:
                by_shard.setdefault(shard, []).append(view[start:end])
            scope_head = b"".join(view[a:b] for a, b in scope.headers)
            for shard, records in by_shard.items():
                body = scope_head + b"".join(records)
                resource_parts.setdefault(shard, []).append(_field(_TAG_FIELD_2, body))
        if len(resource_parts) == 1 and all(scope.records for scope in resource.scopes):
            (shard,) = resource_parts
            parts.setdefault(shard, []).append(view[resource.start : resource.end])
            continue
        resource_head = b"".join(view[a:b] for a, b in resource.headers)
        for shard, scopes in resource_parts.items():
            body = resource_head + b"".join(scopes)
            parts.setdefault(shard, []).append(_field(_TAG_FIELD_1, body))
    return {shard: head + b"".join(pieces) for shard, pieces in sorted(parts.items())}


def route_request(
    data: bytes,
    n: int,
    signal: Signal,
    encoding: Encoding = "protobuf",
    *,
    validate: bool = True,
) -> Routed:
    """Split an ExportTraceServiceRequest (`signal="traces"`) or ExportLogsServiceRequest
    (`"logs"`), serialized as protobuf or OTLP/JSON, into one protobuf request per shard.

    With n == 1 and a protobuf body, the one shard's request is `data` itself (not a copy).
    Raises RouteError on a malformed request and ValueError on a bad `n` or signal.
    """
    _check_n(n)
    if signal not in ("traces", "logs"):
        raise ValueError(f"signal must be 'traces' or 'logs', got {signal!r}")
    parsed: _Parsed | None = None
    if encoding == "json":
        try:
            message: ExportTraceServiceRequest | ExportLogsServiceRequest = (
                parse_trace_json(data) if signal == "traces" else parse_logs_json(data)
            )
        except OtlpDecodeError as exc:
            raise RouteError(str(exc)) from exc
        data = message.SerializeToString()
        parsed = _read_parsed(message)
    elif encoding != "protobuf":
        raise ValueError(f"encoding must be 'protobuf' or 'json', got {encoding!r}")
    else:
        if not isinstance(data, bytes):
            data = bytes(data)
        if validate:
            try:
                message = (
                    parse_trace_request(data) if signal == "traces" else parse_logs_request(data)
                )
            except OtlpDecodeError as exc:
                raise RouteError(str(exc)) from exc
            parsed = _read_parsed(message)
    keys = parsed.keys if parsed is not None else None
    try:
        request_headers, resources, counts = _split(data, n, signal, keys)
    except RecursionError as exc:  # pragma: no cover - the walk does not recurse
        raise RouteError("malformed OTLP/protobuf: nested too deeply") from exc
    rejected, reason = (parsed.rejected, parsed.reason) if parsed is not None else (0, "")
    if not counts:
        return Routed()
    if n == 1 and encoding == "protobuf":
        return Routed({0: data}, counts, rejected, reason)
    return Routed(_assemble(data, request_headers, resources), counts, rejected, reason)


def route_parsed(
    message: ExportTraceServiceRequest | ExportLogsServiceRequest, data: bytes, n: int
) -> Routed:
    """`route_request` for a request a receiver has parsed already (`message`, parsed from the
    protobuf `data`): the keys come from the message, so nothing is parsed twice."""
    _check_n(n)
    signal: Signal = "traces" if isinstance(message, ExportTraceServiceRequest) else "logs"
    parsed = _read_parsed(message)
    request_headers, resources, counts = _split(data, n, signal, parsed.keys)
    if not counts:
        return Routed()
    if n == 1:
        return Routed({0: data}, counts, parsed.rejected, parsed.reason)
    shards = _assemble(data, request_headers, resources)
    return Routed(shards, counts, parsed.rejected, parsed.reason)


def route_traces(data: bytes, n: int, *, validate: bool = True) -> Routed:
    """`route_request` for an ExportTraceServiceRequest in protobuf."""
    return route_request(data, n, "traces", validate=validate)


def route_logs(data: bytes, n: int, *, validate: bool = True) -> Routed:
    """`route_request` for an ExportLogsServiceRequest in protobuf."""
    return route_request(data, n, "logs", validate=validate)
