"""What a request may cost a receiver, worked out before the cost is paid.

A protobuf body is decoded into one object per message it holds (a span, an attribute, an
array value...), and an empty message takes two bytes on the wire: 16 MB of empty spans is 8
million objects, well over a gigabyte once parsed. So before anything is parsed, each request's
objects are counted from the wire format (a walk over field headers that allocates nothing per
object, and stops as soon as the count passes the cap), JSON's from its brackets and commas.
The count and the body's size give the memory the decode will take; that is taken from a
budget shared by every request in flight on both receivers, and a request that does not fit is
refused with OTLP's retryable status (it fits once others finish) or, if it could never fit,
with a non-retryable one.

Also here: gzip and deflate inflation in one bounded, linear pass (a body made of many gzip
members cannot cost more than its members and output caps allow).
"""

from __future__ import annotations

import threading
import zlib
from dataclasses import dataclass

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

__all__ = [
    "BYTE_COST",
    "DECODERS",
    "OBJECT_COST",
    "PARSER_MAX_DEPTH",
    "SCHEMAS",
    "BodyError",
    "Malformed",
    "MemoryBudget",
    "RequestCost",
    "TooLarge",
    "count_json_objects",
    "count_protobuf_objects",
    "inflate",
    "request_cost",
    "varint_rest",
]

# Memory a decode takes, measured with upb and the decoder on CPython 3.11: about 170 bytes
# per protobuf message parsed (empty or not); with the records built from them, 275 bytes per
# object counted for spans holding only their ids (the worst case: fewest fields per record),
# rounded up. OTLP/JSON peaked at 130 per object counted. And each body byte is held a few
# times over (the body, its decompressed copy, strings copied out).
OBJECT_COST = 384
BYTE_COST = 3


class TooLarge(Exception):
    """A request that can never be taken whatever the load (not retryable: 413 /
    INVALID_ARGUMENT), with the reason and what to change."""


class BodyError(Exception):
    """A body that cannot be decompressed (400), or inflates past a bound (413)."""

    def __init__(self, message: str, *, too_large: bool = False) -> None:
        super().__init__(message)
        self.too_large = too_large


# --- counting objects on the wire ----------------------------------------------------------


def _message_fields(root: Descriptor) -> dict[str, dict[int, str]]:
    """For each message type reachable from `root`: field number → the full name of the
    message type it holds (only message-typed fields are listed)."""
    table: dict[str, dict[int, str]] = {}
    todo = [root]
    while todo:
        descriptor = todo.pop()
        if descriptor.full_name in table:
            continue
        fields: dict[int, str] = {}
        for field in descriptor.fields:
            child = field.message_type
            if field.type == FieldDescriptor.TYPE_MESSAGE and child is not None:
                fields[field.number] = child.full_name
                todo.append(child)
        table[descriptor.full_name] = fields
    return table


_TRACE_ROOT = trace_service_pb2.ExportTraceServiceRequest.DESCRIPTOR
_LOGS_ROOT = logs_service_pb2.ExportLogsServiceRequest.DESCRIPTOR
# Per signal: the request's message type and, for every message type it reaches, field number
# → the message type that field holds.
SCHEMAS = {
    "traces": (_TRACE_ROOT.full_name, _message_fields(_TRACE_ROOT)),
    "logs": (_LOGS_ROOT.full_name, _message_fields(_LOGS_ROOT)),
}
# The same, keyed by the whole field key of a length-delimited field (number << 3 | 2), as
# read from the wire.
_CHILD_KEYS = {
    signal: {
        name: {number << 3 | 2: child for number, child in fields.items()}
        for name, fields in schema.items()
    }
    for signal, (_, schema) in SCHEMAS.items()
}
# upb, the protobuf parser, refuses a message nested deeper than this (its default limit,
# which its Python binding does not let us raise).
PARSER_MAX_DEPTH = 100


class Malformed(Exception):
    """The body is not valid protobuf where it was walked."""


def count_protobuf_objects(data: bytes | bytearray | memoryview, signal: str, cap: int) -> int:
    """Messages (and repeated elements) `data` would decode into, counted from the wire
    format; stops and returns `cap + 1` as soon as the count passes `cap`.

    Every field occurrence counts one (a repeated string element or a nested message alike),
    and messages of the OTLP schema are walked into. A body that is not valid protobuf is
    counted as far as it goes: the parser rejects it anyway, at a cost bounded by its size.
    """
    return _walk(data, signal, cap)[0]


