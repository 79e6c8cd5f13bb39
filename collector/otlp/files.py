"""OTLP files into protobuf request objects, one request at a time.

`read_otlp_file` feeds the offline `analyze` command from what the OpenTelemetry Collector's
file exporter writes (JSON lines, or length-prefixed protobuf) or from a single serialized
request, one request at a time so large captures are not loaded as a whole when avoidable.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections.abc import Iterator
from typing import IO, Any, Literal, cast

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from mast_otel.collector.otlp.decode import OtlpDecodeError, parse_logs_request, parse_trace_request
from mast_otel.collector.otlp.jsonpb import (
    LOGS_KEYS,
    TRACE_KEYS,
    logs_request_from_json,
    trace_request_from_json,
)

__all__ = ["OtlpRequest", "Signal", "read_otlp_file"]

OtlpRequest = ExportTraceServiceRequest | ExportLogsServiceRequest
Signal = Literal["traces", "logs"]

# Other signals a file exporter may write to the same file; not ours to analyze.
_OTHER_SIGNAL_KEYS = ("resourceMetrics", "resource_metrics", "resourceProfiles")


def _request_from_doc(doc: Any, where: str) -> OtlpRequest | None:
    if not isinstance(doc, dict):
        raise OtlpDecodeError(f"{where}: expected a JSON object, got {type(doc).__name__}")
    try:
        if any(key in doc for key in TRACE_KEYS):
            return trace_request_from_json(doc)
        if any(key in doc for key in LOGS_KEYS):
            return logs_request_from_json(doc)
    except OtlpDecodeError as exc:
        raise OtlpDecodeError(f"{where}: {exc}") from exc
    if any(key in doc for key in _OTHER_SIGNAL_KEYS):
        return None
    raise OtlpDecodeError(
        f"{where}: expected an OTLP export object with resourceSpans or resourceLogs, "
        f"got keys {sorted(doc)[:5]}"
    )


def _iter_json(stream: IO[bytes], name: str) -> Iterator[OtlpRequest]:
    first = True
    for lineno, line in enumerate(stream, start=1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as exc:
            if first:
                # Not JSON lines: maybe one pretty-printed document (or an array of them).
                stream.seek(0)
                yield from _iter_json_document(stream, name)
                return
            raise OtlpDecodeError(f"{name}:{lineno}: malformed JSON: {exc.msg}") from exc
        except (UnicodeDecodeError, RecursionError) as exc:
            raise OtlpDecodeError(f"{name}:{lineno}: malformed JSON: {exc}") from exc
        first = False
        # A line may also hold an array of requests.
        docs = doc if isinstance(doc, list) else [doc]
        for item in docs:
            request = _request_from_doc(item, f"{name}:{lineno}")
            if request is not None:
                yield request


def _iter_json_document(stream: IO[bytes], name: str) -> Iterator[OtlpRequest]:
    try:
        doc = json.loads(stream.read())
    except json.JSONDecodeError as exc:
        raise OtlpDecodeError(
            f"{name}:{exc.lineno}: malformed JSON: {exc.msg} (column {exc.colno})"
        ) from exc
    except (UnicodeDecodeError, RecursionError) as exc:
        raise OtlpDecodeError(f"{name}: malformed JSON: {exc}") from exc
    docs = doc if isinstance(doc, list) else [doc]
    for index, item in enumerate(docs):
        where = f"{name}[{index}]" if isinstance(doc, list) else name
        request = _request_from_doc(item, where)
        if request is not None:
            yield request


def _split_length_prefixed(data: memoryview) -> list[memoryview] | None:
    """Split the file exporter's protobuf framing (4-byte big-endian length before each
    message); None when the bytes do not chain exactly to the end, i.e. not that framing.

    A bare serialized request cannot be mistaken for it below 167 MB: it starts with the tag
    byte 0x0a, which would announce a first message of at least 0x0a000000 bytes.
    """
    messages: list[memoryview] = []
    pos = 0
    size = len(data)
    while pos < size:
        if size - pos < 4:
            return None
        length = int.from_bytes(data[pos : pos + 4], "big")
        pos += 4
        if length > size - pos:
            return None
        messages.append(data[pos : pos + length])
        pos += length
    return messages or None


# An object (or array of objects) whose first key is a plain identifier. A bare "{" or "["
# is not enough: protobuf starts with the tag byte 0x0a, which is "\n", and a length byte of
# 0x7b or 0x5b would then look like JSON.
_JSON_START = re.compile(rb'(?:\xef\xbb\xbf)?\s*(?:\[\s*)?\{\s*(?:"[A-Za-z_][A-Za-z0-9_]*"\s*:|\})')


class _Truncated(Exception):
    pass


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise _Truncated
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(buf: memoryview) -> Iterator[tuple[int, int, memoryview | None]]:
    """(field number, wire type, payload for length-delimited fields) of one message."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            _, pos = _varint(buf, pos)
            yield number, wire_type, None
        elif wire_type == 1:
            pos += 8
            yield number, wire_type, None
        elif wire_type == 2:
            length, pos = _varint(buf, pos)
            if pos + length > len(buf):
                raise _Truncated
            yield number, wire_type, buf[pos : pos + length]
            pos += length
        elif wire_type == 5:
            pos += 4
            yield number, wire_type, None
        else:
            raise _Truncated


