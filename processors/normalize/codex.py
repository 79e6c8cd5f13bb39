"""Codex CLI OTLP log events (`codex.*`) read into a `Step`.

The Codex CLI exports events as log records, not spans, usually without a trace id: the run is
the conversation (`conversation.id`). Steps get ids derived from it, so re-reading the same
events gives the same ids, and all steps of a conversation hang under one virtual parent id
that no record carries. No Codex step is a root: a log-only run has no span that ends it, so it
closes the way a run without its root does (idle time or `mast.run.end`).

Which events become steps:
- `codex.tool_result` → TOOL (status from `success`; start = time - `duration_ms`);
- `codex.user_prompt` → HUMAN (the prompt is redacted unless the user opted in);
- `codex.sse_event` with kind `response.completed` → LLM with token counts (the model call);
  a streamed event carrying `error.message` → failed LLM step; other stream events → None;
- `codex.api_request` → only when it failed (failed LLM step): a successful request is the
  same model call that `response.completed` already reports, and counting both would double
  the run's model calls;
- `codex.tool_decision` → OTHER (tool name, call id, the decision as output text);
- `codex.conversation_starts` → AGENT (model; the conversation's opening).

Names verified against openai/codex docs/config.md ("Observability and telemetry", event
catalog). `codex.websocket_request` / `codex.websocket_event` are newer transport twins of
`api_request` / `sse_event`, seen in consumers of Codex telemetry, read the same way.
"""

from __future__ import annotations

from collections.abc import Mapping

from mast_otel.processors.ids import stable_hex
from mast_otel.processors.model import Step, StepKind, StepStatus
from mast_otel.processors.normalize import values
from mast_otel.processors.normalize.values import MAX_TEXT
from mast_otel.processors.records import LogRecord

DIALECT = "codex"
PREFIX = "codex."

# Common metadata on every event.
EVENT_NAME = "event.name"
EVENT_KIND = "event.kind"
EVENT_TIMESTAMP = "event.timestamp"
CONVERSATION_ID = "conversation.id"
MODEL = "model"
SLUG = "slug"

CONVERSATION_STARTS = "codex.conversation_starts"
API_REQUEST = "codex.api_request"
SSE_EVENT = "codex.sse_event"
WEBSOCKET_REQUEST = "codex.websocket_request"
WEBSOCKET_EVENT = "codex.websocket_event"
USER_PROMPT = "codex.user_prompt"
TOOL_DECISION = "codex.tool_decision"
TOOL_RESULT = "codex.tool_result"

# Event fields.
TOOL_NAME = "tool_name"
CALL_ID = "call_id"
ARGUMENTS = "arguments"
OUTPUT = "output"
SUCCESS = "success"
DURATION_MS = "duration_ms"
DECISION = "decision"
DECISION_SOURCE = "source"
PROMPT = "prompt"
INPUT_TOKEN_COUNT = "input_token_count"
OUTPUT_TOKEN_COUNT = "output_token_count"
ERROR_MESSAGE = "error.message"
HTTP_STATUS_CODE = "http.response.status_code"

RESPONSE_COMPLETED = "response.completed"

_STREAM_EVENTS = frozenset({SSE_EVENT, WEBSOCKET_EVENT})
_REQUEST_EVENTS = frozenset({API_REQUEST, WEBSOCKET_REQUEST})
_ALWAYS = frozenset({TOOL_RESULT, USER_PROMPT, TOOL_DECISION, CONVERSATION_STARTS})
_NS_PER_MS = 1_000_000


def event_name(record: LogRecord) -> str:
    """The event name: the log record's own field, or the `event.name` attribute Codex sets."""
    attrs = values.mapping(getattr(record, "attributes", None))
    return values.name(getattr(record, "event_name", "")) or values.name(attrs.get(EVENT_NAME))


def recognises(record: LogRecord) -> bool:
    """A Codex event that becomes a step (see the module docstring for which do)."""
    event = event_name(record)
    if not event.startswith(PREFIX):
        return False
    attrs = values.mapping(getattr(record, "attributes", None))
    if event in _ALWAYS:
        return True
    if event in _STREAM_EVENTS:
        completed = values.name(attrs.get(EVENT_KIND)) == RESPONSE_COMPLETED
        return completed or bool(values.to_str(attrs.get(ERROR_MESSAGE)))
    if event in _REQUEST_EVENTS:
        return _request_error(attrs) != ""
    return False


