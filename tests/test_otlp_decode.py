"""OTLP decoding: protobuf requests to records, OTLP/JSON, and OTLP files."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord as PbLogRecord
from opentelemetry.proto.logs.v1.logs_pb2 import SeverityNumber
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from mast_otel.collector.otlp.decode import (
    TRUNCATED_VALUE,
    OtlpDecodeError,
    any_value_to_python,
    decode_logs,
    decode_spans,
    parse_logs_request,
    parse_trace_request,
)
from mast_otel.collector.otlp.files import read_otlp_file
from mast_otel.collector.otlp.jsonpb import parse_logs_json, parse_trace_json

TRACE_ID = bytes(range(1, 17))
SPAN_ID = bytes(range(1, 9))
PARENT_ID = bytes(range(9, 17))


def _kv(key: str, **value: Any) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(**value))


def _trace_request(*spans: Span, service: str = "agent") -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.append(_kv("service.name", string_value=service))
    rs.resource.attributes.append(_kv("host.cpus", int_value=8))
    ss = rs.scope_spans.add()
    ss.scope.name = "agent.tracer"
    ss.scope.version = "1.2.3"
    ss.spans.extend(spans)
    return request


def _span(**overrides: Any) -> Span:
    fields: dict[str, Any] = {
        "trace_id": TRACE_ID,
        "span_id": SPAN_ID,
        "name": "step",
        "start_time_unix_nano": 1_700_000_000_000_000_000,
        "end_time_unix_nano": 1_700_000_000_500_000_000,
    }
    fields.update(overrides)
    return Span(**fields)


def _nested_array(depth: int, leaf: AnyValue) -> AnyValue:
    root = AnyValue()
    current = root
    for _ in range(depth - 1):
        current = current.array_value.values.add()
    current.CopyFrom(leaf)
    return root


def _request_with_attribute(key: str, value: AnyValue) -> ExportTraceServiceRequest:
    """Built in place: copying a message between containers may round-trip it through the
    wire format, which refuses nesting past protobuf's parse depth limit."""
    request = _trace_request()
    span = request.resource_spans[0].scope_spans[0].spans.add()
    span.CopyFrom(_span())
    span.attributes.add(key=key).value.CopyFrom(value)
    return request


def _depth_of(value: Any) -> int:
    depth = 1
    while isinstance(value, list):
        depth += 1
        value = value[0]
    return depth


# --- spans ---------------------------------------------------------------------------------


def test_span_fields_are_decoded() -> None:
    span = _span(
        parent_span_id=PARENT_ID,
        kind=Span.SPAN_KIND_CLIENT,
        trace_state="vendor=1",
        status=Status(code=Status.STATUS_CODE_ERROR, message="boom"),
        attributes=[
            _kv("gen_ai.system", string_value="openai"),
            _kv("tokens", int_value=2**62),
            _kv("ok", bool_value=True),
            _kv("temperature", double_value=0.5),
        ],
    )
    event = span.events.add(time_unix_nano=5, name="exception")
    event.attributes.append(_kv("exception.message", string_value="bad"))
    link = span.links.add(trace_id=TRACE_ID[::-1], span_id=SPAN_ID[::-1], trace_state="a=b")
    link.attributes.append(_kv("link.kind", string_value="retry"))

    result = decode_spans(_trace_request(span))

    assert result.rejected == 0 and result.reason == ""
    (record,) = result.records
    assert record.trace_id == TRACE_ID.hex() and record.trace_id.islower()
    assert record.span_id == "0102030405060708"
    assert record.parent_span_id == "090a0b0c0d0e0f10"
    assert record.name == "step"
    assert record.start_ns == 1_700_000_000_000_000_000
    assert record.end_ns == 1_700_000_000_500_000_000
    assert record.kind == "Client"
    assert record.trace_state == "vendor=1"
    assert (record.status_code, record.status_message) == ("Error", "boom")
    assert record.service_name == "agent"
    assert record.resource_attributes == {"service.name": "agent", "host.cpus": 8}
    assert (record.scope_name, record.scope_version) == ("agent.tracer", "1.2.3")
    assert record.attributes == {
        "gen_ai.system": "openai",
        "tokens": 2**62,
        "ok": True,
        "temperature": 0.5,
    }
    assert len(record.events) == 1
    assert record.events[0].time_ns == 5
    assert record.events[0].name == "exception"
    assert record.events[0].attributes == {"exception.message": "bad"}
    assert len(record.links) == 1
    assert record.links[0].trace_id == TRACE_ID[::-1].hex()
    assert record.links[0].span_id == SPAN_ID[::-1].hex()
    assert record.links[0].trace_state == "a=b"
    assert record.links[0].attributes == {"link.kind": "retry"}


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (0, "Unspecified"),
        (1, "Internal"),
        (2, "Server"),
        (3, "Client"),
        (4, "Producer"),
        (5, "Consumer"),
        (42, "Unspecified"),
    ],
)
def test_span_kind_spelling(kind: int, expected: str) -> None:
    span = _span()
    span.kind = kind  # type: ignore[assignment]
    assert decode_spans(_trace_request(span)).records[0].kind == expected


