"""Reading GenAI messages: a span's input (how many messages, the last user's text) and output
(text, requested tool calls, finish reason) from the first source present (message JSON on the
span or an operation-details event, per-message span events, the deprecated prompt and
completion), content blocks as Strands Agents write them, and the per-message events that some
instrumentations send as log records, joined to their chat span's step."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mast_otel.processors.model import InputMessage, Step, ToolCallRequest
from mast_otel.processors.normalize import history, payloads, values
from mast_otel.processors.normalize.genai_names import (
    _INPUT_MESSAGE_EVENTS,
    BODY_CONTENT,
    BODY_FINISH_REASON,
    BODY_MESSAGE,
    BODY_TOOL_CALLS,
    COMPLETION,
    EVENT_BODY,
    EVENT_CHOICE,
    EVENT_CONTENT_COMPLETION,
    EVENT_CONTENT_PROMPT,
    EVENT_OPERATION_DETAILS,
    EVENT_TOOL_MESSAGE,
    INPUT_MESSAGES,
    MESSAGE_FINISH_REASON,
    MESSAGE_ROLE,
    OUTPUT_MESSAGES,
    PROMPT,
    ROLE_USER,
)
from mast_otel.processors.normalize.values import MAX_TEXT

# --- input ------------------------------------------------------------------------------------


def _inputs(
    attrs: Mapping[str, Any], events: list[tuple[str, Any]], max_text: int = MAX_TEXT
) -> tuple[int | None, str, tuple[InputMessage, ...]]:
    """(number of input messages, last user message text, the messages), from the first source
    present.

    Order: `gen_ai.input.messages` on the span, then on an operation-details event, then the
    per-message events, then the old `gen_ai.prompt` attribute or `gen_ai.content.prompt` event.
    """
    if not events and type(attrs) is dict and INPUT_MESSAGES not in attrs and PROMPT not in attrs:
        return None, "", ()  # no source present (tool and agent spans): what the reads below give
    messages = _message_list(attrs.get(INPUT_MESSAGES))
    if messages is None:
        messages = _message_list(_event_value(events, EVENT_OPERATION_DETAILS, INPUT_MESSAGES))
    if messages is not None:
        return len(messages), _last_user_text(messages), history.from_messages(messages, max_text)

    from_events = [
        (role, event_attrs)
        for event, event_attrs in events
        if (role := _INPUT_MESSAGE_EVENTS.get(event)) is not None
    ]
    if from_events:
        read = [_event_message(role, body, max_text) for role, body in from_events]
        users = [
            text
            for role, body in from_events
            if role == ROLE_USER and (text := _event_body_text(body))
        ]
        return len(from_events), users[-1] if users else "", history.bounded(read)

    legacy = values.first(attrs, PROMPT)
    if legacy is None:
        legacy = _event_value(events, EVENT_CONTENT_PROMPT, PROMPT)
    messages = _message_list(legacy)
    if messages is not None:
        return len(messages), _last_user_text(messages), history.from_messages(messages, max_text)
    if isinstance(legacy, str):
        return None, legacy, ()
    return None, "", ()


def _event_message(role: str, event_attrs: Mapping[str, Any], max_text: int) -> InputMessage:
    """One input message from a per-message event (span event or log record body)."""
    body = _event_body(event_attrs)
    if role == history.TOOL:
        text = _event_body_text(event_attrs)
        if not text:
            text = values.render(body.get(BODY_CONTENT))
        call_id = values.name(values.first(body, "id", "tool_call_id"))
        if not call_id:
            call_id = values.name(values.first(event_attrs, "id", "tool_call_id"))
        return history.message(role, text, max_text, call_id)
    calls: list[ToolCallRequest] = []
    if role == history.ASSISTANT:
        calls = payloads.tool_calls_from(body.get(BODY_TOOL_CALLS), max_text)
    return history.message(role, _event_body_text(event_attrs), max_text, calls=calls)


def _message_list(value: object) -> list[Any] | None:
    parsed = values.parse_json(value)
    if type(parsed) is dict or isinstance(parsed, Mapping):
        return [parsed]
    return parsed if isinstance(parsed, list) else None


def _last_user_text(messages: list[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, str):
            return message
        is_mapping = type(message) is dict or isinstance(message, Mapping)
        if is_mapping and message.get(MESSAGE_ROLE) == ROLE_USER:
            text = payloads.message_text(message)
            if text:
                return text
    return ""


def _event_value(events: list[tuple[str, Any]], event_name: str, key: str) -> Any:
    for event, event_attrs in events:
        if event == event_name:
            value = values.first(event_attrs, key)
            if value is not None:
                return value
    return None


def _event_body(event_attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The event body: `gen_ai.event.content` JSON, overlaid with body fields sent flat."""
    parsed = values.parse_json(event_attrs.get(EVENT_BODY))
    is_mapping = type(parsed) is dict or isinstance(parsed, Mapping)
    body: dict[str, Any] = dict(parsed) if is_mapping else {}
    if not body and isinstance(event_attrs.get(EVENT_BODY), str):
        body[BODY_CONTENT] = event_attrs[EVENT_BODY]
    for key in (BODY_CONTENT, BODY_MESSAGE, BODY_TOOL_CALLS, BODY_FINISH_REASON):
        value = event_attrs.get(key)
        if values.present(value):
            body[key] = value
    return body


