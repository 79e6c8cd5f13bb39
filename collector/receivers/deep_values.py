"""Cutting values nested too deep, before the protobuf parser refuses the whole request.

upb refuses a message nested deeper than PARSER_MAX_DEPTH, and decoding replaces a value
nested past `max_value_depth` by a marker anyway: so a body that may hold such values is
rewritten on the wire first, each too-deep attribute or body value replaced by the marker
string and everything else copied as it is.
"""

from __future__ import annotations

from mast_otel.collector.receivers.limits import (
    PARSER_MAX_DEPTH,
    SCHEMAS,
    Malformed,
    RequestCost,
    varint_rest,
)

__all__ = ["cut_deep_values", "needs_cut"]

_ANY_VALUE = "opentelemetry.proto.common.v1.AnyValue"
# AnyValue fields holding nested values: array_value, kvlist_value.
_CONTAINER_FIELDS = (5, 6)


def needs_cut(cost: RequestCost, max_value_depth: int) -> bool:
    """Whether a body this deep may hold a value nested past `max_value_depth` or past what
    the parser takes (an attribute value sits 6 messages deep, each level of nesting adds 2
    or 3)."""
    return cost.depth > min(PARSER_MAX_DEPTH - 3, 4 + 2 * max_value_depth)


def cut_deep_values(data: bytes, signal: str, max_value_depth: int, marker: str) -> bytes:
    """`data` with every attribute or body value nested deeper than `max_value_depth`, or so
    deep the parser would refuse the whole request, replaced by the string `marker` (what
    decoding puts in place of a value past `max_value_depth` anyway). Untouched parts are
    copied as they are; a body that is not valid protobuf is returned unchanged, for the
    parser to reject."""
    root, schema = SCHEMAS[signal]
    encoded = marker.encode()
    replacement = b"\x0a" + _varint_bytes(len(encoded)) + encoded
    try:
        rewritten = _rewrite(
            memoryview(data), 0, len(data), root, 1, 0, schema, max_value_depth, replacement
        )
    except (Malformed, IndexError):
        return data
    return data if rewritten is None else rewritten


def _varint_bytes(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_varint(view: memoryview, pos: int) -> tuple[int, int]:
    byte = view[pos]
    if byte < 0x80:
        return byte, pos + 1
    return varint_rest(view, pos + 1, byte)


def _holds_container(view: memoryview, pos: int, end: int) -> bool:
    while pos < end:
        key, pos = _read_varint(view, pos)
        wire = key & 7
        if (key >> 3) in _CONTAINER_FIELDS:
            return True
        if wire == 0:
            _, pos = _read_varint(view, pos)
        elif wire == 2:
            length, pos = _read_varint(view, pos)
            pos += length
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise Malformed
    return False


def _rewrite(
    view: memoryview,
    start: int,
    end: int,
    type_name: str,
    depth: int,
    value_depth: int,
    schema: dict[str, dict[int, str]],
    max_value_depth: int,
    replacement: bytes,
) -> bytes | None:
    """The message in view[start:end] with too-deep values cut, or None if nothing changed.
    Recurses at most PARSER_MAX_DEPTH levels: anything deeper is cut before it is entered."""
    children = schema[type_name]
    pieces: list[bytes | memoryview] = []
    last = start
    pos = start
    while pos < end:
        key, pos = _read_varint(view, pos)
        wire = key & 7
        if wire == 0:
            _, pos = _read_varint(view, pos)
            continue
        if wire == 1:
            pos += 8
            continue
        if wire == 5:
            pos += 4
            continue
        if wire != 2:
            raise Malformed
        tag_end = pos
        length, pos = _read_varint(view, pos)
        child_start, child_end = pos, pos + length
        pos = child_end
        if child_end > end:
            raise Malformed
        child = children.get(key >> 3)
        if child is None:
            continue
        child_depth = depth + 1
        new: bytes | None
        if child == _ANY_VALUE:
            child_value_depth = value_depth + 1
            if child_value_depth > max_value_depth or (
                child_depth + 3 > PARSER_MAX_DEPTH
                and _holds_container(view, child_start, child_end)
            ):
                new = replacement
            else:
                new = _rewrite(
                    view,
                    child_start,
                    child_end,
                    child,
                    child_depth,
                    child_value_depth,
                    schema,
                    max_value_depth,
                    replacement,
                )
        elif child_depth >= PARSER_MAX_DEPTH:
            new = b""
        else:
            new = _rewrite(
                view,
                child_start,
                child_end,
                child,
                child_depth,
                value_depth,
                schema,
                max_value_depth,
                replacement,
            )
        if new is not None:
            pieces += (view[last:tag_end], _varint_bytes(len(new)), new)
            last = child_end
    if not pieces:
        return None
    pieces.append(view[last:end])
    return b"".join(pieces)