@pytest.mark.parametrize(
    ("code", "expected"), [(0, "Unset"), (1, "Ok"), (2, "Error"), (7, "Unset")]
)
def test_status_spelling(code: int, expected: str) -> None:
    span = _span()
    span.status.code = code  # type: ignore[assignment]
    assert decode_spans(_trace_request(span)).records[0].status_code == expected


def test_resource_attributes_are_not_shared_between_records() -> None:
    result = decode_spans(_trace_request(_span(), _span(span_id=PARENT_ID)))
    first, second = result.records
    first.resource_attributes["extra"] = 1
    assert "extra" not in second.resource_attributes


def test_spans_with_bad_id_lengths_are_rejected_not_raised() -> None:
    request = _trace_request(
        _span(trace_id=TRACE_ID[:15]),
        _span(span_id=SPAN_ID + b"\x00"),
        _span(parent_span_id=b"\x01\x02\x03\x04"),
        _span(trace_id=b""),
        _span(name="good"),
        _span(name="root-with-empty-parent", parent_span_id=b""),
    )
    result = decode_spans(request)
    assert result.rejected == 4
    assert "trace_id must be 16 bytes, got 15" in result.reason
    assert [r.name for r in result.records] == ["good", "root-with-empty-parent"]
    assert result.records[1].parent_span_id == ""


def test_service_name_missing_or_not_a_string() -> None:
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.append(_kv("service.name", int_value=3))
    rs.scope_spans.add().spans.append(_span())
    assert decode_spans(request).records[0].service_name == ""


# --- values --------------------------------------------------------------------------------


def test_any_value_types() -> None:
    kvlist = AnyValue()
    kvlist.kvlist_value.values.append(_kv("a", int_value=1))
    kvlist.kvlist_value.values.append(_kv("b", string_value="x"))
    array = AnyValue()
    array.array_value.values.add(string_value="s")
    array.array_value.values.add(bool_value=False)
    array.array_value.values.add().CopyFrom(kvlist)
    array.array_value.values.add()  # an empty AnyValue

    assert any_value_to_python(AnyValue(string_value="é")) == "é"
    assert any_value_to_python(AnyValue(bool_value=True)) is True
    assert any_value_to_python(AnyValue(int_value=-(2**63))) == -(2**63)
    assert any_value_to_python(AnyValue(double_value=1.5)) == 1.5
    assert any_value_to_python(AnyValue(bytes_value=b"\x00\xff")) == b"\x00\xff"
    assert any_value_to_python(AnyValue()) is None
    assert any_value_to_python(kvlist) == {"a": 1, "b": "x"}
    assert any_value_to_python(array) == ["s", False, {"a": 1, "b": "x"}, None]


def test_deeply_nested_value_is_truncated_not_a_stack_overflow() -> None:
    deep = _nested_array(10_000, AnyValue(string_value="leaf"))
    (record,) = decode_spans(_request_with_attribute("deep", deep)).records
    value = record.attributes["deep"]
    # 32 levels are kept; the 33rd is replaced by the marker.
    assert _depth_of(value) == 33
    innermost = value
    for _ in range(32):
        assert isinstance(innermost, list)
        innermost = innermost[0]
    assert innermost == TRUNCATED_VALUE