def _event_body_text(event_attrs: Mapping[str, Any]) -> str:
    body = _event_body(event_attrs)
    message = values.parse_json(body.get(BODY_MESSAGE))
    if type(message) is dict or isinstance(message, Mapping):
        return payloads.message_text(message)
    return payloads.content_text(_blocks(body.get(BODY_CONTENT)))


# Content blocks as Strands Agents (and Bedrock's Converse API) write them, a JSON list in the
# event's `content` / `message`: `{"text": ...}`, `{"toolUse": {"toolUseId", "name", "input"}}`,
# `{"toolResult": {"toolUseId", "status", "content": [...]}}`.
BLOCK_TOOL_USE = "toolUse"
BLOCK_TOOL_RESULT = "toolResult"


def _blocks(value: object) -> object:
    """A JSON list of content blocks sent as a string, parsed; anything else unchanged."""
    if isinstance(value, str) and value.startswith("[{"):
        parsed = values.parse_json(value)
        if isinstance(parsed, list):
            return parsed
    return value


def _tool_uses(blocks: object, max_text: int) -> list[ToolCallRequest]:
    calls: list[ToolCallRequest] = []
    if not isinstance(blocks, list):
        return calls
    for block in blocks:
        use = block.get(BLOCK_TOOL_USE) if isinstance(block, Mapping) else None
        if isinstance(use, Mapping) and values.name(use.get("name")):
            arguments = values.truncate(values.render(use.get("input")), max_text)
            calls.append(
                ToolCallRequest(
                    values.name(use["name"]), arguments, values.name(use.get("toolUseId"))
                )
            )
    return calls


def _tool_from_events(step: Step, events: list[tuple[str, Any]], max_text: int) -> None:
    """A tool span that carries its call as events (Strands Agents): the arguments in a
    `gen_ai.tool.message`, the result in a `gen_ai.choice`."""
    for event, event_attrs in events:
        body = _event_body(event_attrs)
        if event == EVENT_TOOL_MESSAGE and not step.tool_arguments:
            step.tool_arguments = values.truncate(values.render(body.get(BODY_CONTENT)), max_text)
        elif event == EVENT_CHOICE and not step.tool_result:
            blocks = _blocks(body.get(BODY_MESSAGE) or body.get(BODY_CONTENT))
            step.tool_result = values.truncate(payloads.content_text(blocks), max_text)
        if not step.tool_call_id:
            step.tool_call_id = values.name(event_attrs.get("id"))


# --- output -----------------------------------------------------------------------------------


