"""Smaller receiver bounds: gzip bodies of many members, over-long JSON integers, values nested
past the parser's limit, a request larger than the whole queue, the exact Authorization forms
accepted and repeated headers, on both transports where both apply."""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import time
from typing import Any

import grpc
import pytest
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from mast_otel.collector.config import Config, ConfigError, apply_overrides
from mast_otel.collector.config.receivers import HttpReceiverConfig
from mast_otel.collector.otlp.decode import TRUNCATED_VALUE
from mast_otel.collector.receivers.grpc_receiver import GrpcReceiver
from mast_otel.collector.receivers.http_receiver import HttpReceiver
from tests.test_backpressure import small_queue_pipeline
from tests.test_receivers import RecordingConsumer, otlp_json, pb_request, pb_span

TRACE_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def post(
    port: int, body: bytes, content_type: str = "application/x-protobuf", **headers: str
) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(
            "POST",
            "/v1/traces",
            body,
            {"Content-Type": content_type, **{k.replace("_", "-"): v for k, v in headers.items()}},
        )
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


@pytest.fixture
def consumer() -> RecordingConsumer:
    return RecordingConsumer()


@pytest.fixture
def receiver(consumer: RecordingConsumer) -> Any:
    receiver = HttpReceiver(consumer, "127.0.0.1:0", limits=HttpReceiverConfig(max_gzip_members=16))
    receiver.start()
    yield receiver
    receiver.shutdown(0)


