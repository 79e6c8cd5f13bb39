"""Outcomes reach a run's signature whichever way they come: an outcome attribute on the root
span, the GenAI evaluation event on a span, or an evaluation log record that arrives after the
run has closed."""

from __future__ import annotations

import time

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource

from mast_otel.collector.demo.agent import SCENARIOS_BY_NAME, SreAgent, tracer_provider
from mast_otel.collector.service import Service
from mast_otel.collector.store import ChdbStore, queries
from tests.test_end_to_end import loopback_config


def wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.05)


def test_evaluation_after_close_updates_the_signature(tmp_path):
    config = loopback_config(tmp_path / "store")
    service = Service(config)
    service.start()
    try:
        provider = tracer_provider(
            OTLPSpanExporter(endpoint=f"127.0.0.1:{service.grpc_port}", insecure=True)
        )
        tracer = provider.get_tracer("test")
        run = SreAgent(tracer).run(SCENARIOS_BY_NAME["blind_fix"])  # outcome "failure" on root
        with tracer.start_as_current_span("evaluated") as span:  # an in-run evaluation event
            span.add_event(
                "gen_ai.evaluation.result",
                {"gen_ai.evaluation.name": "recall", "gen_ai.evaluation.score.value": 0.25},
            )
            inline_trace = format(span.get_span_context().trace_id, "032x")
        provider.force_flush(10_000)
        provider.shutdown()
        # The pipeline's thread writes them (the exporter is that thread's alone).
        wait_for(lambda: service.exporter.stats.rows_written.get("mast_signatures", 0) >= 2)

        # The evaluator's verdict, later, as a log record in the run's trace context.
        logs = LoggerProvider(resource=Resource.create({"service.name": "evaluator"}))
        logs.add_log_record_processor(
            SimpleLogRecordProcessor(
                OTLPLogExporter(endpoint=f"127.0.0.1:{service.grpc_port}", insecure=True)
            )
        )
        context = trace.set_span_in_context(
            trace.NonRecordingSpan(
                trace.SpanContext(
                    trace_id=int(run.trace_id, 16),
                    span_id=int(run.root_span, 16),
                    is_remote=True,
                    trace_flags=trace.TraceFlags(1),
                )
            )
        )
        logs.get_logger("evaluator").emit(
            event_name="gen_ai.evaluation.result",
            context=context,
            attributes={
                "gen_ai.evaluation.name": "incident_resolved",
                "gen_ai.evaluation.score.label": "pass",
                "gen_ai.evaluation.score.value": 0.8,
            },
        )
        logs.shutdown()
        wait_for(lambda: service.pipeline.stats.outcomes_updated >= 1)
    finally:
        service.stop()

    store = ChdbStore(config.storage.data_dir)
    try:
        late = queries.signatures(store, trace_id=run.trace_id)
        versions = store.query(
            f"SELECT count() AS n FROM otel.mast_signatures WHERE TraceId = '{run.trace_id}'"
        )
        inline = queries.signatures(store, trace_id=inline_trace)
    finally:
        store.close()
    assert len(late) == 1
    assert late[0]["outcome"] == "success"  # the evaluator overrides the harness's guess
    assert late[0]["score"] == 0.8
    assert late[0]["modes"] == ["FM-3.2"]  # the rest of the signature is kept
    assert int(versions[0]["n"]) == 2  # the original row and the updated one
    assert inline[0]["score"] == 0.25
    assert inline[0]["outcome"] == ""
