"""An agent that exports log events instead of spans (the Codex CLI): its events go through the
real SDK log exporter over gRPC, are stored in otel_logs, and its conversation is analysed as
a run."""

from __future__ import annotations

import json

from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource

from mast_otel.collector.service import Service
from mast_otel.collector.store import ChdbStore, queries
from mast_otel.processors.ids import stable_hex
from tests.test_end_to_end import loopback_config

T0 = 1_790_000_000_000_000_000


def test_codex_conversation_is_a_run_with_findings(tmp_path):
    config = loopback_config(tmp_path / "store")
    service = Service(config)
    service.start()
    try:
        provider = LoggerProvider(resource=Resource.create({"service.name": "codex_cli_rs"}))
        provider.add_log_record_processor(
            BatchLogRecordProcessor(
                OTLPLogExporter(endpoint=f"127.0.0.1:{service.grpc_port}", insecure=True)
            )
        )
        logger = provider.get_logger("codex_otel")
        common = {"conversation.id": "conv-42", "model": "gpt-5-codex", "app.version": "0.50.0"}
        logger.emit(
            timestamp=T0,
            event_name="codex.user_prompt",
            attributes={**common, "event.name": "codex.user_prompt", "prompt_length": 40},
        )
        for i in range(3):
            logger.emit(
                timestamp=T0 + (i + 1) * 2_000_000_000,
                event_name="codex.tool_result",
                attributes={
                    **common,
                    "event.name": "codex.tool_result",
                    "tool_name": "shell",
                    "call_id": f"call_{i}",
                    "arguments": json.dumps({"command": ["pytest", "-q", "tests/test_api.py"]}),
                    "duration_ms": 900,
                    "success": "false",
                    "output": "1 failed, 4 passed in 0.9s",
                },
            )
        provider.shutdown()
    finally:
        service.stop()

    store = ChdbStore(config.storage.data_dir)
    try:
        logs = store.query("SELECT EventName AS e FROM otel.otel_logs ORDER BY Timestamp")
        trace_id = stable_hex("codex", "conv-42", length=32)
        found = queries.findings(store, queries.FindingFilter(trace_id=trace_id))
        signature = queries.signatures(store, trace_id=trace_id)
    finally:
        store.close()
    assert [r["e"] for r in logs] == ["codex.user_prompt"] + ["codex.tool_result"] * 3
    # The same failing test run three times, and the conversation ends there: a loop (FM-1.3),
    # ended inside it (FM-1.5), right after a failure with no recovery (FM-3.1).
    rules = sorted((f["mode"], f["rule"]) for f in found)
    assert rules == [
        ("FM-1.3", "same_call"),
        ("FM-1.5", "ended_in_loop"),
        ("FM-3.1", "after_failed_call"),
    ]
    repetition = next(f for f in found if f["mode"] == "FM-1.3")
    # A failing call repeated unchanged is reported once its second run failed the same way.
    assert repetition["evidence"]["repeats"] == 2
    assert signature[0]["tool_calls"] == 3
    assert signature[0]["modes"] == ["FM-1.3", "FM-1.5", "FM-3.1"]