def test_gzip_of_many_empty_members_is_capped_and_linear(
    receiver: HttpReceiver, consumer: RecordingConsumer
) -> None:
    member = gzip.compress(b"")
    bomb = member * (4 * 1024 * 1024 // len(member))  # 4 MiB of empty members
    started = time.monotonic()
    status, body = post(receiver.port, bomb, Content_Encoding="gzip")
    assert time.monotonic() - started < 3
    assert status == 413
    assert "max_gzip_members" in status_pb2.Status.FromString(body).message
    assert receiver.stats["gzip_members_over_limit"] == 1
    # A few members are fine (concatenated gzip is valid gzip).
    data = pb_request(pb_span("joined")).SerializeToString()
    joined = gzip.compress(data[:10]) + gzip.compress(data[10:])
    assert post(receiver.port, joined, Content_Encoding="gzip")[0] == 200
    assert [s.name for s in consumer.spans] == ["joined"]


def test_inflating_many_members_is_linear() -> None:
    from mast_otel.collector.receivers.limits import inflate

    member = gzip.compress(b"")
    timings = []
    for size in (1, 4):
        bomb = member * (size * 1024 * 1024 // len(member))
        started = time.monotonic()
        # A member cap that never trips: the walk itself must be linear.
        assert inflate(bomb, "gzip", 16 * 1024 * 1024, 10**9) == b""
        timings.append(time.monotonic() - started)
    # Four times the input takes about four times as long (quadratic would be sixteen).
    assert timings[1] < 8 * timings[0] + 0.2, timings


def test_json_integer_of_thousands_of_digits_is_400(receiver: HttpReceiver) -> None:
    doc = (
        b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"'
        + b"01" * 16
        + b'","spanId":"'
        + b"01" * 8
        + b'","name":"n","startTimeUnixNano":'
        + b"9" * 5000
        + b"}]}]}]}"
    )
    status, body = post(receiver.port, doc, "application/json")
    assert status == 400
    message = json.loads(body)["message"]
    assert "5000 digits" in message and "64-bit" in message
    assert receiver.stats["internal_errors"] == 0


def deep_kvlist_request(depth: int) -> trace_service_pb2.ExportTraceServiceRequest:
    request = pb_request()
    span = request.resource_spans[0].scope_spans[0].spans.add()
    span.CopyFrom(pb_span("deep"))
    span.attributes.add(key="shallow").value.string_value = "kept"
    value: AnyValue = span.attributes.add(key="deep").value
    for _ in range(depth - 1):
        value = value.kvlist_value.values.add(key="k").value
    value.string_value = "leaf"
    return request


def leaf_depth(value: Any) -> tuple[int, Any]:
    depth = 1
    while isinstance(value, dict):
        value = value["k"]
        depth += 1
    return depth, value


@pytest.mark.parametrize("depth", [40, 500])
def test_values_nested_past_the_parser_limit_are_cut_not_refused(
    receiver: HttpReceiver, consumer: RecordingConsumer, depth: int
) -> None:
    body = deep_kvlist_request(depth).SerializeToString()
    status, _ = post(receiver.port, body)
    assert status == 200
    grpc_consumer = RecordingConsumer()
    grpc_receiver = GrpcReceiver(grpc_consumer, "127.0.0.1:0")
    grpc_receiver.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{grpc_receiver.port}") as channel:
            channel.unary_unary(TRACE_EXPORT)(body, timeout=10)
    finally:
        grpc_receiver.shutdown(0)
    for spans in (consumer.spans, grpc_consumer.spans):
        (span,) = spans
        assert span.attributes["shallow"] == "kept"
        levels, leaf = leaf_depth(span.attributes["deep"])
        assert leaf == TRUNCATED_VALUE
        assert levels <= 32


def test_a_request_larger_than_the_whole_queue_is_refused_for_good(tmp_path: Any) -> None:
    pipeline, _ = small_queue_pipeline(tmp_path, 5)  # not started: nothing drains it
    if True:
        receiver = HttpReceiver(pipeline, "127.0.0.1:0")
        receiver.start()
        grpc_receiver = GrpcReceiver(pipeline, "127.0.0.1:0")
        grpc_receiver.start()
        try:
            six = pb_request(*(pb_span(f"s{i}", span_id=bytes([i + 1]) * 8) for i in range(6)))
            status, body = post(receiver.port, six.SerializeToString())
            # Not retryable: an empty queue could not hold it either.
            assert status == 413
            assert "queue_max_items = 5" in status_pb2.Status.FromString(body).message
            with (
                grpc.insecure_channel(f"127.0.0.1:{grpc_receiver.port}") as channel,
                pytest.raises(grpc.RpcError) as refused,
            ):
                channel.unary_unary(TRACE_EXPORT)(six.SerializeToString(), timeout=10)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "queue_max_items" in (refused.value.details() or "")
            five = pb_request(*(pb_span(f"s{i}", span_id=bytes([i + 1]) * 8) for i in range(5)))
            assert post(receiver.port, five.SerializeToString())[0] == 200
        finally:
            receiver.shutdown(0)
            grpc_receiver.shutdown(0)
        assert receiver.stats["too_many_items"] == 1
        assert grpc_receiver.stats["too_many_items"] == 1


def test_authorization_forms_and_repeated_headers_on_http(consumer: RecordingConsumer) -> None:
    receiver = HttpReceiver(consumer, "127.0.0.1:0", auth_token="tok")
    receiver.start()
    body = pb_request(pb_span()).SerializeToString()

    def raw(headers: list[tuple[str, str]]) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", receiver.port, timeout=5)
        try:
            conn.putrequest("POST", "/v1/traces")
            for name, value in [
                ("Content-Type", "application/x-protobuf"),
                ("Content-Length", str(len(body))),
                *headers,
            ]:
                conn.putheader(name, value)
            conn.endheaders(body)
            return conn.getresponse().status
        finally:
            conn.close()

    try:
        for value in ("Bearer tok", "bearer tok", "BEARER tok", "Bearer tok "):
            assert raw([("Authorization", value)]) == 200, value
        for value in ("Bearer  tok", "Bearer tok x", "Basic tok", "Bearer", "tok"):
            assert raw([("Authorization", value)]) == 401, value
        # A repeated Authorization header is refused, even when both copies are right.
        assert raw([("Authorization", "Bearer tok"), ("Authorization", "Bearer tok")]) == 401
        assert (
            raw(
                [
                    ("Authorization", "Bearer tok"),
                    ("Content-Type", "application/json"),
                ]
            )
            == 400
        )
    finally:
        receiver.shutdown(0)


def test_new_limits_are_validated_at_start() -> None:
    config = Config()
    for key, value in (
        ("receivers.http.max_connections", 0),
        ("receivers.http.header_timeout_s", 0.0),
        ("receivers.grpc.max_concurrent_rpcs", 0),
        ("receivers.grpc.receive_timeout_s", -1.0),
        ("receivers.max_request_objects", 0),
        ("receivers.memory_budget_bytes", 1024),
    ):
        with pytest.raises(ConfigError, match=key.rsplit(".", 1)[0]):
            apply_overrides(config, {key: value})
    with pytest.raises(ConfigError, match="max_concurrent_rpcs_per_peer must be below"):
        apply_overrides(config, {"receivers.grpc.max_concurrent_rpcs_per_peer": 64})
    with pytest.raises(ConfigError, match="max_concurrent_requests must exceed"):
        apply_overrides(config, {"receivers.http.max_concurrent_requests": 64})
    with pytest.raises(ConfigError, match="max_connections_per_peer"):
        apply_overrides(
            config,
            {"receivers.http.max_connections": 10, "receivers.http.max_connections_per_peer": 20},
        )


def test_json_spans_round_trip_still_fit(receiver: HttpReceiver, consumer: RecordingConsumer):
    status, _ = post(receiver.port, otlp_json(pb_request(pb_span("j"))), "application/json")
    assert status == 200
    assert [s.name for s in consumer.spans] == ["j"]


def test_expect_100_continue_is_answered(receiver: HttpReceiver, consumer: RecordingConsumer):
    body = pb_request(pb_span("expected")).SerializeToString()
    with socket.create_connection(("127.0.0.1", receiver.port), timeout=5) as sock:
        sock.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            + f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n".encode()
        )
        assert sock.recv(64).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        sock.sendall(body)
        response = http.client.HTTPResponse(sock)
        response.begin()
        assert response.status == 200
    assert [s.name for s in consumer.spans] == ["expected"]


def test_limit_hits_are_served_as_metrics(receiver: HttpReceiver) -> None:
    from mast_otel.collector.metrics import exposition, registry_for
    from mast_otel.schemas.metrics import RECEIVER_LIMIT_HITS, total

    member = gzip.compress(b"")
    post(receiver.port, member * 100, Content_Encoding="gzip")
    _, text = exposition(registry_for(lambda: {"http": receiver.stats}))
    line = f'{total(RECEIVER_LIMIT_HITS)}{{limit="gzip_members_over_limit",transport="http"}} 1.0'
    assert line in text.decode()
