"""OTLP/JSON into protobuf request objects.

OTLP/JSON is protobuf's JSON mapping with one deliberate difference: trace and span ids are
hex strings, not base64. Rather than re-implementing the mapping, ids are rewritten to base64
and the rest is left to `google.protobuf.json_format`, which already accepts lowerCamelCase
and original field names, enums as integers, and 64-bit integers as strings or numbers.

Reading OTLP files (JSON lines, protobuf) is `collector.otlp.files`.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from mast_otel.collector.otlp.decode import OtlpDecodeError

__all__ = [
    "LOGS_KEYS",
    "TRACE_KEYS",
    "logs_request_from_json",
    "parse_logs_json",
    "parse_trace_json",
    "trace_request_from_json",
]

# Long nested ParseError chains are unreadable past this point.
_MAX_MESSAGE_CHARS = 400

# The keys an export object holds its records under (lowerCamelCase or the proto's name).
TRACE_KEYS = ("resourceSpans", "resource_spans")
LOGS_KEYS = ("resourceLogs", "resource_logs")


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
    for i, rs in enumerate(_items(doc, *TRACE_KEYS)):
        for j, ss in enumerate(_items(rs, "scopeSpans", "scope_spans")):
            for k, span in enumerate(_items(ss, "spans")):
                where = f"resourceSpans[{i}].scopeSpans[{j}].spans[{k}]"
                _hex_ids_to_base64(span, where, *_SPAN_IDS)
                for n, link in enumerate(_items(span, "links")):
                    _hex_ids_to_base64(link, f"{where}.links[{n}]", *_LINK_IDS)


def _rewrite_log_ids(doc: dict[str, Any]) -> None:
    for i, rl in enumerate(_items(doc, *LOGS_KEYS)):
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
