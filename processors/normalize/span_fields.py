"""The step fields every span dialect fills the same way: ids, times, status and error text.

Names spelled here are general OpenTelemetry ones (`error.type`, the `exception` event), not
owned by any one dialect; each dialect's own attribute names live in its module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mast_otel.processors.model import Step, StepKind, StepStatus
from mast_otel.processors.normalize.values import (
    ERROR_TEXT_MAX,
    mapping,
    name,
    run_attributes,
    to_int,
    to_str,
    truncate,
)

# General OpenTelemetry names (trace semantic conventions).
ERROR_TYPE = "error.type"
EXCEPTION_EVENT = "exception"
EXCEPTION_MESSAGE = "exception.message"
EXCEPTION_TYPE = "exception.type"
# SpanRecord.status_code spellings (ClickHouse exporter: "Unset", "Ok", "Error"), compared
# case-insensitively so the OTLP enum names also work.
_STATUS_ERROR = frozenset({"error", "status_code_error"})
_STATUS_OK = frozenset({"ok", "status_code_ok"})


def span_status(record: object, max_text: int = ERROR_TEXT_MAX) -> tuple[StepStatus, str]:
    """Status and error text from the span status, `error.type` and `exception` events.

    An `exception` event alone does not make a step failed (the code may have handled it); it
    only supplies the text when the status or `error.type` says the span failed.
    """
    attrs = mapping(getattr(record, "attributes", None))
    code = to_str(getattr(record, "status_code", "")).strip().lower()
    error_type = name(attrs.get(ERROR_TYPE))
    failed = code in _STATUS_ERROR or bool(error_type)
    if not failed:
        return (StepStatus.OK if code in _STATUS_OK else StepStatus.UNSET), ""
    exception_message = ""
    exception_type = ""
    for event in _events(record):
        if getattr(event, "name", None) != EXCEPTION_EVENT:
            continue
        event_attrs = mapping(getattr(event, "attributes", None))
        exception_message = exception_message or to_str(event_attrs.get(EXCEPTION_MESSAGE))
        exception_type = exception_type or name(event_attrs.get(EXCEPTION_TYPE))
    text = (
        to_str(getattr(record, "status_message", ""))
        or exception_message
        or error_type
        or exception_type
        or "error"
    )
    return StepStatus.ERROR, truncate(text, min(max_text, ERROR_TEXT_MAX))


def _events(record: object) -> list[Any]:
    events = getattr(record, "events", None)
    return list(events) if isinstance(events, list | tuple) else []


def events_of(record: object) -> list[tuple[str, Mapping[str, Any]]]:
    """(name, attributes) of each span event, skipping anything malformed."""
    out: list[tuple[str, Mapping[str, Any]]] = []
    for event in _events(record):
        event_name = getattr(event, "name", None)
        if isinstance(event_name, str):
            out.append((event_name, mapping(getattr(event, "attributes", None))))
    return out


def span_step(record: object, kind: StepKind, dialect: str) -> Step:
    """A step with the fields every span dialect fills the same way (ids, times, status)."""
    attrs = mapping(getattr(record, "attributes", None))
    status, error = span_status(record)
    start_ns = getattr(record, "start_ns", 0)
    end_ns = getattr(record, "end_ns", 0)
    # Positional, in Step's field order (keyword matching costs as much as the fields).
    return Step(
        name(getattr(record, "trace_id", "")),  # trace_id
        name(getattr(record, "span_id", "")),  # span_id
        name(getattr(record, "parent_span_id", "")),  # parent_span_id
        name(getattr(record, "name", "")),  # name
        kind,
        start_ns if type(start_ns) is int else (to_int(start_ns) or 0),  # start_ns
        end_ns if type(end_ns) is int else (to_int(end_ns) or 0),  # end_ns
        dialect,
        status,
        error,
        name(getattr(record, "service_name", "")),  # service
        run_attributes=run_attributes(attrs),
    )
