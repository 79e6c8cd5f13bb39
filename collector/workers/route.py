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
differently there: such a run would be split. Which worker owns a key is `shard.shard_for`.

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
runtime, and as a second reading that tests hold the first to. The wire is read by `wire`
(linear in the bytes; what is malformed raises `RouteError`).

OTLP/JSON bodies are parsed as the receivers parse them and re-encoded as protobuf before
routing, so every shard's request is protobuf, whatever the body's encoding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from mast_otel.collector.otlp.decode import (  # the decoder's own id rule, so both reject alike
    OtlpDecodeError,
    _id_problem,
    parse_logs_request,
    parse_trace_request,
)
from mast_otel.collector.otlp.jsonpb import parse_logs_json, parse_trace_json
from mast_otel.collector.workers.shard import (
    MAX_SHARDS,
    SHARD_CACHE_KEYS,
    cache_for,
    check_n,
    log_run_key,
    shard_for,
    shard_for_hex,
    shard_of,
)
from mast_otel.collector.workers.wire import (
    LOG_ATTRIBUTES,
    LOG_TRACE_ID,
    SPAN_TRACE_ID,
    TAG_FIELD_1,
    TAG_FIELD_2,
    RouteError,
    conversation_of,
    last_bytes_field,
    resource_conversation,
    skip,
    varint,
)

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
    cache = cache_for(n)
    index = 0
    pos = 0
    while pos < end:
        field_start = pos
        key, pos = varint(data, pos, end)
        r_start, pos = skip(data, key, pos, end)
        if key != TAG_FIELD_1:
            request_headers.append((field_start, pos))
            continue
        resource = _Resource(field_start, pos, [], [])
        resources.append(resource)
        r_end = pos
        resource_id: str | None = None
        resource_id_read = False
        q = r_start
        while q < r_end:
            scope_start = q
            key, q = varint(data, q, r_end)
            s_start, q = skip(data, key, q, r_end)
            if key != TAG_FIELD_2:
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
                if data[s] == TAG_FIELD_2 and s + 2 < s_end:
                    length = data[s + 1]
                    if length < 0x80:
                        payload = s + 2
                    elif data[s + 2] < 0x80:
                        length = (length & 0x7F) | (data[s + 2] << 7)
                        payload = s + 3
                    else:
                        length, payload = varint(data, s + 1, s_end)
                    s = payload + length
                    if s > s_end:
                        raise RouteError(
                            f"malformed OTLP/protobuf: a record of {length} bytes runs past "
                            f"the end of its scope ({s_end - payload} bytes left)"
                        )
                else:
                    key, s = varint(data, s, s_end)
                    payload, s = skip(data, key, s, s_end)
                    if key != TAG_FIELD_2:
                        scope.headers.append((record_start, s))
                        continue
                if keys is not None:
                    if index >= len(keys):
                        raise RouteError("malformed OTLP/protobuf: records do not match the parse")
                    trace_id = keys[index]
                    index += 1
                elif traces:
                    trace_id = last_bytes_field(data, payload, s, SPAN_TRACE_ID) or b""
                else:
                    trace_id = last_bytes_field(data, payload, s, LOG_TRACE_ID)
                    if trace_id is not None and len(trace_id) != 16:
                        trace_id = None
                if trace_id is not None:
                    run_key = trace_id
                else:
                    # As the Codex normalizer reads it: an empty value on the record falls
                    # back to the resource's.
                    conversation = conversation_of(data, payload, s, LOG_ATTRIBUTES)
                    if not conversation:
                        if not resource_id_read:
                            resource_id = resource_conversation(data, resource.headers)
                            resource_id_read = True
                        conversation = resource_id
                    run_key = log_run_key(b"", conversation or "")
                if n == 1:
                    shard = 0
                else:
                    shard = cache.get(run_key, -1)
                    if shard < 0:
                        shard = cache[run_key] = shard_of(run_key, n)
                records.append((record_start, s, shard))
                counts[shard] = counts.get(shard, 0) + 1
    if keys is not None and index != len(keys):
        raise RouteError("malformed OTLP/protobuf: records do not match the parse")
    return request_headers, resources, counts


Pieces = list[bytes | memoryview]


def _wrapped(tag: int, pieces: Pieces) -> Pieces:
    """A length-delimited field around `pieces`, still in pieces (joined once, at the end)."""
    size = sum(len(piece) for piece in pieces)
    head = bytearray((tag,))
    while size >= 0x80:
        head.append((size & 0x7F) | 0x80)
        size >>= 7
    head.append(size)
    return [bytes(head), *pieces]


def _assemble(
    data: bytes, request_headers: list[tuple[int, int]], resources: list[_Resource]
) -> dict[int, bytes]:
    """Each shard's request from slices of `data`: one copy of each byte."""
    view = memoryview(data)
    parts: dict[int, Pieces] = {}
    for resource in resources:
        scopes: dict[int, Pieces] = {}
        for scope in resource.scopes:
            if not scope.records:
                continue
            first = scope.records[0][2]
            if all(shard == first for _, _, shard in scope.records):
                scopes.setdefault(first, []).append(view[scope.start : scope.end])
                continue
            by_shard: dict[int, Pieces] = {}
            for start, end, shard in scope.records:
                records = by_shard.get(shard)
                if records is None:
                    records = by_shard[shard] = [view[a:b] for a, b in scope.headers]
                records.append(view[start:end])
            for shard, records in by_shard.items():
                scopes.setdefault(shard, []).extend(_wrapped(TAG_FIELD_2, records))
        if len(scopes) == 1 and all(scope.records for scope in resource.scopes):
            (shard,) = scopes
            parts.setdefault(shard, []).append(view[resource.start : resource.end])
            continue
        resource_head: Pieces = [view[a:b] for a, b in resource.headers]
        for shard, pieces in scopes.items():
            parts.setdefault(shard, []).extend(_wrapped(TAG_FIELD_1, resource_head + pieces))
    head: Pieces = [view[a:b] for a, b in request_headers]
    return {shard: b"".join(head + pieces) for shard, pieces in sorted(parts.items())}


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
    check_n(n)
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
    check_n(n)
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