def test_max_value_depth_is_configurable() -> None:
    value = _nested_array(5, AnyValue(int_value=7))
    assert any_value_to_python(value, max_depth=5) == [[[[7]]]]
    assert any_value_to_python(value, max_depth=3) == [[[TRUNCATED_VALUE]]]
    span = _span()
    span.attributes.add(key="v").value.CopyFrom(value)
    record = decode_spans(_trace_request(span), max_value_depth=2).records[0]
    assert record.attributes["v"] == [[TRUNCATED_VALUE]]
    with pytest.raises(ValueError, match="max_value_depth"):
        decode_spans(_trace_request(span), max_value_depth=0)
    with pytest.raises(ValueError, match="max_value_depth"):
        decode_spans(_trace_request(span), max_value_depth=100_000)


def test_deep_kvlist_is_truncated() -> None:
    root = AnyValue()
    current = root
    for _ in range(10_000):
        current = current.kvlist_value.values.add(key="k").value
    value = any_value_to_python(root, max_depth=4)
    assert value == {"k": {"k": {"k": {"k": TRUNCATED_VALUE}}}}


# --- logs ----------------------------------------------------------------------------------


def _logs_request(*records: PbLogRecord) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    rl = request.resource_logs.add()
    rl.resource.attributes.append(_kv("service.name", string_value="codex"))
    sl = rl.scope_logs.add()
    sl.scope.name = "codex.otel"
    sl.scope.version = "0.9"
    sl.log_records.extend(records)
    return request


def test_log_records_are_decoded() -> None:
    body = AnyValue()
    body.kvlist_value.values.append(_kv("prompt", string_value="hi"))
    record = PbLogRecord(
        time_unix_nano=10,
        observed_time_unix_nano=11,
        severity_number=SeverityNumber.SEVERITY_NUMBER_INFO,
        severity_text="INFO",
        body=body,
        attributes=[_kv("conversation.id", string_value="c1")],
        trace_id=TRACE_ID,
        span_id=SPAN_ID,
        flags=1,
        event_name="codex.user_prompt",
    )
    (log,) = decode_logs(_logs_request(record)).records
    assert log.time_ns == 10 and log.observed_time_ns == 11
    assert (log.severity_number, log.severity_text) == (9, "INFO")
    assert log.body == {"prompt": "hi"}
    assert log.event_name == "codex.user_prompt"
    assert log.trace_id == TRACE_ID.hex() and log.span_id == SPAN_ID.hex()
    assert log.service_name == "codex"
    assert (log.scope_name, log.scope_version) == ("codex.otel", "0.9")
    assert log.attributes == {"conversation.id": "c1"}
    assert log.flags == 1


def test_log_event_name_falls_back_to_attribute() -> None:
    record = PbLogRecord(attributes=[_kv("event.name", string_value="codex.tool_result")])
    (log,) = decode_logs(_logs_request(record)).records
    assert log.event_name == "codex.tool_result"
    assert log.attributes["event.name"] == "codex.tool_result"
    both = PbLogRecord(
        event_name="from.field", attributes=[_kv("event.name", string_value="from.attr")]
    )
    assert decode_logs(_logs_request(both)).records[0].event_name == "from.field"


def test_log_ids_of_wrong_length_become_empty() -> None:
    records = [
        PbLogRecord(trace_id=TRACE_ID[:5], span_id=SPAN_ID[:3]),
        PbLogRecord(),
    ]
    result = decode_logs(_logs_request(*records))
    assert result.rejected == 0
    assert [(r.trace_id, r.span_id) for r in result.records] == [("", ""), ("", "")]
    assert result.records[1].body is None


# --- protobuf parsing ----------------------------------------------------------------------


def test_parse_protobuf_round_trip() -> None:
    request = _trace_request(_span())
    parsed = parse_trace_request(request.SerializeToString())
    assert parsed == request
    logs = _logs_request(PbLogRecord(time_unix_nano=1))
    assert parse_logs_request(logs.SerializeToString()) == logs


def test_malformed_protobuf_is_a_decode_error() -> None:
    with pytest.raises(OtlpDecodeError, match="ExportTraceServiceRequest"):
        parse_trace_request(b"\x0a\xff\xff\xff\xff\x0f")
    with pytest.raises(OtlpDecodeError):
        parse_logs_request(b"\xff")


