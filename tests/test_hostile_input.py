"""Malformed and hostile input on both transports gets the right error and leaves the runs
already in flight untouched."""

from __future__ import annotations

import gzip
import urllib.error
import urllib.request

import grpc
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mast_otel.collector.demo.agent import SCENARIOS_BY_NAME, SreAgent, tracer_provider
from mast_otel.collector.service import Service
from mast_otel.collector.store import ChdbStore, queries
from tests.test_end_to_end import loopback_config


def post(port: int, path: str, body: bytes, content_type: str, **headers: str) -> tuple[int, bytes]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=body,
        headers={"Content-Type": content_type, **headers},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_garbage_between_the_spans_of_a_run_does_not_disturb_it(tmp_path):
    config = loopback_config(tmp_path / "store")
    service = Service(config)
    service.start()
    memory = InMemorySpanExporter()
    try:
        exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{service.grpc_port}", insecure=True)
        provider = tracer_provider(exporter, also=memory)
        tracer = provider.get_tracer("test")
        agent = SreAgent(tracer)
        # A run in flight: its root stays open while garbage arrives.
        with tracer.start_as_current_span("incident-triage") as root:
            loop = agent.run(SCENARIOS_BY_NAME["stuck_loop"])
            assert provider.force_flush(10_000)

            channel = grpc.insecure_channel(f"127.0.0.1:{service.grpc_port}")
            stub = trace_service_pb2_grpc.TraceServiceStub(channel)
            raw = channel.unary_unary(
                "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                request_serializer=lambda b: b,
                response_deserializer=trace_service_pb2.ExportTraceServiceResponse.FromString,
            )
            for junk in (b"\xff\xfe\x00garbage", b"\x0a\xff\xff\xff\xff\x0f"):
                try:
                    raw(junk, timeout=5)
                    raise AssertionError("malformed protobuf was accepted")
                except grpc.RpcError as exc:
                    assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT
            # Spans with ids of the wrong length: a partial success, not a failure.
            bad = trace_service_pb2.ExportTraceServiceRequest()
            span = bad.resource_spans.add().scope_spans.add().spans.add()
            span.trace_id, span.span_id, span.name = b"\x01" * 3, b"\x02" * 8, "short id"
            response = stub.Export(bad, timeout=5)
            assert response.partial_success.rejected_spans == 1
            channel.close()

            port = service.http_port
            status, _ = post(port, "/v1/traces", b"\x00\x01junk", "application/x-protobuf")
            assert status == 400
            status, body = post(
                port, "/v1/traces", b'{"resourceSpans": [{"scopeSpans": 5}]}', "application/json"
            )
            assert status == 400 and body
            status, _ = post(port, "/v1/traces", b"{}", "text/plain")
            assert status == 415
            status, _ = post(
                port,
                "/v1/traces",
                gzip.compress(b"\x00" * (17 * 1024 * 1024)),
                "application/x-protobuf",
                **{"Content-Encoding": "gzip"},
            )
            assert status == 413
            huge = "x" * (2 * 1024 * 1024)
            # A huge value on a real span is stored cut to the limit, saying how much was cut.
            root.set_attribute("note", huge)
        assert provider.force_flush(10_000)
        provider.shutdown()
    finally:
        service.stop()

    store = ChdbStore(config.storage.data_dir)
    try:
        found = queries.findings(store, queries.FindingFilter(trace_id=loop.trace_id))
        stored = store.query(
            "SELECT count() AS n, max(length(SpanAttributes['note'])) AS longest, "
            "any(SpanAttributes['note']) AS note FROM otel.otel_traces "
            "WHERE SpanAttributes['note'] != ''"
        )
    finally:
        store.close()
    assert [f["mode"] for f in found] == ["FM-1.3"]
    total = store_count(config)
    assert total == len(memory.get_finished_spans())
    limit = config.limits.max_attribute_value_bytes
    assert int(stored[0]["longest"]) <= limit
    note = stored[0]["note"]
    assert note.startswith("x" * (limit - 64))
    assert note.endswith(f"…[truncated {len(huge) - note.count('x')} bytes]"), note[-60:]


def store_count(config) -> int:
    store = ChdbStore(config.storage.data_dir)
    try:
        return int(store.query("SELECT count() AS n FROM otel.otel_traces")[0]["n"])
    finally:
        store.close()
