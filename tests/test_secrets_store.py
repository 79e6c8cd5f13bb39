"""No secret a sender sends reaches the store, whatever field carries it.

Every probe of `tests/secrets_corpus.py` is sent through the real OpenTelemetry SDK (OTLP/gRPC
and OTLP/HTTP protobuf, plus one OTLP/JSON request) to `mast-otel serve`: as tool-call
arguments and results repeated until a detector quotes them in a finding's evidence, as
attribute values (strings, bytes, arrays), attribute keys that name a secret, span, event and
status texts, link and resource attributes, and log bodies, severity texts and attributes.
Raw protobuf requests add what no SDK sets: bytes values, trace states, scope names and
versions, a log's bytes body and event name. Through `serve --workers 2`: while it runs, with
the requests in its write-ahead spool, and again after it stops, every file under the test's
directory (spool, store, the collector's log) is read as bytes and searched for every secret;
after the stop every table of the store is dumped as text and searched too (as sent,
JSON-escaped, and base64-encoded at each alignment); the near misses must be there as sent."""

from __future__ import annotations

import base64
import json
import urllib.request
from pathlib import Path

import grpc
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Link, Status, StatusCode

from mast_otel.collector.store import ChdbStore
from tests.load import CollectorProcess, free_port, wait_until_idle
from tests.secrets_corpus import (
    ARGV,
    ARGV_EQUALS,
    ARGV_EQUALS_SECRET,
    ARGV_SECRET,
    KEYED,
    NEAR_MISSES,
    PROBES,
    Probe,
    fake,
)

CONFIG = """
windows:
  grace_s: 0.3
  idle_timeout_s: 2
storage:
  flush_interval_s: 0.3
pipeline:
  workers: 2
"""

RESOURCE_SECRET = fake("abcdefghijklmnopqrstuvwxyz0123456789", 24)
SECRETS = {f"{probe.name}#{i}": s for probe in PROBES for i, s in enumerate(probe.secrets)}
SECRETS.update({f"key:{k}": v for k, v in KEYED.items()})
SECRETS.update(argv=ARGV_SECRET, argv_equals=ARGV_EQUALS_SECRET, resource=RESOURCE_SECRET)


def _forms(secret: str) -> list[str]:
    """The secret as it could sit in a table: as sent, JSON-escaped, base64 at each of the
    three alignments (bytes values are stored as base64)."""
    forms = {secret, json.dumps(secret)[1:-1]}
    raw = secret.encode()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode()
        start = 0 if offset == 0 else 4
        inner = encoded[start : len(encoded) - 4]
        if len(inner) >= 8:
            forms.add(inner)
    return sorted(forms)


def _send_run(tracer, probe: Probe, number: int) -> None:
    with tracer.start_as_current_span(
        "invoke_agent ops",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "ops"},
    ) as root:
        # The same call three times with the same result: FM-1.3 quotes its arguments.
        for _ in range(3):
            with tracer.start_as_current_span(
                "execute_tool shell",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "shell",
                    "gen_ai.tool.call.arguments": json.dumps({"command": probe.text}),
                    "gen_ai.tool.call.result": probe.text,
                },
            ):
                pass
        with tracer.start_as_current_span(
            probe.text,
            links=[Link(root.get_span_context(), {"note": probe.text})],
            attributes={
                "probe.name": probe.name,
                "probe.text": probe.text,
                "probe.bytes": probe.text.encode(),
                "probe.list": [probe.text, "--flag"],
                "probe.argv": ARGV,
                "probe.argv_equals": ARGV_EQUALS,
                **KEYED,
                "near.miss": NEAR_MISSES[number % len(NEAR_MISSES)],
            },
        ) as span:
            span.add_event(probe.text, {"detail": probe.text})
            span.set_status(Status(StatusCode.ERROR, probe.text))


def _send_json_request(port: int, probe: Probe) -> None:
    """One OTLP/JSON request (JSON escapes, not protobuf bytes, reach the receiver)."""
    body = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "json-agent"}}]
                },
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "5" * 32,
                                "spanId": "6" * 16,
                                "name": probe.text,
                                "startTimeUnixNano": "1",
                                "endTimeUnixNano": "2",
                                "attributes": [
                                    {"key": "probe.text", "value": {"stringValue": probe.text}},
                                    {
                                        "key": "probe.bytes",
                                        "value": {
                                            "bytesValue": base64.b64encode(
                                                probe.text.encode()
                                            ).decode()
                                        },
                                    },
                                ],
                            }
                        ]
                    }
                ],
            }
        ]
    }
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/traces",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