# (field number, wire type) pairs that exist in only one of Span and LogRecord.
_SPAN_ONLY = {
    (1, 2), (2, 2), (4, 2), (6, 0), (7, 1), (8, 1), (11, 2), (12, 0), (13, 2), (14, 0), (15, 2),
    (16, 5),
}  # fmt: skip
_LOG_ONLY = {(1, 1), (2, 0), (6, 2), (7, 0), (8, 5), (10, 2), (11, 1), (12, 2)}


def _sniff_signal(data: memoryview) -> Signal | None:
    """Tell a serialized ExportTraceServiceRequest from an ExportLogsServiceRequest.

    Both start with field 1 holding resource → scope → records, so the top levels look the
    same; the records differ (a Span starts with a 16-byte id, a LogRecord with a fixed64
    timestamp), so look at the wire types of the first record's fields.
    """
    try:
        for n1, w1, resource in _fields(data):
            if n1 != 1 or w1 != 2 or resource is None:
                continue
            for n2, w2, scope in _fields(resource):
                if n2 != 2 or w2 != 2 or scope is None:
                    continue
                for n3, w3, record in _fields(scope):
                    if n3 != 2 or w3 != 2 or record is None:
                        continue
                    for n4, w4, _ in _fields(record):
                        if (n4, w4) in _SPAN_ONLY:
                            return "traces"
                        if (n4, w4) in _LOG_ONLY:
                            return "logs"
    except _Truncated:
        return None
    return None


def _parse_protobuf(data: memoryview, signal: Signal | None, where: str) -> OtlpRequest:
    chosen = signal or _sniff_signal(data) or "traces"
    try:
        if chosen == "logs":
            return parse_logs_request(data)
        return parse_trace_request(data)
    except OtlpDecodeError as exc:
        raise OtlpDecodeError(f"{where}: {exc}") from exc


def _iter_protobuf(data: bytes, signal: Signal | None, name: str) -> Iterator[OtlpRequest]:
    view = memoryview(data)
    framed = _split_length_prefixed(view)
    if framed is None:
        yield _parse_protobuf(view, signal, name)
        return
    for index, message in enumerate(framed, start=1):
        yield _parse_protobuf(message, signal, f"{name}: message {index}")


def read_otlp_file(
    path: str | os.PathLike[str], *, signal: Signal | None = None
) -> Iterator[OtlpRequest]:
    """Yield the export requests stored in an OTLP file, one at a time.

    Accepted layouts (optionally gzip-compressed):
    - OTLP/JSON lines, as the Collector's file exporter writes them: one request object per
      line, traces and logs told apart by `resourceSpans` / `resourceLogs` (metrics lines are
      skipped); a single pretty-printed object or a JSON array of objects also works;
    - OTLP/protobuf: one serialized request, or the file exporter's length-prefixed messages.

    `signal` forces the protobuf message type when sniffing would guess wrong (it cannot
    decide for requests with no records, which are then read as traces).
    Raises OtlpDecodeError naming the line (JSON) or message (protobuf) that is malformed.
    """
    name = os.fspath(path)
    with open(path, "rb") as raw:
        compressed = raw.read(2) == b"\x1f\x8b"
    stream = cast(IO[bytes], gzip.open(path, "rb") if compressed else open(path, "rb"))  # noqa: SIM115
    with stream:
        try:
            head = stream.read(4096)
        except (OSError, EOFError) as exc:
            raise OtlpDecodeError(f"{name}: cannot read: {exc}") from exc
        if not head.strip():
            return
        stream.seek(0)
        try:
            if _JSON_START.match(head):
                yield from _iter_json(stream, name)
            else:
                yield from _iter_protobuf(stream.read(), signal, name)
        except (OSError, EOFError) as exc:
            # Truncated gzip or read errors: name the file instead of leaking a bare OSError.
            raise OtlpDecodeError(f"{name}: cannot read: {exc}") from exc