def test_invalid_utf8_in_string_field_is_a_decode_error() -> None:
    data = _trace_request(_span(name="XYZ")).SerializeToString().replace(b"XYZ", b"\xff\xfe\xfd")
    with pytest.raises(OtlpDecodeError, match="UTF-8"):
        parse_trace_request(data)


def test_too_deep_protobuf_is_a_decode_error() -> None:
    deep = _nested_array(200, AnyValue(int_value=1))
    data = _request_with_attribute("deep", deep).SerializeToString()
    with pytest.raises(OtlpDecodeError):
        parse_trace_request(data)


# --- OTLP/JSON -----------------------------------------------------------------------------


def _trace_json(**span_fields: Any) -> dict[str, Any]:
    span = {
        "traceId": TRACE_ID.hex(),
        "spanId": SPAN_ID.hex(),
        "name": "s",
        "kind": 2,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": 1700000000000000001,
    }
    span.update(span_fields)
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]
                },
                "scopeSpans": [{"scope": {"name": "sc"}, "spans": [span]}],
            }
        ]
    }


def test_json_hex_ids_and_otlp_conventions() -> None:
    doc = _trace_json(
        parentSpanId=PARENT_ID.hex().upper(),
        links=[{"traceId": TRACE_ID.hex(), "spanId": SPAN_ID.hex()}],
        status={"code": 2, "message": "bad"},
        attributes=[
            {"key": "n", "value": {"intValue": "42"}},
            {"key": "b", "value": {"bytesValue": base64.b64encode(b"\x01\x02").decode()}},
        ],
        somethingNew={"ignored": True},
    )
    request = parse_trace_json(json.dumps(doc).encode())
    span = request.resource_spans[0].scope_spans[0].spans[0]
    assert span.trace_id == TRACE_ID
    assert span.span_id == SPAN_ID
    assert span.parent_span_id == PARENT_ID
    assert span.links[0].trace_id == TRACE_ID and span.links[0].span_id == SPAN_ID
    assert span.kind == Span.SPAN_KIND_SERVER
    assert span.start_time_unix_nano == 1700000000000000000
    assert span.end_time_unix_nano == 1700000000000000001
    (record,) = decode_spans(request).records
    assert record.status_code == "Error"
    assert record.attributes == {"n": 42, "b": b"\x01\x02"}
    assert record.service_name == "svc"


def test_json_logs_hex_ids() -> None:
    doc = {
        "resourceLogs": [
            {
                "scopeLogs": [
                    {
                        "logRecords": [
                            {
                                "timeUnixNano": "5",
                                "traceId": TRACE_ID.hex(),
                                "spanId": SPAN_ID.hex(),
                                "eventName": "e",
                                "body": {"stringValue": "hello"},
                            },
                            {"timeUnixNano": 6, "traceId": "", "spanId": ""},
                        ]
                    }
                ]
            }
        ]
    }
    records = decode_logs(parse_logs_json(json.dumps(doc))).records
    assert [(r.trace_id, r.span_id, r.event_name, r.body) for r in records] == [
        (TRACE_ID.hex(), SPAN_ID.hex(), "e", "hello"),
        ("", "", "", None),
    ]


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        (b"{not json", "malformed OTLP/JSON"),
        (b"\xff\xfe{}", "OTLP/JSON"),
        (b"[1, 2]", "expected a JSON object"),
        (json.dumps(_trace_json(traceId="zz" * 16)).encode(), r"spans\[0\]\.traceId.*hex"),
        (json.dumps(_trace_json(spanId="abc")).encode(), "spanId"),
        (json.dumps(_trace_json(traceId=123)).encode(), "must be a hex string"),
        (
            json.dumps(_trace_json(traceId=base64.b64encode(TRACE_ID).decode())).encode(),
            "not base64",
        ),
        (json.dumps({"resourceSpans": "nope"}).encode(), "resourceSpans"),
        (json.dumps(_trace_json(name=5)).encode(), "name"),
        (json.dumps(_trace_json(startTimeUnixNano="soon")).encode(), "startTimeUnixNano"),
        (b"[" * 100_000 + b"]" * 100_000, "OTLP/JSON"),
    ],
)
def test_bad_json_raises_one_error_type(payload: bytes, match: str) -> None:
    with pytest.raises(OtlpDecodeError, match=match):
        parse_trace_json(payload)