def _walk(data: bytes | bytearray | memoryview, signal: str, cap: int) -> tuple[int, int]:
    """(objects counted, deepest message nesting seen); see `count_protobuf_objects`."""
    root, _ = SCHEMAS[signal]
    keys = _CHILD_KEYS[signal]
    buf = data if isinstance(data, bytes | bytearray) else bytes(data)
    deepest = 1
    count = 0
    # Each frame: (message type, position, end).
    stack: list[tuple[str, int, int]] = [(root, 0, len(buf))]
    pop = stack.pop
    push = stack.append
    try:
        while stack:
            type_name, pos, end = pop()
            children = keys[type_name]
            while pos < end:
                # Field header (varint).
                key = buf[pos]
                pos += 1
                if key >= 0x80:
                    key, pos = varint_rest(buf, pos, key)
                count += 1
                if count > cap:
                    return cap + 1, deepest
                wire = key & 7
                if wire == 2:
                    length = buf[pos]
                    pos += 1
                    if length >= 0x80:
                        length, pos = varint_rest(buf, pos, length)
                    child = children.get(key)
                    if child is not None and length:
                        # Come back to the rest of this message after the child.
                        push((type_name, pos + length, end))
                        push((child, pos, pos + length))
                        if len(stack) > deepest:
                            deepest = len(stack)
                        break
                    pos += length
                elif wire == 0:
                    while buf[pos] & 0x80:
                        pos += 1
                    pos += 1
                elif wire == 1:
                    pos += 8
                elif wire == 5:
                    pos += 4
                else:
                    raise Malformed
    except (Malformed, IndexError):
        return count, deepest
    return count, deepest


def varint_rest(view: bytes | bytearray | memoryview, pos: int, first: int) -> tuple[int, int]:
    value = first & 0x7F
    shift = 7
    while True:
        byte = view[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise Malformed


def count_json_objects(data: bytes | bytearray | memoryview) -> int:
    """An upper bound on the values a JSON body decodes into: every value but the first
    follows a `,`, a `:` or an opening bracket (in C, one pass per character kind)."""
    raw = bytes(data) if isinstance(data, memoryview) else data
    return raw.count(b",") + raw.count(b":") + raw.count(b"{") + raw.count(b"[") + 1


@dataclass(frozen=True, slots=True)
class RequestCost:
    """What a request is expected to take: its objects and the memory they need, and how
    deep its messages nest (protobuf only; 0 for JSON)."""

    objects: int
    bytes: int
    depth: int = 0


def request_cost(
    body: bytes | bytearray, signal: str, encoding: str, max_objects: int
) -> RequestCost:
    """Count `body`'s objects (up to `max_objects` + 1) and price them; raises TooLarge when
    the count passes `max_objects`."""
    depth = 0
    if encoding == "json":
        objects = count_json_objects(body)
    else:
        objects, depth = _walk(body, signal, max_objects)
    if objects > max_objects:
        raise TooLarge(
            f"the request decodes into more than {max_objects} objects "
            "(receivers.max_request_objects): send smaller batches"
        )
    return RequestCost(objects, objects * OBJECT_COST + len(body) * BYTE_COST, depth)


# --- a memory budget shared by requests in flight ------------------------------------------


class MemoryBudget:
    """Bytes that requests in flight may hold at once (their bodies, then what decoding them
    takes). Never waits: `try_take` says no when the budget is spent, and the caller refuses
    the request with a retryable status."""

    def __init__(self, total: int) -> None:
        if total <= 0:
            raise ValueError("a memory budget must be positive")
        self.total = total
        self._used = 0
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        with self._lock:
            return self._used

    def try_take(self, n: int) -> bool:
        with self._lock:
            if self._used + n > self.total:
                return False
            self._used += n
            return True

    def give_back(self, n: int) -> None:
        with self._lock:
            self._used = max(0, self._used - n)


# --- bounded inflation ---------------------------------------------------------------------

# Content-Encoding → zlib window bits: gzip framing, or the zlib framing HTTP calls "deflate".
DECODERS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


_INFLATE_CHUNK = 16 * 1024


def inflate(body: bytes | bytearray, encoding: str, limit: int, max_members: int) -> bytes:
    """Inflate a gzip/deflate body (every gzip member, at most `max_members` of them) without
    ever holding more than `limit` + 1 bytes of output. Linear in the body's size: input is
    fed in small slices of one memoryview, so what zlib copies back after a member ends is at
    most a slice, however many members follow."""
    out = bytearray()
    view = memoryview(body)
    size = len(view)
    pos = 0
    members = 0
    while True:
        members += 1
        if members > max_members:
            raise BodyError(
                f"{encoding} request body has more than {max_members} members "
                "(receivers.http.max_gzip_members)",
                too_large=True,
            )
        decompressor = zlib.decompressobj(DECODERS[encoding])
        try:
            while not decompressor.eof:
                if pos >= size:
                    raise BodyError(f"truncated {encoding} request body")
                data: bytes | memoryview = view[pos : pos + _INFLATE_CHUNK]
                pos += len(data)
                while data:
                    out += decompressor.decompress(data, limit + 1 - len(out))
                    if len(out) > limit:
                        raise BodyError(
                            f"decompressed request body exceeds the limit of {limit} bytes",
                            too_large=True,
                        )
                    if decompressor.eof:
                        break
                    data = decompressor.unconsumed_tail
        except zlib.error as exc:
            raise BodyError(f"malformed {encoding} request body: {exc}") from exc
        pos -= len(decompressor.unused_data)
        if pos >= size:
            return bytes(out)
        if encoding != "gzip":
            raise BodyError(f"trailing data after {encoding} request body")
