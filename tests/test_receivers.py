"""OTLP/gRPC and OTLP/HTTP receivers, driven by the real OpenTelemetry SDK exporters and by raw
clients for the error paths the exporters hide (partial success, retry info, bad payloads)."""

from __future__ import annotations

import base64
import gzip
import http.client
import json
import socket
import threading
import time
import zlib
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import grpc
import pytest
from google.protobuf import json_format
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import (
    OTLPLogExporter as GrpcLogExporter,
)
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression
from opentelemetry.exporter.otlp.proto.http._log_exporter import (
    OTLPLogExporter as HttpLogExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from mast_otel.collector.consumer import Accepted, Refused
from mast_otel.collector.otlp.decode import TRUNCATED_VALUE
from mast_otel.collector.receivers.grpc_receiver import GrpcReceiver
from mast_otel.collector.receivers.http_receiver import HttpReceiver
from mast_otel.processors.records import LogRecord, SpanRecord

TRACE_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
TRACE_ID = bytes(range(1, 17))
SPAN_ID = bytes(range(1, 9))


class RecordingConsumer:
    """Keeps what it is given; can be told to report rejections, refuse, or fail."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.spans: list[SpanRecord] = []
        self.logs: list[LogRecord] = []
        self.rejected = 0
        self.message = ""
        self.refuse: Refused | None = None
        self.fail: Exception | None = None

    def _take(self, target: list[Any], items: list[Any]) -> Accepted:
        if self.refuse is not None:
            raise self.refuse
        if self.fail is not None:
            raise self.fail
        with self._lock:
            target.extend(items)
        return Accepted(rejected=self.rejected, message=self.message)

    def consume_spans(self, spans: list[SpanRecord], raw: Any = None) -> Accepted:
        return self._take(self.spans, spans)

    def consume_logs(self, logs: list[LogRecord], raw: Any = None) -> Accepted:
        return self._take(self.logs, logs)


@pytest.fixture
def consumer() -> RecordingConsumer:
    return RecordingConsumer()


@pytest.fixture
def grpc_receiver(consumer: RecordingConsumer) -> Iterator[GrpcReceiver]:
    receiver = GrpcReceiver(consumer, "127.0.0.1:0")
    receiver.start()
    yield receiver
    receiver.shutdown(0)


@pytest.fixture
def http_receiver(consumer: RecordingConsumer) -> Iterator[HttpReceiver]:
    receiver = HttpReceiver(consumer, "127.0.0.1:0", socket_timeout_s=5)
    receiver.start()
    yield receiver
    receiver.shutdown(0)


@pytest.fixture
def channel(grpc_receiver: GrpcReceiver) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(f"127.0.0.1:{grpc_receiver.port}") as ch:
        yield ch


# --- telemetry made by the SDK -------------------------------------------------------------


def make_sdk_spans() -> tuple[ReadableSpan, ...]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "agent-under-test"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("mast.test", "0.1")
    with (
        tracer.start_as_current_span(
            "invoke_agent planner",
            kind=SpanKind.SERVER,
            attributes={"gen_ai.operation.name": "invoke_agent", "retries": 2, "tags": ["a", "b"]},
        ) as root,
        tracer.start_as_current_span(
            "chat gpt-4o",
            kind=SpanKind.CLIENT,
            links=[Link(root.get_span_context(), {"link.reason": "follows"})],
        ) as child,
    ):
        child.set_attribute("gen_ai.usage.input_tokens", 1234)
        child.set_attribute("temperature", 0.25)
        child.set_attribute("stream", False)
        child.add_event("gen_ai.choice", {"index": 0, "finish_reason": "stop"})
        child.set_status(Status(StatusCode.ERROR, "rate limited"))
    provider.shutdown()
    return memory.get_finished_spans()


def check_sdk_spans(records: list[SpanRecord], spans: tuple[ReadableSpan, ...]) -> None:
    by_name = {r.name: r for r in records}
    assert set(by_name) == {"invoke_agent planner", "chat gpt-4o"}
    sdk = {s.name: s for s in spans}
    root, child = by_name["invoke_agent planner"], by_name["chat gpt-4o"]
    for record in (root, child):
        ctx = sdk[record.name].get_span_context()
        assert ctx is not None
        assert record.trace_id == f"{ctx.trace_id:032x}"
        assert record.span_id == f"{ctx.span_id:016x}"
        assert record.service_name == "agent-under-test"
        assert record.resource_attributes["service.name"] == "agent-under-test"
        assert (record.scope_name, record.scope_version) == ("mast.test", "0.1")
        assert record.end_ns >= record.start_ns > 0
    assert root.parent_span_id == ""
    assert child.parent_span_id == root.span_id
    assert child.trace_id == root.trace_id
    assert (root.kind, child.kind) == ("Server", "Client")
    assert (root.status_code, child.status_code) == ("Unset", "Error")
    assert child.status_message == "rate limited"
    assert root.attributes == {
        "gen_ai.operation.name": "invoke_agent",
        "retries": 2,
        "tags": ["a", "b"],
    }
    assert child.attributes == {
        "gen_ai.usage.input_tokens": 1234,
        "temperature": 0.25,
        "stream": False,
    }
    assert [(e.name, e.attributes) for e in child.events] == [
        ("gen_ai.choice", {"index": 0, "finish_reason": "stop"})
    ]
    assert [(link.trace_id, link.span_id, link.attributes) for link in child.links] == [
        (root.trace_id, root.span_id, {"link.reason": "follows"})
    ]


def make_sdk_logs() -> tuple[Any, ...]:
    memory = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=Resource.create({"service.name": "codex"}))
    provider.add_log_record_processor(SimpleLogRecordProcessor(memory))
    logger = provider.get_logger("codex.otel", "0.9")
    parent = trace.NonRecordingSpan(
        trace.SpanContext(
            trace_id=int.from_bytes(TRACE_ID, "big"),
            span_id=int.from_bytes(SPAN_ID, "big"),
            is_remote=False,
            trace_flags=trace.TraceFlags(1),
        )
    )
    logger.emit(
        timestamp=1_700_000_000_000_000_000,
        context=trace.set_span_in_context(parent),
        severity_number=SeverityNumber.INFO,
        severity_text="INFO",
        body={"prompt": "fix the bug", "length": 11},
        attributes={"conversation.id": "c-1"},
        event_name="codex.user_prompt",
    )
    logger.emit(
        timestamp=1_700_000_000_000_000_001,
        body="plain",
        attributes={"event.name": "codex.tool_result"},
    )
    provider.shutdown()
    return memory.get_finished_logs()


def check_sdk_logs(records: list[LogRecord]) -> None:
    assert len(records) == 2
    first, second = sorted(records, key=lambda r: r.time_ns)
    assert first.event_name == "codex.user_prompt"
    assert first.body == {"prompt": "fix the bug", "length": 11}
    assert first.trace_id == TRACE_ID.hex() and first.span_id == SPAN_ID.hex()
    assert (first.severity_number, first.severity_text) == (9, "INFO")
    assert first.attributes == {"conversation.id": "c-1"}
    assert first.service_name == "codex"
    assert (first.scope_name, first.scope_version) == ("codex.otel", "0.9")
    assert second.event_name == "codex.tool_result"
    assert second.body == "plain"
    assert (second.trace_id, second.span_id) == ("", "")


def pb_request(*spans: PbSpan) -> trace_service_pb2.ExportTraceServiceRequest:
    request = trace_service_pb2.ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    rs.resource.attributes.add(key="service.name").value.string_value = "raw"
    rs.scope_spans.add().spans.extend(spans)
    return request


def pb_span(name: str = "raw-span", **fields: Any) -> PbSpan:
    values: dict[str, Any] = {"trace_id": TRACE_ID, "span_id": SPAN_ID, "name": name}
    values.update(fields)
    return PbSpan(**values)


def deep_request(depth: int) -> trace_service_pb2.ExportTraceServiceRequest:
    """Nested in place (copying would round-trip through the depth-limited parser)."""
    request = pb_request()
    span = request.resource_spans[0].scope_spans[0].spans.add()
    span.CopyFrom(pb_span("deep"))
    value: AnyValue = span.attributes.add(key="deep").value
    for _ in range(depth - 1):
        value = value.array_value.values.add()
    value.string_value = "leaf"
    return request


def otlp_json(message: Any) -> bytes:
    """Protobuf's JSON mapping turned into OTLP/JSON: ids as hex instead of base64."""
    doc = json_format.MessageToDict(message)

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
    return json.dumps(doc).encode()


# --- raw HTTP ------------------------------------------------------------------------------


def post(
    port: int,
    path: str,
    body: bytes | Any,
    content_type: str = "application/x-protobuf",
    headers: dict[str, str] | None = None,
    method: str = "POST",
) -> tuple[int, http.client.HTTPMessage, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        all_headers = {"Content-Type": content_type, **(headers or {})}
        conn.request(method, path, body=body, headers=all_headers)
        response = conn.getresponse()
        return response.status, response.headers, response.read()
    finally:
        conn.close()


def raw_status(port: int, data: bytes) -> int:
    """Send hand-written bytes and return the response's status code."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(data)
        response = http.client.HTTPResponse(sock)
        response.begin()
        response.read()
        return response.status


# --- gRPC ----------------------------------------------------------------------------------


@pytest.mark.parametrize("compression", [None, grpc.Compression.Gzip])
def test_grpc_sdk_span_exporter(
    grpc_receiver: GrpcReceiver, consumer: RecordingConsumer, compression: Any
) -> None:
    spans = make_sdk_spans()
    exporter = GrpcSpanExporter(
        endpoint=f"127.0.0.1:{grpc_receiver.port}",
        insecure=True,
        compression=compression,
        timeout=5,
    )
    try:
        assert exporter.export(spans) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    check_sdk_spans(consumer.spans, spans)
    stats = grpc_receiver.stats
    assert stats["trace_requests"] == 1 and stats["spans_accepted"] == 2


@pytest.mark.parametrize("compression", [None, grpc.Compression.Gzip])
def test_grpc_sdk_log_exporter(
    grpc_receiver: GrpcReceiver, consumer: RecordingConsumer, compression: Any
) -> None:
    logs = make_sdk_logs()
    exporter = GrpcLogExporter(
        endpoint=f"127.0.0.1:{grpc_receiver.port}",
        insecure=True,
        compression=compression,
        timeout=5,
    )
    try:
        assert exporter.export(logs).name == "SUCCESS"
    finally:
        exporter.shutdown()
    check_sdk_logs(consumer.logs)
    assert grpc_receiver.stats["logs_accepted"] == 2


def test_grpc_gzip_raw_client(grpc_receiver: GrpcReceiver, consumer: RecordingConsumer) -> None:
    with grpc.insecure_channel(
        f"127.0.0.1:{grpc_receiver.port}", compression=grpc.Compression.Gzip
    ) as ch:
        stub = trace_service_pb2_grpc.TraceServiceStub(ch)
        response = stub.Export(pb_request(pb_span("gz" * 2000)), timeout=5)
    assert not response.HasField("partial_success")
    assert consumer.spans[0].name == "gz" * 2000


def test_grpc_partial_success(channel: grpc.Channel, consumer: RecordingConsumer) -> None:
    consumer.rejected, consumer.message = 2, "2 duplicate spans"
    stub = trace_service_pb2_grpc.TraceServiceStub(channel)
    response = stub.Export(pb_request(pb_span("a"), pb_span("b"), pb_span("c")), timeout=5)
    assert response.partial_success.rejected_spans == 2
    assert response.partial_success.error_message == "2 duplicate spans"

    logs_stub = logs_service_pb2_grpc.LogsServiceStub(channel)
    logs_request = logs_service_pb2.ExportLogsServiceRequest()
    logs_request.resource_logs.add().scope_logs.add().log_records.add(time_unix_nano=1)
    logs_response = logs_stub.Export(logs_request, timeout=5)
    assert logs_response.partial_success.rejected_log_records == 2


def test_grpc_bad_ids_are_rejected(channel: grpc.Channel, consumer: RecordingConsumer) -> None:
    stub = trace_service_pb2_grpc.TraceServiceStub(channel)
    request = pb_request(pb_span("short", trace_id=TRACE_ID[:8]), pb_span("ok"))
    response = stub.Export(request, timeout=5)
    assert response.partial_success.rejected_spans == 1
    assert "trace_id must be 16 bytes" in response.partial_success.error_message
    assert [s.name for s in consumer.spans] == ["ok"]


def test_grpc_refused_is_unavailable_with_retry_info(
    channel: grpc.Channel, consumer: RecordingConsumer, grpc_receiver: GrpcReceiver
) -> None:
    consumer.refuse = Refused("queue full", retry_after_s=2.5)
    stub = trace_service_pb2_grpc.TraceServiceStub(channel)
    with pytest.raises(grpc.RpcError) as caught:
        stub.Export(pb_request(pb_span()), timeout=5)
    error: Any = caught.value
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    assert error.details() == "queue full"
    metadata = dict(error.trailing_metadata())
    status = status_pb2.Status.FromString(metadata["grpc-status-details-bin"])
    assert status.code == code_pb2.UNAVAILABLE and status.message == "queue full"
    retry = error_details_pb2.RetryInfo()
    assert status.details[0].Unpack(retry)
    assert retry.retry_delay.ToTimedelta() == timedelta(seconds=2.5)
    # The form the OpenTelemetry Python exporter reads.
    bare = error_details_pb2.RetryInfo.FromString(metadata["google.rpc.retryinfo-bin"])
    assert bare.retry_delay.ToTimedelta() == timedelta(seconds=2.5)
    stats = grpc_receiver.stats
    assert stats["requests_refused"] == 1 and stats["spans_refused"] == 1


def test_grpc_malformed_payload_is_invalid_argument(
    channel: grpc.Channel, consumer: RecordingConsumer, grpc_receiver: GrpcReceiver
) -> None:
    raw = channel.unary_unary(TRACE_EXPORT)
    with pytest.raises(grpc.RpcError) as caught:
        raw(b"\x0a\xff\xff\xff\xff\x0f not protobuf", timeout=5)
    error: Any = caught.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "ExportTraceServiceRequest" in error.details()

    bad_utf8 = pb_request(pb_span("XYZ")).SerializeToString().replace(b"XYZ", b"\xff\xfe\xfd")
    with pytest.raises(grpc.RpcError) as caught:
        raw(bad_utf8, timeout=5)
    error = caught.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "UTF-8" in error.details()

    # Still serving.
    stub = trace_service_pb2_grpc.TraceServiceStub(channel)
    stub.Export(pb_request(pb_span("after")), timeout=5)
    assert [s.name for s in consumer.spans] == ["after"]
    assert grpc_receiver.stats["decode_errors"] == 2


def test_grpc_consumer_crash_is_internal(
    channel: grpc.Channel, consumer: RecordingConsumer
) -> None:
    consumer.fail = RuntimeError("bug")
    stub = trace_service_pb2_grpc.TraceServiceStub(channel)
    with pytest.raises(grpc.RpcError) as caught:
        stub.Export(pb_request(pb_span()), timeout=5)
    assert caught.value.code() == grpc.StatusCode.INTERNAL
    consumer.fail = None
    stub.Export(pb_request(pb_span()), timeout=5)


def test_grpc_deep_values(channel: grpc.Channel, consumer: RecordingConsumer) -> None:
    stub = trace_service_pb2_grpc.TraceServiceStub(channel)
    stub.Export(deep_request(45), timeout=5)
    value: Any = consumer.spans[0].attributes["deep"]
    for _ in range(32):
        assert isinstance(value, list)
        value = value[0]
    assert value == TRUNCATED_VALUE
    # Past the protobuf parser's depth limit: cut the same way, the rest of the span kept.
    raw = channel.unary_unary(TRACE_EXPORT)
    raw(deep_request(500).SerializeToString(), timeout=5)
    value = consumer.spans[1].attributes["deep"]
    for _ in range(32):
        value = value[0]
    assert value == TRUNCATED_VALUE
    stub.Export(pb_request(pb_span("after")), timeout=5)


def test_grpc_oversize_message(consumer: RecordingConsumer) -> None:
    receiver = GrpcReceiver(consumer, "127.0.0.1:0", max_message_bytes=1024)
    receiver.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{receiver.port}") as ch:
            stub = trace_service_pb2_grpc.TraceServiceStub(ch)
            with pytest.raises(grpc.RpcError) as caught:
                stub.Export(pb_request(pb_span("x" * 4096)), timeout=5)
            code = caught.value.code()
            assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
            stub.Export(pb_request(pb_span("small")), timeout=5)
        # The limit applies after decompression, so a small gzip bomb is refused too.
        with grpc.insecure_channel(
            f"127.0.0.1:{receiver.port}", compression=grpc.Compression.Gzip
        ) as ch:
            stub = trace_service_pb2_grpc.TraceServiceStub(ch)
            with pytest.raises(grpc.RpcError) as caught:
                stub.Export(pb_request(pb_span("z" * 100_000)), timeout=5)
            assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    finally:
        receiver.shutdown(0)
    assert [s.name for s in consumer.spans] == ["small"]


def test_grpc_port_in_use(grpc_receiver: GrpcReceiver, consumer: RecordingConsumer) -> None:
    second = GrpcReceiver(consumer, f"127.0.0.1:{grpc_receiver.port}")
    with pytest.raises(RuntimeError, match="cannot bind"):
        second.start()
    second.shutdown(0)


# --- HTTP ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "compression", [HttpCompression.NoCompression, HttpCompression.Gzip, HttpCompression.Deflate]
)
def test_http_sdk_span_exporter(
    http_receiver: HttpReceiver, consumer: RecordingConsumer, compression: HttpCompression
) -> None:
    spans = make_sdk_spans()
    exporter = HttpSpanExporter(
        endpoint=f"http://127.0.0.1:{http_receiver.port}/v1/traces",
        compression=compression,
        timeout=5,
    )
    try:
        assert exporter.export(spans) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    check_sdk_spans(consumer.spans, spans)


@pytest.mark.parametrize("compression", [HttpCompression.NoCompression, HttpCompression.Gzip])
def test_http_sdk_log_exporter(
    http_receiver: HttpReceiver, consumer: RecordingConsumer, compression: HttpCompression
) -> None:
    logs = make_sdk_logs()
    exporter = HttpLogExporter(
        endpoint=f"http://127.0.0.1:{http_receiver.port}/v1/logs",
        compression=compression,
        timeout=5,
    )
    try:
        assert exporter.export(logs).name == "SUCCESS"
    finally:
        exporter.shutdown()
    check_sdk_logs(consumer.logs)


def test_http_json_with_hex_ids_round_trips(
    http_receiver: HttpReceiver, consumer: RecordingConsumer
) -> None:
    request = encode_spans(make_sdk_spans())
    status, headers, body = post(
        http_receiver.port, "/v1/traces", request.SerializeToString(), "application/x-protobuf"
    )
    assert status == 200 and headers["Content-Type"] == "application/x-protobuf"
    assert body == b""
    from_protobuf = list(consumer.spans)
    consumer.spans.clear()

    status, headers, body = post(
        http_receiver.port, "/v1/traces", otlp_json(request), "application/json; charset=utf-8"
    )
    assert status == 200, body
    assert headers["Content-Type"] == "application/json"
    assert json.loads(body) == {}
    assert consumer.spans == from_protobuf
    assert all(len(s.trace_id) == 32 and len(s.span_id) == 16 for s in consumer.spans)


def test_http_json_logs(http_receiver: HttpReceiver, consumer: RecordingConsumer) -> None:
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs

    request = encode_logs(make_sdk_logs())
    status, _, body = post(http_receiver.port, "/v1/logs", otlp_json(request), "application/json")
    assert status == 200, body
    check_sdk_logs(consumer.logs)


def test_http_gzip_body(http_receiver: HttpReceiver, consumer: RecordingConsumer) -> None:
    body = gzip.compress(pb_request(pb_span("zipped")).SerializeToString())
    status, _, _ = post(
        http_receiver.port, "/v1/traces", body, headers={"Content-Encoding": "gzip"}
    )
    assert status == 200
    json_body = gzip.compress(otlp_json(pb_request(pb_span("zipped-json"))))
    status, _, _ = post(
        http_receiver.port,
        "/v1/traces",
        json_body,
        "application/json",
        headers={"Content-Encoding": "gzip"},
    )
    assert status == 200
    assert [s.name for s in consumer.spans] == ["zipped", "zipped-json"]


def test_http_partial_success(http_receiver: HttpReceiver, consumer: RecordingConsumer) -> None:
    consumer.rejected, consumer.message = 2, "2 duplicate spans"
    request = pb_request(pb_span("a"), pb_span("b"), pb_span("c"))
    status, _, body = post(http_receiver.port, "/v1/traces", request.SerializeToString())
    assert status == 200
    response = trace_service_pb2.ExportTraceServiceResponse.FromString(body)
    assert response.partial_success.rejected_spans == 2
    assert response.partial_success.error_message == "2 duplicate spans"

    status, _, body = post(http_receiver.port, "/v1/traces", otlp_json(request), "application/json")
    assert status == 200
    partial = json.loads(body)["partialSuccess"]
    assert int(partial["rejectedSpans"]) == 2
    assert partial["errorMessage"] == "2 duplicate spans"


def test_http_bad_ids_are_rejected(
    http_receiver: HttpReceiver, consumer: RecordingConsumer
) -> None:
    request = pb_request(pb_span("long", span_id=SPAN_ID + b"\x00"), pb_span("ok"))
    status, _, body = post(http_receiver.port, "/v1/traces", request.SerializeToString())
    assert status == 200
    response = trace_service_pb2.ExportTraceServiceResponse.FromString(body)
    assert response.partial_success.rejected_spans == 1
    assert "span_id must be 8 bytes" in response.partial_success.error_message
    assert [s.name for s in consumer.spans] == ["ok"]
    assert http_receiver.stats["spans_rejected"] == 1


@pytest.mark.parametrize(("retry_after_s", "header"), [(2.5, "3"), (0.1, "1"), (0.0, "1")])
def test_http_refused_is_503_with_retry_after(
    http_receiver: HttpReceiver, consumer: RecordingConsumer, retry_after_s: float, header: str
) -> None:
    consumer.refuse = Refused("queue full", retry_after_s=retry_after_s)
    status, headers, body = post(
        http_receiver.port, "/v1/traces", pb_request(pb_span()).SerializeToString()
    )
    assert status == 503
    assert headers["Retry-After"] == header
    rpc_status = status_pb2.Status.FromString(body)
    assert rpc_status.code == code_pb2.UNAVAILABLE and rpc_status.message == "queue full"


def test_http_malformed_protobuf_is_400_and_server_keeps_serving(
    http_receiver: HttpReceiver, consumer: RecordingConsumer
) -> None:
    status, headers, body = post(http_receiver.port, "/v1/traces", b"\x0a\xff\xff\xff\xff\x0f")
    assert status == 400
    assert headers["Content-Type"] == "application/x-protobuf"
    rpc_status = status_pb2.Status.FromString(body)
    assert rpc_status.code == code_pb2.INVALID_ARGUMENT
    assert "ExportTraceServiceRequest" in rpc_status.message

    status, _, _ = post(http_receiver.port, "/v1/traces", pb_request(pb_span()).SerializeToString())
    assert status == 200
    assert len(consumer.spans) == 1


def test_http_malformed_json_is_400(
    http_receiver: HttpReceiver, consumer: RecordingConsumer
) -> None:
    status, headers, body = post(
        http_receiver.port, "/v1/logs", b'{"resourceLogs": [', "application/json"
    )
    assert status == 400
    assert headers["Content-Type"] == "application/json"
    error = json.loads(body)
    assert error["code"] == code_pb2.INVALID_ARGUMENT
    assert "malformed OTLP/JSON" in error["message"]

    bad_hex = otlp_json(pb_request(pb_span())).replace(TRACE_ID.hex().encode(), b"not-hex!" * 4)
    status, _, body = post(http_receiver.port, "/v1/traces", bad_hex, "application/json")
    assert status == 400
    assert "traceId" in json.loads(body)["message"]

    status, _, _ = post(
        http_receiver.port, "/v1/traces", otlp_json(pb_request(pb_span())), "application/json"
    )
    assert status == 200


def test_http_bad_gzip_is_400(http_receiver: HttpReceiver) -> None:
    status, _, body = post(
        http_receiver.port, "/v1/traces", b"not gzip", headers={"Content-Encoding": "gzip"}
    )
    assert status == 400
    assert "gzip" in status_pb2.Status.FromString(body).message
    truncated = gzip.compress(b"x" * 1000)[:-10]
    status, _, _ = post(
        http_receiver.port, "/v1/traces", truncated, headers={"Content-Encoding": "gzip"}
    )
    assert status == 400


def test_http_unsupported_content_type_and_encoding(http_receiver: HttpReceiver) -> None:
    status, _, body = post(http_receiver.port, "/v1/traces", b"hello", "text/plain")
    assert status == 415
    assert b"application/x-protobuf" in body
    status, _, _ = post(http_receiver.port, "/v1/traces", b"x", headers={"Content-Encoding": "br"})
    assert status == 415


def test_http_paths_and_methods(http_receiver: HttpReceiver) -> None:
    port = http_receiver.port
    assert post(port, "/v1/metrics", b"")[0] == 404
    assert post(port, "/", b"")[0] == 404
    status, headers, _ = post(port, "/v1/traces", None, method="GET")
    assert status == 405 and headers["Allow"] == "POST"
    assert post(port, "/v1/logs", b"x", method="PUT")[0] == 405
    assert post(port, "/healthz", b"", method="POST")[0] == 405
    status, _, body = post(port, "/healthz", None, method="GET")
    assert (status, body) == (200, b"ok")
    status, headers, body = post(port, "/healthz", None, method="HEAD")
    assert status == 200 and body == b"" and headers["Content-Length"] == "2"
    # Query strings do not change routing.
    assert post(port, "/v1/traces?x=1", pb_request(pb_span()).SerializeToString())[0] == 200


def test_http_health_check_hook(consumer: RecordingConsumer) -> None:
    state = {"healthy": True}

    def check() -> tuple[int, str]:
        if state["healthy"] is None:
            raise RuntimeError("probe crashed")
        return (200, "ok") if state["healthy"] else (503, "storage unreachable")

    receiver = HttpReceiver(consumer, "127.0.0.1:0", health_check=check)
    receiver.start()
    try:
        assert post(receiver.port, "/healthz", None, method="GET")[:3:2] == (200, b"ok")
        state["healthy"] = False
        assert post(receiver.port, "/healthz", None, method="GET")[::2] == (
            503,
            b"storage unreachable",
        )
        state["healthy"] = None  # type: ignore[assignment]
        status, _, body = post(receiver.port, "/healthz", None, method="GET")
        assert status == 503 and b"probe crashed" in body
    finally:
        receiver.shutdown(0)


def test_http_oversize_bodies_are_413(consumer: RecordingConsumer) -> None:
    receiver = HttpReceiver(consumer, "127.0.0.1:0", max_body_bytes=1024, socket_timeout_s=5)
    receiver.start()
    try:
        port = receiver.port
        big = pb_request(pb_span("x" * 4096)).SerializeToString()
        status, _, body = post(port, "/v1/traces", big)
        assert status == 413
        assert "exceeds the limit of 1024 bytes" in status_pb2.Status.FromString(body).message

        bomb = gzip.compress(pb_request(pb_span("y" * 200_000)).SerializeToString())
        assert len(bomb) < 1024
        status, _, body = post(port, "/v1/traces", bomb, headers={"Content-Encoding": "gzip"})
        assert status == 413
        assert "decompressed" in status_pb2.Status.FromString(body).message

        chunks = iter([big[:1000], big[1000:]])
        assert post(port, "/v1/traces", chunks)[0] == 413

        small = pb_request(pb_span("fits")).SerializeToString()
        assert post(port, "/v1/traces", small)[0] == 200
        deflated = zlib.compress(small)
        assert post(port, "/v1/traces", deflated, headers={"Content-Encoding": "deflate"})[0] == 200
    finally:
        receiver.shutdown(0)
    assert [s.name for s in consumer.spans] == ["fits", "fits"]


def test_http_chunked_body(http_receiver: HttpReceiver, consumer: RecordingConsumer) -> None:
    data = pb_request(pb_span("chunked")).SerializeToString()
    chunks = iter([data[:5], data[5:20], data[20:]])
    status, _, _ = post(http_receiver.port, "/v1/traces", chunks)
    assert status == 200
    assert [s.name for s in consumer.spans] == ["chunked"]


def test_http_framing_errors(http_receiver: HttpReceiver, consumer: RecordingConsumer) -> None:
    port = http_receiver.port
    no_length = (
        b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n\r\n"
    )
    assert raw_status(port, no_length) == 411
    bad_length = (
        b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        b"Content-Length: -5\r\n\r\n"
    )
    assert raw_status(port, bad_length) == 400
    bad_chunk = (
        b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        b"Transfer-Encoding: chunked\r\n\r\nzz\r\n"
    )
    assert raw_status(port, bad_chunk) == 400
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"\x16\x03\x01 not http at all\r\n\r\n")
        reply = b"".join(iter(lambda: sock.recv(65536), b""))
    assert b"400" in reply
    # Client goes away mid-body.
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            b"Content-Length: 100\r\n\r\nshort"
        )
    assert post(port, "/v1/traces", pb_request(pb_span()).SerializeToString())[0] == 200
    assert len(consumer.spans) == 1


def test_http_keep_alive_survives_errors(
    http_receiver: HttpReceiver, consumer: RecordingConsumer
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", http_receiver.port, timeout=5)
    try:
        good = pb_request(pb_span("ka")).SerializeToString()
        for body, expected in [(b"\xff", 400), (good, 200), (b"x", 404), (good, 200)]:
            path = "/v1/traces" if expected != 404 else "/nowhere"
            conn.request(
                "POST", path, body=body, headers={"Content-Type": "application/x-protobuf"}
            )
            response = conn.getresponse()
            response.read()
            assert response.status == expected
    finally:
        conn.close()
    assert [s.name for s in consumer.spans] == ["ka", "ka"]


def test_http_deep_values(http_receiver: HttpReceiver, consumer: RecordingConsumer) -> None:
    port = http_receiver.port
    assert post(port, "/v1/traces", deep_request(45).SerializeToString())[0] == 200
    value: Any = consumer.spans[0].attributes["deep"]
    for _ in range(32):
        value = value[0]
    assert value == TRUNCATED_VALUE
    # Past the protobuf parser's depth limit: cut the same way, not refused.
    assert post(port, "/v1/traces", deep_request(500).SerializeToString())[0] == 200
    value = consumer.spans[1].attributes["deep"]
    for _ in range(32):
        value = value[0]
    assert value == TRUNCATED_VALUE
    # OTLP/JSON nested deeper than the JSON parser takes is refused as malformed.
    deep_json = (
        b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":[{"key":"k","value":'
        + b'{"arrayValue":{"values":[' * 20_000
        + b"]}}" * 20_000
        + b"}]}]}]}]}"
    )
    assert post(port, "/v1/traces", deep_json, "application/json")[0] == 400
    assert post(port, "/v1/traces", pb_request(pb_span()).SerializeToString())[0] == 200


def test_http_consumer_crash_is_500(
    http_receiver: HttpReceiver, consumer: RecordingConsumer
) -> None:
    consumer.fail = RuntimeError("bug")
    body = pb_request(pb_span()).SerializeToString()
    assert post(http_receiver.port, "/v1/traces", body)[0] == 500
    consumer.fail = None
    assert post(http_receiver.port, "/v1/traces", body)[0] == 200
    assert http_receiver.stats["internal_errors"] == 1


def test_http_shutdown_closes_idle_keep_alive(consumer: RecordingConsumer) -> None:
    receiver = HttpReceiver(consumer, "127.0.0.1:0", socket_timeout_s=30)
    receiver.start()
    conn = http.client.HTTPConnection("127.0.0.1", receiver.port, timeout=5)
    try:
        conn.request("GET", "/healthz")
        conn.getresponse().read()
        started = time.monotonic()
        receiver.shutdown(grace_s=1.0)
        assert time.monotonic() - started < 3
        with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
            conn.request("GET", "/healthz")
            conn.getresponse()
    finally:
        conn.close()


def test_http_port_in_use(http_receiver: HttpReceiver, consumer: RecordingConsumer) -> None:
    second = HttpReceiver(consumer, f"127.0.0.1:{http_receiver.port}")
    with pytest.raises(OSError):
        second.start()


def test_http_bad_endpoint(consumer: RecordingConsumer) -> None:
    with pytest.raises(ValueError, match="host:port"):
        HttpReceiver(consumer, "localhost")