def _outputs(
    attrs: Mapping[str, Any], events: list[tuple[str, Any]], max_text: int
) -> tuple[str, list[ToolCallRequest], str]:
    """(output text, requested tool calls, finish reason) from the first source present.

    Every output message (choice) is read: with one choice, the usual case, that is the answer;
    with several, their texts are joined and their tool calls listed together.
    """
    if (
        not events
        and type(attrs) is dict
        and OUTPUT_MESSAGES not in attrs
        and COMPLETION not in attrs
    ):
        return "", [], ""  # no source present (tool and agent spans): what the reads below give
    messages = _message_list(attrs.get(OUTPUT_MESSAGES))
    if messages is None:
        messages = _message_list(_event_value(events, EVENT_OPERATION_DETAILS, OUTPUT_MESSAGES))
    if messages is not None:
        return _read_messages(messages, max_text)

    choices = [_event_body(event_attrs) for event, event_attrs in events if event == EVENT_CHOICE]
    if choices:
        texts: list[str] = []
        calls: list[ToolCallRequest] = []
        finish = ""
        for body in choices:
            message = values.parse_json(body.get(BODY_MESSAGE))
            if type(message) is dict or isinstance(message, Mapping):
                texts.append(payloads.message_text(message))
                calls.extend(payloads.message_tool_calls(message, max_text))
            elif isinstance(message, list):
                texts.append(payloads.content_text(message))
                calls.extend(_tool_uses(message, max_text))
            elif isinstance(body.get(BODY_MESSAGE), str) and not body.get(BODY_CONTENT):
                texts.append(body[BODY_MESSAGE])
            else:
                texts.append(payloads.content_text(_blocks(body.get(BODY_CONTENT))))
            calls.extend(payloads.tool_calls_from(body.get(BODY_TOOL_CALLS), max_text))
            finish = finish or values.name(body.get(BODY_FINISH_REASON))
        return "\n".join(text for text in texts if text), calls, finish

    legacy = values.first(attrs, COMPLETION)
    if legacy is None:
        legacy = _event_value(events, EVENT_CONTENT_COMPLETION, COMPLETION)
    messages = _message_list(legacy)
    if messages is not None:
        return _read_messages(messages, max_text)
    return (legacy if isinstance(legacy, str) else ""), [], ""


def _read_messages(messages: list[Any], max_text: int) -> tuple[str, list[ToolCallRequest], str]:
    texts: list[str] = []
    calls: list[ToolCallRequest] = []
    finish = ""
    for message in messages:
        texts.append(payloads.message_text(message))
        calls.extend(payloads.message_tool_calls(message, max_text))
        if type(message) is dict or isinstance(message, Mapping):
            finish = finish or values.name(message.get(MESSAGE_FINISH_REASON))
    return "\n".join(text for text in texts if text), calls, finish


def _finish_reason(value: object) -> str:
    """The first finish reason (one per choice; the first choice is the one acted on)."""
    if value is None:
        return ""
    parsed = values.parse_json(value)
    if isinstance(parsed, list):
        for item in parsed:
            reason = values.name(item)
            if reason:
                return reason
        return ""
    if isinstance(value, list):
        return ""
    return values.name(value)


# --- message events sent as log records -------------------------------------------------------

# The per-message events an instrumentation sends as log records on the older conventions
# (opentelemetry-instrumentation-openai-v2 by default): each carries its chat span's trace and
# span ids, and its body holds what the span event's attributes would.
MESSAGE_EVENTS = frozenset({*_INPUT_MESSAGE_EVENTS, EVENT_CHOICE})


def message_event(record: Any) -> tuple[str, Mapping[str, Any]] | None:
    """(event name, body fields) of a log record that is a GenAI message event naming its
    span, or None."""
    event = values.name(getattr(record, "event_name", ""))
    if not event:
        event = values.name(values.mapping(getattr(record, "attributes", None)).get("event.name"))
    if event not in MESSAGE_EVENTS:
        return None
    if not values.name(getattr(record, "trace_id", "")) or not values.name(
        getattr(record, "span_id", "")
    ):
        return None
    body = values.parse_json(getattr(record, "body", None))
    if type(body) is dict or isinstance(body, Mapping):
        return event, body
    if isinstance(body, str):
        return event, {BODY_CONTENT: body}
    return event, {}


def apply_message_event(
    step: Step, event: str, body: Mapping[str, Any], max_text: int = MAX_TEXT
) -> None:
    """What one message event says, added to its span's step: input events count as input
    messages (the last user message is the input text); a choice is the output."""
    role = _INPUT_MESSAGE_EVENTS.get(event)
    if role is not None:
        step.input_messages = (step.input_messages or 0) + 1
        read = _event_message(role, body, max_text)
        if role == ROLE_USER:
            text = _event_body_text(body)
            if text:
                step.input_text = values.truncate(text, min(max_text, values.INPUT_TEXT_MAX))
        step.input_history = history.bounded([*step.input_history, read])
        return
    text, calls, finish = _outputs({}, [(event, body)], max_text)
    if text:
        joined = f"{step.output_text}\n{text}" if step.output_text else text
        step.output_text = values.truncate(joined, max_text)
    if calls:
        step.tool_calls = (*step.tool_calls, *calls)
    step.finish_reason = step.finish_reason or finish