def _send_raw_requests(port: int, probe: Probe) -> None:
    """Protobuf requests with the probe where no SDK puts it: a bytes value, trace states,
    scope names and versions, a log's body as bytes, its event name and scope."""
    spans = ExportTraceServiceRequest()
    resource = spans.resource_spans.add()
    scope_spans = resource.scope_spans.add()
    scope_spans.scope.name = probe.text
    scope_spans.scope.version = probe.text
    attribute = scope_spans.scope.attributes.add()
    attribute.key, attribute.value.string_value = "scope.note", probe.text
    span = scope_spans.spans.add()
    span.trace_id, span.span_id = bytes.fromhex("7" * 32), bytes.fromhex("8" * 16)
    span.name, span.trace_state = "raw", probe.text
    span.start_time_unix_nano, span.end_time_unix_nano = 1, 2
    attribute = span.attributes.add()
    attribute.key, attribute.value.bytes_value = "probe.bytes", probe.text.encode()
    link = span.links.add()
    link.trace_id, link.span_id = bytes.fromhex("9" * 32), bytes.fromhex("a" * 16)
    link.trace_state = probe.text
    logs = ExportLogsServiceRequest()
    scope_logs = logs.resource_logs.add().scope_logs.add()
    scope_logs.scope.name = probe.text
    scope_logs.scope.version = probe.text
    record = scope_logs.log_records.add()
    record.time_unix_nano = 1
    record.body.bytes_value = probe.text.encode()
    record.event_name = probe.text
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        for path, request in (
            ("trace.v1.TraceService", spans),
            ("logs.v1.LogsService", logs),
        ):
            channel.unary_unary(
                f"/opentelemetry.proto.collector.{path}/Export",
                request_serializer=None,
                response_deserializer=None,
            )(request.SerializeToString(), timeout=10)


def _grep(root: Path, secrets: dict[str, str]) -> dict[str, str]:
    """Every file under `root` (spool, store, logs) read as bytes: which secrets, in any of
    their forms, are in which file."""
    forms = [(name, form.encode()) for name, secret in secrets.items() for form in _forms(secret)]
    found: dict[str, str] = {}
    for path in root.rglob("*"):
        if not path.is_file():
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue  # removed while read (a spool file let go, a store part merged)
        for name, form in forms:
            if form in data:
                found[name] = str(path.relative_to(root))
    return found


def _dump(data_dir: Path) -> str:
    store = ChdbStore(data_dir)
    try:
        tables = store.query(
            "SELECT database, name FROM system.tables WHERE database NOT IN "
            "('system', 'INFORMATION_SCHEMA', 'information_schema') AND engine != 'View'"
        )
        parts = []
        for table in tables:
            sql = f"SELECT * FROM `{table['database']}`.`{table['name']}`"
            parts.append(f"== {table['database']}.{table['name']}\n")
            parts.append(store._run(sql, "TabSeparatedRaw"))
        names = [f"{t['database']}.{t['name']}" for t in tables]
        findings = store.query("SELECT count() AS n FROM otel.mast_findings WHERE Mode = 'FM-1.3'")
    finally:
        store.close()
    assert (
        "otel.otel_traces" in names and "otel.otel_logs" in names and "otel.mast_findings" in names
    )
    assert int(findings[0]["n"]) >= len(PROBES), "the detectors did not quote the probes"
    return "".join(parts)


def test_no_probe_secret_reaches_any_table(tmp_path: Path) -> None:
    config_path = tmp_path / "mast.yaml"
    config_path.write_text(CONFIG)
    collector = CollectorProcess(config_path, tmp_path / "data", free_port(), free_port())
    collector.start()
    resource = Resource.create(
        {
            "service.name": "ops-agent",
            "vault.token": RESOURCE_SECRET,
            "deploy.note": PROBES[0].text,
        }
    )
    try:
        providers = []
        for exporter in (
            OTLPSpanExporter(endpoint=f"127.0.0.1:{collector.grpc_port}", insecure=True),
            HttpSpanExporter(endpoint=f"http://127.0.0.1:{collector.http_port}/v1/traces"),
        ):
            provider = TracerProvider(resource=resource)
            provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=100))
            providers.append(provider)
        for number, probe in enumerate(PROBES):
            _send_run(providers[number % 2].get_tracer("secrets"), probe, number)
        logs = LoggerProvider(resource=resource)
        logs.add_log_record_processor(
            BatchLogRecordProcessor(
                OTLPLogExporter(endpoint=f"127.0.0.1:{collector.grpc_port}", insecure=True)
            )
        )
        logger = logs.get_logger("secrets")
        for probe in PROBES:
            logger.emit(
                body=probe.text,
                severity_text=probe.text,
                attributes={"probe.text": probe.text, "cmd": ARGV, **KEYED},
            )
            logger.emit(body={"message": probe.text, "nested": {"dbPassword": ARGV_SECRET}})
        _send_json_request(collector.http_port, PROBES[1])
        for probe in PROBES:
            _send_raw_requests(collector.grpc_port, probe)
        for provider in providers:
            assert provider.force_flush(30_000)
        assert logs.force_flush(30_000)
        # While it runs, with requests in the spool: nothing of a secret on disk.
        assert list((collector.data_dir / "spool").glob("*.wal")), "the spool is empty"
        leaked_running = _grep(tmp_path, SECRETS)
        wait_until_idle(collector)
        assert collector.stop() == 0
    finally:
        for provider in providers:
            provider.shutdown()
        logs.shutdown()
        collector.ensure_stopped()

    assert not leaked_running, f"secrets on disk while running: {leaked_running}"
    leaked_stopped = _grep(tmp_path, SECRETS)
    assert not leaked_stopped, f"secrets on disk after the stop: {leaked_stopped}"
    dump = _dump(collector.data_dir)
    leaked = {
        name: form for name, secret in SECRETS.items() for form in _forms(secret) if form in dump
    }
    assert not leaked, f"{len(leaked)} secrets reached the store: {sorted(leaked)}"
    # Redaction kept what it should: the near misses as sent, the probes' context around
    # their secrets, the redaction marker.
    for text in NEAR_MISSES:
        assert text in dump, text
    assert "[REDACTED]" in dump and "hooks.slack.com/services/" in dump