@pytest.mark.parametrize("depth", [150, 50_000])
def test_deep_json_value_is_a_decode_error_not_a_crash(depth: int) -> None:
    value = '{"arrayValue":{"values":[' * depth + '{"stringValue":"x"}' + "]}}" * depth
    doc = json.dumps(_trace_json(attributes=[{"key": "deep", "value": "@"}]))
    with pytest.raises(OtlpDecodeError):
        parse_trace_json(doc.replace('"@"', value))


def test_json_matches_protobuf_mapping() -> None:
    """A request rendered by protobuf's own JSON mapping, with ids turned into hex, parses
    back to the same message."""
    span = _span(parent_span_id=PARENT_ID, kind=Span.SPAN_KIND_PRODUCER)
    span.links.add(trace_id=TRACE_ID, span_id=SPAN_ID)
    request = _trace_request(span)
    doc = json_format.MessageToDict(request)
    for s in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        for key in ("traceId", "spanId", "parentSpanId"):
            s[key] = base64.b64decode(s[key]).hex()
        for link in s["links"]:
            for key in ("traceId", "spanId"):
                link[key] = base64.b64decode(link[key]).hex()
    assert parse_trace_json(json.dumps(doc)) == request


# --- files ---------------------------------------------------------------------------------


def _hexify(doc: dict[str, Any]) -> dict[str, Any]:
    """Protobuf JSON mapping → OTLP/JSON (ids in hex)."""

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("traceId", "spanId", "parentSpanId") and isinstance(value, str):
                    node[key] = base64.b64decode(value).hex()
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(doc)
    return doc


def _otlp_json_line(message: Any) -> str:
    return json.dumps(_hexify(json_format.MessageToDict(message)))


def test_read_json_lines_file(tmp_path: Path) -> None:
    traces = _trace_request(_span(name="a"))
    logs = _logs_request(PbLogRecord(time_unix_nano=3, trace_id=TRACE_ID, event_name="ev"))
    path = tmp_path / "capture.jsonl"
    path.write_text(
        "\n".join(
            [
                _otlp_json_line(traces),
                "",
                _otlp_json_line(logs),
                json.dumps({"resourceMetrics": []}),
                _otlp_json_line(traces),
            ]
        )
        + "\n"
    )
    requests = list(read_otlp_file(path))
    expected: list[type[Message]] = [
        ExportTraceServiceRequest,
        ExportLogsServiceRequest,
        ExportTraceServiceRequest,
    ]
    assert [type(r) for r in requests] == expected
    assert requests[0] == traces and requests[1] == logs


def test_read_gzipped_json_lines_file(tmp_path: Path) -> None:
    traces = _trace_request(_span(name="gz"))
    path = tmp_path / "capture.jsonl.gz"
    path.write_bytes(gzip.compress((_otlp_json_line(traces) + "\n").encode()))
    assert list(read_otlp_file(path)) == [traces]


def test_read_pretty_printed_json_document(tmp_path: Path) -> None:
    traces = _trace_request(_span(name="pretty"))
    path = tmp_path / "one.json"
    path.write_text(json.dumps(_hexify(json_format.MessageToDict(traces)), indent=2))
    assert list(read_otlp_file(path)) == [traces]


def test_malformed_json_line_names_the_line(tmp_path: Path) -> None:
    good = _otlp_json_line(_trace_request(_span()))
    path = tmp_path / "bad.jsonl"
    path.write_text(f"{good}\n{good}\n{{broken\n{good}\n")
    reader = read_otlp_file(path)
    assert next(reader) is not None
    with pytest.raises(OtlpDecodeError, match=r"bad\.jsonl:3"):
        list(reader)


def test_bad_hex_in_file_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "hex.jsonl"
    path.write_text(json.dumps(_trace_json()) + "\n" + json.dumps(_trace_json(spanId="xyz")))
    with pytest.raises(OtlpDecodeError, match=r"hex\.jsonl:2: .*spanId"):
        list(read_otlp_file(path))