def to_step(record: LogRecord, max_text: int = MAX_TEXT) -> Step:
    """The step for one Codex event; fields the event does not carry stay empty."""
    attrs = values.mapping(getattr(record, "attributes", None))
    resource = values.mapping(getattr(record, "resource_attributes", None))
    event = event_name(record)
    conversation = values.name(attrs.get(CONVERSATION_ID)) or values.name(
        resource.get(CONVERSATION_ID)
    )
    time_ns = _time_ns(record, attrs)
    call_id = values.name(attrs.get(CALL_ID))
    run_key = conversation or values.name(getattr(record, "trace_id", ""))

    step = Step(
        trace_id=values.name(getattr(record, "trace_id", ""))
        or stable_hex("codex", conversation, length=32),
        span_id=stable_hex(run_key, event, call_id or str(time_ns), length=16),
        parent_span_id=values.name(getattr(record, "span_id", ""))
        or stable_hex("codex", run_key, "conversation", length=16),
        name=event,
        kind=StepKind.OTHER,
        start_ns=time_ns,
        end_ns=time_ns,
        dialect=DIALECT,
        service=values.name(getattr(record, "service_name", "")),
        model=values.first_name(attrs, MODEL, SLUG),
        conversation_id=conversation,
        operation=event,
        run_attributes=values.run_attributes(attrs),
    )
    duration_ms = values.to_count(attrs.get(DURATION_MS))
    if duration_ms is not None:
        step.start_ns = max(0, time_ns - duration_ms * _NS_PER_MS)

    if event == TOOL_RESULT:
        _tool_result(step, attrs, max_text)
    elif event == USER_PROMPT:
        step.kind = StepKind.HUMAN
        prompt = values.to_str(attrs.get(PROMPT))
        step.input_text = values.truncate(prompt, min(max_text, values.INPUT_TEXT_MAX))
    elif event == TOOL_DECISION:
        step.tool_name = values.name(attrs.get(TOOL_NAME))
        step.tool_call_id = call_id
        step.output_text = values.name(attrs.get(DECISION))
    elif event == CONVERSATION_STARTS:
        step.kind = StepKind.AGENT
    elif event in _STREAM_EVENTS:
        step.kind = StepKind.LLM
        step.input_tokens = values.to_count(attrs.get(INPUT_TOKEN_COUNT))
        step.output_tokens = values.to_count(attrs.get(OUTPUT_TOKEN_COUNT))
        error = values.to_str(attrs.get(ERROR_MESSAGE))
        if error:
            step.status = StepStatus.ERROR
            step.error = values.truncate(error, values.ERROR_TEXT_MAX)
        else:
            step.status = StepStatus.OK
    elif event in _REQUEST_EVENTS:
        step.kind = StepKind.LLM
        error = _request_error(attrs)
        if error:
            step.status = StepStatus.ERROR
            step.error = values.truncate(error, values.ERROR_TEXT_MAX)
    return step


def _tool_result(step: Step, attrs: Mapping[str, object], max_text: int) -> None:
    step.kind = StepKind.TOOL
    step.tool_name = values.name(attrs.get(TOOL_NAME))
    step.tool_call_id = values.name(attrs.get(CALL_ID))
    step.tool_arguments = values.truncate(values.render(attrs.get(ARGUMENTS)), max_text)
    output = values.render(attrs.get(OUTPUT))
    step.tool_result = values.truncate(output, max_text)
    success = values.to_bool(attrs.get(SUCCESS))
    if success is True:
        step.status = StepStatus.OK
    elif success is False:
        step.status = StepStatus.ERROR
        step.error = values.truncate(output, values.ERROR_TEXT_MAX) or "tool failed"


def _request_error(attrs: Mapping[str, object]) -> str:
    """Error text of a failed model request: its message, else a 4xx/5xx status."""
    message = values.to_str(attrs.get(ERROR_MESSAGE))
    if message:
        return message
    status = values.to_int(attrs.get(HTTP_STATUS_CODE))
    if status is not None and status >= 400:
        return f"HTTP {status}"
    return ""


def _time_ns(record: LogRecord, attrs: Mapping[str, object]) -> int:
    """When the event happened: the record time, else `event.timestamp`, else observed time.

    Codex has been seen exporting a zero record time, with the moment in `event.timestamp`.
    """
    return (
        values.to_count(getattr(record, "time_ns", 0))
        or values.iso_to_ns(attrs.get(EVENT_TIMESTAMP))
        or values.to_count(getattr(record, "observed_time_ns", 0))
        or 0
    )
