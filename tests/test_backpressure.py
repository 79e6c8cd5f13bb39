"""When the pipeline's queue is full, receivers refuse with OTLP's retryable status, the
refusal is counted, and a retry after the queue drains is accepted."""

from __future__ import annotations

import dataclasses
import time

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from mast_otel.collector.consumer import Refused
from mast_otel.collector.pipeline import Pipeline
from mast_otel.collector.receivers.grpc_receiver import GrpcReceiver
from mast_otel.collector.store.exporter import MemoryExporter
from tests.test_end_to_end import loopback_config


def request(n: int, trace: int) -> trace_service_pb2.ExportTraceServiceRequest:
    req = trace_service_pb2.ExportTraceServiceRequest()
    spans = req.resource_spans.add().scope_spans.add().spans
    for i in range(n):
        span = spans.add()
        span.trace_id = trace.to_bytes(16, "big")
        span.span_id = (i + 1).to_bytes(8, "big")
        span.parent_span_id = (99).to_bytes(8, "big")
        span.name = "step"
        span.start_time_unix_nano = 1_700_000_000_000_000_000 + i
        span.end_time_unix_nano = span.start_time_unix_nano + 1
    return req


def small_queue_pipeline(tmp_path, limit: int) -> tuple[Pipeline, MemoryExporter]:
    config = loopback_config(tmp_path)
    config = dataclasses.replace(
        config, pipeline=dataclasses.replace(config.pipeline, queue_max_items=limit)
    )
    exporter = MemoryExporter()
    return Pipeline(config, exporter), exporter


def test_full_queue_refuses_and_counts(tmp_path):
    pipeline, _ = small_queue_pipeline(tmp_path, limit=10)
    from mast_otel.collector.otlp.decode import decode_spans

    spans = decode_spans(request(8, 1)).records
    pipeline.consume_spans(spans)
    with pytest.raises(Refused, match="queue is full"):
        pipeline.consume_spans(spans)
    assert pipeline.stats.items_refused == 8
    assert pipeline.queue_depth == 8


def test_grpc_sender_sees_unavailable_then_gets_in_after_drain(tmp_path):
    pipeline, exporter = small_queue_pipeline(tmp_path, limit=10)
    receiver = GrpcReceiver(pipeline, endpoint="127.0.0.1:0")
    receiver.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{receiver.port}")
    stub = trace_service_pb2_grpc.TraceServiceStub(channel)
    try:
        stub.Export(request(8, 1), timeout=5)
        with pytest.raises(grpc.RpcError) as refused:
            stub.Export(request(8, 2), timeout=5)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        assert receiver.stats["spans_refused"] == 8
        pipeline.start()  # the worker drains the queue
        deadline = time.monotonic() + 10
        while pipeline.queue_depth and time.monotonic() < deadline:
            time.sleep(0.05)
        stub.Export(request(8, 2), timeout=5)
    finally:
        channel.close()
        receiver.shutdown(1.0)
        pipeline.stop()
    assert len(exporter.spans) == 16
    assert {s.trace_id for s in exporter.spans} == {f"{1:032x}", f"{2:032x}"}