def test_unknown_json_object_in_file(tmp_path: Path) -> None:
    path = tmp_path / "other.jsonl"
    path.write_text('{"hello": 1}\n')
    with pytest.raises(OtlpDecodeError, match="resourceSpans or resourceLogs"):
        list(read_otlp_file(path))


def test_read_single_protobuf_file(tmp_path: Path) -> None:
    traces = _trace_request(_span(name="pb"))
    path = tmp_path / "traces.pb"
    path.write_bytes(traces.SerializeToString())
    assert list(read_otlp_file(path)) == [traces]
    logs = _logs_request(PbLogRecord(time_unix_nano=9, severity_text="WARN"))
    log_path = tmp_path / "logs.pb"
    log_path.write_bytes(logs.SerializeToString())
    assert list(read_otlp_file(log_path)) == [logs]


def test_read_length_prefixed_protobuf_file(tmp_path: Path) -> None:
    messages: list[Message] = [
        _trace_request(_span(name="first")),
        _logs_request(PbLogRecord(time_unix_nano=1, body=AnyValue(string_value="b"))),
        _logs_request(PbLogRecord(event_name="only-event-name")),
        _trace_request(_span(name="second")),
    ]
    blob = b"".join(
        len(data).to_bytes(4, "big") + data for data in (m.SerializeToString() for m in messages)
    )
    path = tmp_path / "capture.binpb"
    path.write_bytes(blob)
    assert list(read_otlp_file(path)) == messages


def test_malformed_protobuf_file(tmp_path: Path) -> None:
    path = tmp_path / "junk.pb"
    path.write_bytes(b"\x0a\xff\xff\xff\xff\x0f garbage")
    with pytest.raises(OtlpDecodeError, match=r"junk\.pb"):
        list(read_otlp_file(path))


def test_empty_file_yields_nothing(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n\n")
    assert list(read_otlp_file(path)) == []


def test_protobuf_that_starts_like_json_is_read_as_protobuf(tmp_path: Path) -> None:
    # Tag 0x0a is "\n"; a first ResourceSpans of 123 bytes puts "{" right after it.
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    span = rs.scope_spans.add().spans.add(trace_id=TRACE_ID, span_id=SPAN_ID)
    while rs.ByteSize() < 123:
        span.name += "x"
    assert rs.ByteSize() == 123
    data = request.SerializeToString()
    assert data[:2] == b"\n{"
    path = tmp_path / "tricky.pb"
    path.write_bytes(data)
    assert list(read_otlp_file(path)) == [request]


def test_read_json_array_document(tmp_path: Path) -> None:
    traces = _trace_request(_span(name="in-array"))
    logs = _logs_request(PbLogRecord(time_unix_nano=1))
    docs = [_hexify(json_format.MessageToDict(m)) for m in (traces, logs)]
    path = tmp_path / "array.json"
    path.write_text("\n" + json.dumps(docs, indent=1))
    assert list(read_otlp_file(path)) == [traces, logs]


def test_the_field_order_positional_builders_rely_on():
    """The decoder builds records, and normalization builds steps, with positional arguments
    (keyword matching costs as much as the fields): reordering these fields must change those
    calls too, and this test says so."""
    from dataclasses import fields

    from mast_otel.processors.model import Step
    from mast_otel.processors.records import SpanEvent, SpanLink, SpanRecord

    assert [f.name for f in fields(SpanRecord)][:17] == [
        "trace_id", "span_id", "parent_span_id", "name", "start_ns", "end_ns", "kind",
        "trace_state", "status_code", "status_message", "service_name", "resource_attributes",
        "scope_name", "scope_version", "attributes", "events", "links",
    ]  # fmt: skip
    assert [f.name for f in fields(SpanEvent)][:3] == ["time_ns", "name", "attributes"]
    assert [f.name for f in fields(SpanLink)][:4] == [
        "trace_id", "span_id", "trace_state", "attributes"
    ]  # fmt: skip
    assert [f.name for f in fields(Step)][:11] == [
        "trace_id", "span_id", "parent_span_id", "name", "kind", "start_ns", "end_ns",
        "dialect", "status", "error", "service",
    ]  # fmt: skip
