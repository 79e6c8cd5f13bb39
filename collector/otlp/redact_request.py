"""Redaction of a parsed OTLP request before it is written ahead to the spool, so no secret a
rule catches reaches the disk, not even for the moments between acknowledgement and storage.

The same `Redactor` and rules as the pipeline's, over the request as the wire holds it: every
attribute map (resource, scope, span, event, link, log record), names and texts (span, event
and scope names, scope version, trace states, status message, a log's body, severity text
and event name). A request whose bytes hold no value rule's hint (`Redactor.needs_scan`, one
RE2 pass), no secret-named key and no flag (`wire_key_hint`, another) is left as it is; one
with no value hint has only its keys checked, and its argument lists and maps read; values of
the others are scanned record by record, as the pipeline does. Only values that changed are
written back, and the request is serialized again only when something did.
"""

from __future__ import annotations

import threading
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from mast_otel.collector.otlp.decode import DEFAULT_MAX_VALUE_DEPTH, any_value_to_python
from mast_otel.processors.records import Attributes, AttrValue
from mast_otel.processors.redact import Redactor
from mast_otel.processors.redact_rules import RedactionConfig, wire_key_hint


def _array_needs_a_look(array: Any) -> bool:
    for item in array.values:
        kind = item.WhichOneof("value")
        if kind == "string_value":
            if item.string_value[:1] == "-":
                return True
        elif kind in ("array_value", "kvlist_value"):
            return True
    return False


def set_any_value(target: AnyValue, value: AttrValue) -> None:
    """Write a plain Python value into an OTLP AnyValue (the inverse of the decoder's)."""
    target.Clear()
    if value is None:
        return
    if isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int):
        target.int_value = value
    elif isinstance(value, float):
        target.double_value = value
    elif isinstance(value, str):
        target.string_value = value
    elif isinstance(value, bytes):
        target.bytes_value = value
    elif isinstance(value, list):
        array = target.array_value
        array.SetInParent()
        for item in value:
            set_any_value(array.values.add(), item)
    elif isinstance(value, dict):
        kvlist = target.kvlist_value
        kvlist.SetInParent()
        for key, item in value.items():
            kv = kvlist.values.add()
            kv.key = key
            set_any_value(kv.value, item)


class RequestRedactor:
    """Redacts parsed OTLP requests in place (thread-safe: receivers call it from their
    threads). `stats` counts requests and what changed; `redactor.stats` what was redacted."""

    def __init__(self, config: RedactionConfig, max_value_depth: int = DEFAULT_MAX_VALUE_DEPTH):
        self.redactor = Redactor(config)
        self.key_hint = wire_key_hint(config)
        self.depth = max_value_depth
        self._lock = threading.Lock()
        self.requests = 0
        self.requests_changed = 0
        self.requests_screened = 0

    @property
    def active(self) -> bool:
        return self.redactor.active

    def redact(
        self,
        request: ExportTraceServiceRequest | ExportLogsServiceRequest,
        data: bytes,
        encoding: str,
    ) -> bool:
        """Redact `request` (parsed from `data`) in place; whether anything changed."""
        if not self.redactor.active:
            return False
        with self._lock:
            scan = self.redactor.needs_scan(data, encoding)
            self.requests += 1
            if (
                not scan
                and encoding == "protobuf"
                and self.key_hint is not None
                and self.key_hint.search(data) is None
            ):
                # No value rule's hint, no secret-named key, no flag: nothing to change.
                self.requests_screened += 1
                return False
            if isinstance(request, ExportTraceServiceRequest):
                changed = self._traces(request, scan)
            else:
                changed = self._logs(request, scan)
            if changed:
                self.requests_changed += 1
            return changed

    # -- the request's parts ----------------------------------------------------------------

    def _traces(self, request: ExportTraceServiceRequest, scan: bool) -> bool:
        changed = False
        for resource_spans in request.resource_spans:
            changed |= self._record([resource_spans.resource.attributes], [], scan)
            for scope_spans in resource_spans.scope_spans:
                changed |= self._scope(scope_spans.scope, scan)
                for span in scope_spans.spans:
                    kvs = [span.attributes]
                    kvs.extend(event.attributes for event in span.events)
                    kvs.extend(link.attributes for link in span.links)
                    texts: list[tuple[Any, str]] = [
                        (span, "name"),
                        (span, "trace_state"),
                        (span.status, "message"),
                    ]
                    texts.extend((event, "name") for event in span.events)
                    texts.extend((link, "trace_state") for link in span.links)
                    changed |= self._record(kvs, texts, scan)
        return changed

    def _logs(self, request: ExportLogsServiceRequest, scan: bool) -> bool:
        changed = False
        for resource_logs in request.resource_logs:
            changed |= self._record([resource_logs.resource.attributes], [], scan)
            for scope_logs in resource_logs.scope_logs:
                changed |= self._scope(scope_logs.scope, scan)
                for log in scope_logs.log_records:
                    texts = [(log, "severity_text"), (log, "event_name")]
                    changed |= self._record([log.attributes], texts, scan, body=log.body)
        return changed

    def _scope(self, scope: Any, scan: bool) -> bool:
        return self._record([scope.attributes], [(scope, "name"), (scope, "version")], scan)

    def _record(
        self,
        kvs: list[Any],
        texts: list[tuple[Any, str]],
        scan: bool,
        body: AnyValue | None = None,
    ) -> bool:
        """One record's attribute lists, texts (message, field name) and log body."""
        redactor = self.redactor
        if (
            not scan
            and not any(self._needs_a_look(attributes) for attributes in kvs)
            and (body is None or body.WhichOneof("value") not in ("array_value", "kvlist_value"))
        ):
            # Nearly every record of a request without a hint: no key named by a rule, no
            # map, list or bytes inside, and values are not scanned.
            return False
        maps: list[Attributes] = [
            {kv.key: any_value_to_python(kv.value, self.depth) for kv in attributes}
            for attributes in kvs
        ]
        before = [dict(m) for m in maps]
        values: list[AttrValue] = [getattr(message, name) for message, name in texts]
        if body is not None:
            values.append(any_value_to_python(body, self.depth))
        after = redactor.parts(maps, values, scan)
        changed = False
        for attributes, old, new in zip(kvs, before, maps, strict=True):
            if old != new:
                changed = True
                self._write_back(attributes, new)
        for (message, name), old_text, new_text in zip(texts, values, after, strict=False):
            if new_text != old_text:
                setattr(message, name, new_text)
                changed = True
        if body is not None and after[-1] != values[-1]:
            set_any_value(body, after[-1])
            changed = True
        return changed

    def _needs_a_look(self, attributes: Any) -> bool:
        """Whether, values unscanned, the redactor could change anything in these
        attributes: a key a rule names, a map (keys of its own), or an array holding a flag
        ("--password") or maps or arrays."""
        verdict = self.redactor.key_verdict
        for kv in attributes:
            secret, truncate = verdict(kv.key)
            if secret or truncate:
                return True
            kind = kv.value.WhichOneof("value")
            if kind == "kvlist_value" or (
                kind == "array_value" and _array_needs_a_look(kv.value.array_value)
            ):
                return True
        return False

    @staticmethod
    def _write_back(attributes: Any, values: Attributes) -> None:
        kv: KeyValue
        for kv in attributes:
            if kv.key in values:
                set_any_value(kv.value, values[kv.key])
