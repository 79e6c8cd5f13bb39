"""Decoded OTLP telemetry, before any interpretation.

A `SpanRecord` or `LogRecord` is what the wire said, with ids as lowercase hex and attribute
values as plain Python values. Storage writes these as-is (so unknown dialects are kept
untouched); normalization reads them into `Step`s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

# An OTLP AnyValue as Python: str, bool, int, float, bytes, a list of values, a dict of values,
# or None for an empty value.
AttrValue = Union[  # noqa: UP007 (a recursive alias needs the string forward references)
    str, bool, int, float, bytes, list["AttrValue"], dict[str, "AttrValue"], None
]
Attributes = dict[str, AttrValue]


@dataclass(slots=True)
class SpanEvent:
    time_ns: int
    name: str
    attributes: Attributes = field(default_factory=dict)


@dataclass(slots=True)
class SpanLink:
    trace_id: str
    span_id: str
    trace_state: str = ""
    attributes: Attributes = field(default_factory=dict)


@dataclass(slots=True)
class SpanRecord:
    """One span as received. `kind` and `status_code` use the spellings of the OpenTelemetry
    Collector's ClickHouse exporter ("Internal", "Client", ...; "Unset", "Ok", "Error")."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    start_ns: int
    end_ns: int
    kind: str = "Internal"
    trace_state: str = ""
    status_code: str = "Unset"
    status_message: str = ""
    service_name: str = ""
    resource_attributes: Attributes = field(default_factory=dict)
    scope_name: str = ""
    scope_version: str = ""
    attributes: Attributes = field(default_factory=dict)
    events: list[SpanEvent] = field(default_factory=list)
    links: list[SpanLink] = field(default_factory=list)


@dataclass(slots=True)
class LogRecord:
    """One OTLP log record as received (agents such as the Codex CLI export events as logs)."""

    time_ns: int
    observed_time_ns: int = 0
    trace_id: str = ""
    span_id: str = ""
    severity_text: str = ""
    severity_number: int = 0
    body: AttrValue = None
    event_name: str = ""
    service_name: str = ""
    resource_attributes: Attributes = field(default_factory=dict)
    scope_name: str = ""
    scope_version: str = ""
    attributes: Attributes = field(default_factory=dict)
    flags: int = 0
