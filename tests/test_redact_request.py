"""Requests redacted before the spool (`collector/otlp/redact_request.py`): every field the
store keeps, keys with no value hint around them, and clean requests left byte for byte."""

from __future__ import annotations

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from mast_otel.collector.otlp.redact_request import RequestRedactor, set_any_value
from mast_otel.processors.redact_rules import RedactionConfig
from tests.secrets_corpus import ARGV, ARGV_SECRET, KEYED, NEAR_MISSES, PROBES

PLAIN = "plainvalue0123456789"  # no value rule's hint: only its key or place gives it away


def _span_request() -> tuple[ExportTraceServiceRequest, object]:
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = b"\1" * 16, b"\2" * 8, "execute_tool shell"
    return request, span


def _redact(request: ExportTraceServiceRequest | ExportLogsServiceRequest) -> tuple[bool, bytes]:
    redactor = RequestRedactor(RedactionConfig())
    changed = redactor.redact(request, request.SerializeToString(), "protobuf")
    return changed, request.SerializeToString()


@pytest.mark.parametrize("key", [*KEYED, "\u017fecret", "aws.session_token"])
def test_a_secret_named_key_loses_its_value_without_any_value_hint(key: str) -> None:
    request, span = _span_request()
    attribute = span.attributes.add()  # type: ignore[attr-defined]
    attribute.key, attribute.value.string_value = key, PLAIN
    changed, data = _redact(request)
    assert changed and PLAIN.encode() not in data and b"[REDACTED]" in data


def test_flags_and_maps_inside_values_without_any_value_hint() -> None:
    request, span = _span_request()
    attribute = span.attributes.add()  # type: ignore[attr-defined]
    attribute.key = "process.command_args"
    set_any_value(attribute.value, ARGV)
    attribute = span.attributes.add()  # type: ignore[attr-defined]
    attribute.key = "config"
    set_any_value(attribute.value, {"db": {"dbPassword": PLAIN}, "region": "eu-west-1"})
    changed, data = _redact(request)
    assert changed and ARGV_SECRET.encode() not in data and PLAIN.encode() not in data
    assert b"eu-west-1" in data and b"mysql" in data


@pytest.mark.parametrize("probe", PROBES[:12], ids=lambda probe: probe.name)
def test_every_stored_field_of_a_span_and_a_log_is_redacted(probe: object) -> None:
    text = probe.text  # type: ignore[attr-defined]
    secrets = probe.secrets  # type: ignore[attr-defined]
    request = ExportTraceServiceRequest()
    resource = request.resource_spans.add()
    attribute = resource.resource.attributes.add()
    attribute.key, attribute.value.string_value = "deploy.note", text
    scope_spans = resource.scope_spans.add()
    scope_spans.scope.name = scope_spans.scope.version = text
    span = scope_spans.spans.add()
    span.trace_id, span.span_id = b"\1" * 16, b"\2" * 8
    span.name = span.trace_state = span.status.message = text
    attribute = span.attributes.add()
    attribute.key, attribute.value.bytes_value = "probe.bytes", text.encode()
    event = span.events.add()
    event.name = text
    attribute = event.attributes.add()
    attribute.key, attribute.value.string_value = "detail", text
    link = span.links.add()
    link.trace_id, link.span_id, link.trace_state = b"\3" * 16, b"\4" * 8, text
    logs = ExportLogsServiceRequest()
    scope_logs = logs.resource_logs.add().scope_logs.add()
    scope_logs.scope.name = scope_logs.scope.version = text
    record = scope_logs.log_records.add()
    record.body.bytes_value = text.encode()
    record.severity_text = record.event_name = text
    for message in (request, logs):
        changed, data = _redact(message)
        assert changed
        for secret in secrets:
            assert secret.encode() not in data, (probe, secret)


def test_a_clean_request_is_left_byte_for_byte() -> None:
    request, span = _span_request()
    for number, text in enumerate(NEAR_MISSES):
        attribute = span.attributes.add()  # type: ignore[attr-defined]
        attribute.key, attribute.value.string_value = f"note.{number}", text
    attribute = span.attributes.add()  # type: ignore[attr-defined]
    attribute.key, attribute.value.int_value = "gen_ai.usage.input_tokens", 1200
    before = request.SerializeToString()
    redactor = RequestRedactor(RedactionConfig())
    assert not redactor.redact(request, before, "protobuf")
    assert request.SerializeToString() == before
