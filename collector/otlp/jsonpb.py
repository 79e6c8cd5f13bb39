"""OTLP/JSON and OTLP files into protobuf request objects.

OTLP/JSON is protobuf's JSON mapping with one deliberate difference: trace and span ids are
hex strings, not base64. Rather than re-implementing the mapping, ids are rewritten to base64
and the rest is left to `google.protobuf.json_format`, which already accepts lowerCamelCase
and original field names, enums as integers, and 64-bit integers as strings or numbers.

`read_otlp_file` feeds the offline `analyze` command from what the OpenTelemetry Collector's
file exporter writes (JSON lines, or length-prefixed protobuf) or from a single serialized
request, one request at a time so large captures are not loaded as a whole when avoidable.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import os
import re
from collections.abc import Iterator
from typing import IO, Any, Literal, cast

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.otlp.decode import OtlpDecodeError, parse_logs_request, parse_trace_request

__all__ = [
    "OtlpRequest",
    "Signal",
    "logs_request_from_json",
    "parse_logs_json",
    "parse_trace_json",
    "read_otlp_file",
    "trace_request_from_json",
]

OtlpRequest = ExportTraceServiceRequest | ExportLogsServiceRequest
Signal = Literal["traces", "logs"]

# Long nested ParseError chains are unreadable past this point.
_MAX_MESSAGE_CHARS = 400

_TRACE_KEYS = ("resourceSpans", "resource_spans")
_LOGS_KEYS = ("resourceLogs", "resource_logs")
# Other signals a file exporter may write to the same file; not ours to analyze.
_OTHER_SIGNAL_KEYS = ("resourceMetrics", "resource_metrics", "resourceProfiles")


def _shorten(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE_CHARS else text[: _MAX_MESSAGE_CHARS - 3] + "..."


# OTLP's integers are 64-bit at most (20 digits with a sign); a longer one cannot be a value,
# and converting it costs time quadratic in its length (Python refuses past 4,300 digits).
_MAX_INT_DIGITS = 20


class _IntTooLong(Exception):
    pass


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_INT_DIGITS:
        raise _IntTooLong(len(text.lstrip("-")))
    return int(text)


def _load_json(data: bytes | str) -> Any:
    try:
        return json.loads(data, parse_int=_parse_int)
    except _IntTooLong as exc:
        raise OtlpDecodeError(
            f"malformed OTLP/JSON: an integer of {exc.args[0]} digits is out of range "
            f"(OTLP integers are 64-bit, at most {_MAX_INT_DIGITS} digits)"
        ) from None
    except json.JSONDecodeError as exc:
        raise OtlpDecodeError(
            f"malformed OTLP/JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
    except UnicodeDecodeError as exc:
        raise OtlpDecodeError(f"malformed OTLP/JSON: body is not valid UTF-8 ({exc})") from exc
    except RecursionError as exc:
        raise OtlpDecodeError("malformed OTLP/JSON: nested too deeply") from exc


def _items(container: Any, *keys: str) -> list[Any]:
    """The list under the first present key; anything that is not a list is left for
    json_format to report with its own, more precise, message."""
    if not isinstance(container, dict):
        return []
    for key in keys:
        value = container.get(key)
        if isinstance(value, list):
            return value
    return []


def _hex_ids_to_base64(obj: Any, where: str, *names: tuple[str, str]) -> None:
    if not isinstance(obj, dict):
        return
    for camel, snake in names:
        for key in (camel, snake):
            if key not in obj:
                continue
            value = obj[key]
            if value is None or value == "":
                continue
            if not isinstance(value, str):
                raise OtlpDecodeError(
                    f"{where}.{key}: must be a hex string, got {type(value).__name__}"
                )
            try:
                raw = binascii.unhexlify(value)
            except (binascii.Error, ValueError) as exc:
                raise OtlpDecodeError(
                    f"{where}.{key}: {value[:40]!r} is not a hex string "
                    "(OTLP/JSON encodes trace and span ids as hex, not base64)"
                ) from exc
            obj[key] = base64.b64encode(raw).decode("ascii")


_SPAN_IDS = (("traceId", "trace_id"), ("spanId", "span_id"), ("parentSpanId", "parent_span_id"))
_LINK_IDS = (("traceId", "trace_id"), ("spanId", "span_id"))


def _rewrite_trace_ids(doc: dict[str, Any]) -> None:
    for i, rs in enumerate(_items(doc, *_TRACE_KEYS)):
        for j, ss in enumerate(_items(rs, "scopeSpans", "scope_spans")):
            for k, span in enumerate(_items(ss, "spans")):
                where = f"resourceSpans[{i}].scopeSpans[{j}].spans[{k}]"
                _hex_ids_to_base64(span, where, *_SPAN_IDS)
                for n, link in enumerate(_items(span, "links")):
                    _hex_ids_to_base64(link, f"{where}.links[{n}]", *_LINK_IDS)


def _rewrite_log_ids(doc: dict[str, Any]) -> None:
    for i, rl in enumerate(_items(doc, *_LOGS_KEYS)):
        for j, sl in enumerate(_items(rl, "scopeLogs", "scope_logs")):
            for k, log in enumerate(_items(sl, "logRecords", "log_records")):
                where = f"resourceLogs[{i}].scopeLogs[{j}].logRecords[{k}]"
                _hex_ids_to_base64(log, where, *_LINK_IDS)


def _parse_dict(doc: Any, message: Any, what: str) -> None:
    try:
        json_format.ParseDict(doc, message, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise OtlpDecodeError(_shorten(f"invalid OTLP/JSON {what}: {exc}")) from exc
    except (TypeError, ValueError, AttributeError, RecursionError, SystemError) as exc:
        # SystemError: upb reports text it cannot encode (a lone surrogate such as "\ud800"
        # in a key) this way.
        raise OtlpDecodeError(_shorten(f"invalid OTLP/JSON {what}: {exc}")) from exc


def _require_object(doc: Any, what: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise OtlpDecodeError(
            f"invalid OTLP/JSON {what}: expected a JSON object, got {type(doc).__name__}"
        )
    return doc


def trace_request_from_json(doc: Any) -> ExportTraceServiceRequest:
    """Build an ExportTraceServiceRequest from already-loaded OTLP/JSON (mutates `doc`)."""
    what = "ExportTraceServiceRequest"
    obj = _require_object(doc, what)
    _rewrite_trace_ids(obj)
    request = ExportTraceServiceRequest()
    _parse_dict(obj, request, what)
    return request


def logs_request_from_json(doc: Any) -> ExportLogsServiceRequest:
    """Build an ExportLogsServiceRequest from already-loaded OTLP/JSON (mutates `doc`)."""
    what = "ExportLogsServiceRequest"
    obj = _require_object(doc, what)
    _rewrite_log_ids(obj)
    request = ExportLogsServiceRequest()
    _parse_dict(obj, request, what)
    return request


def parse_trace_json(data: bytes | str) -> ExportTraceServiceRequest:
    """Parse an OTLP/JSON trace export body; raises OtlpDecodeError on any problem."""
    return trace_request_from_json(_load_json(data))


def parse_logs_json(data: bytes | str) -> ExportLogsServiceRequest:
    """Parse an OTLP/JSON logs export body; raises OtlpDecodeError on any problem."""
    return logs_request_from_json(_load_json(data))


# --- Files -----------------------------------------------------------------------------------


def _request_from_doc(doc: Any, where: str) -> OtlpRequest | None:
    if not isinstance(doc, dict):
        raise OtlpDecodeError(f"{where}: expected a JSON object, got {type(doc).__name__}")
    try:
        if any(key in doc for key in _TRACE_KEYS):
            return trace_request_from_json(doc)
        if any(key in doc for key in _LOGS_KEYS):
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
