"""OpenTelemetry GenAI semantic conventions (`gen_ai.*`) read into a `Step`.

Covers the current names (v1.37+: `gen_ai.provider.name`, `gen_ai.input.messages` /
`gen_ai.output.messages` with typed parts, `gen_ai.tool.call.*`) and the older ones that
instrumentations on v1.36 and before still emit (`gen_ai.system`, `gen_ai.usage.prompt_tokens`,
`gen_ai.prompt` / `gen_ai.completion`, and the per-message span events). Both spellings of a
field land in the same `Step` field, so detectors never see which generation a sender used.

Names verified against open-telemetry/semantic-conventions: model/gen-ai/registry.yaml,
model/gen-ai/deprecated/registry-deprecated.yaml, model/gen-ai/deprecated/events-deprecated.yaml
and docs/gen-ai/gen-ai-{input,output}-messages.json.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mast_otel.processors.conventions import RUN_OUTCOME, RUN_SCORE
from mast_otel.processors.model import Step, StepKind, ToolCallRequest
from mast_otel.processors.normalize import payloads, span_fields, values
from mast_otel.processors.normalize.values import MAX_TEXT
from mast_otel.processors.records import SpanRecord

DIALECT = "genai"
PREFIX = "gen_ai."

# Span attributes, current names.
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"
AGENT_NAME = "gen_ai.agent.name"
AGENT_ID = "gen_ai.agent.id"
CONVERSATION_ID = "gen_ai.conversation.id"
EVALUATION_NAME = "gen_ai.evaluation.name"
EVALUATION_SCORE_VALUE = "gen_ai.evaluation.score.value"
EVALUATION_SCORE_LABEL = "gen_ai.evaluation.score.label"

# Span attributes, names of v1.36 and before (deprecated, still emitted).
SYSTEM = "gen_ai.system"
PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"
COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"
PROMPT = "gen_ai.prompt"
COMPLETION = "gen_ai.completion"

# Span events. Per-message events (≤ v1.36) put their body fields on the event's attributes;
# some SDKs (Azure AI, Semantic Kernel) put the whole body as JSON under `gen_ai.event.content`.
EVENT_SYSTEM_MESSAGE = "gen_ai.system.message"
EVENT_USER_MESSAGE = "gen_ai.user.message"
EVENT_ASSISTANT_MESSAGE = "gen_ai.assistant.message"
EVENT_TOOL_MESSAGE = "gen_ai.tool.message"
EVENT_CHOICE = "gen_ai.choice"
EVENT_CONTENT_PROMPT = "gen_ai.content.prompt"
EVENT_CONTENT_COMPLETION = "gen_ai.content.completion"
EVENT_OPERATION_DETAILS = "gen_ai.client.inference.operation.details"
EVENT_EVALUATION_RESULT = "gen_ai.evaluation.result"
EVENT_BODY = "gen_ai.event.content"
BODY_CONTENT = "content"
BODY_MESSAGE = "message"
BODY_TOOL_CALLS = "tool_calls"
BODY_FINISH_REASON = "finish_reason"

# Message JSON (gen_ai.input.messages / gen_ai.output.messages).
MESSAGE_ROLE = "role"
MESSAGE_FINISH_REASON = "finish_reason"
ROLE_USER = "user"

LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
TOOL_OPERATIONS = frozenset({"execute_tool"})
AGENT_OPERATIONS = frozenset({"invoke_agent", "create_agent"})

_INPUT_MESSAGE_EVENTS = {
    EVENT_SYSTEM_MESSAGE: "system",
    EVENT_USER_MESSAGE: ROLE_USER,
    EVENT_ASSISTANT_MESSAGE: "assistant",
    EVENT_TOOL_MESSAGE: "tool",
}

# Evaluation labels that plainly say whether the run succeeded (mast.run.outcome values).
_SUCCESS_LABELS = frozenset(
    {"pass", "passed", "success", "succeeded", "successful", "correct", "resolved"}
)
_FAILURE_LABELS = frozenset({"fail", "failed", "failure", "incorrect", "unresolved"})


def recognises(record: SpanRecord) -> bool:
    """A span with any `gen_ai.*` attribute or event."""
    attrs = values.mapping(getattr(record, "attributes", None))
    if values.has_prefix(attrs, PREFIX):
        return True
    return any(event.startswith(PREFIX) for event, _ in span_fields.events_of(record))


def to_step(record: SpanRecord, max_text: int = MAX_TEXT) -> Step:
    """The step for a GenAI span; fields the span does not carry stay empty."""
    return build(record, max_text=max_text, dialect=DIALECT)


def build(record: SpanRecord, *, max_text: int = MAX_TEXT, dialect: str = DIALECT) -> Step:
    """Read every `gen_ai.*` field; OpenLLMetry reuses this for the GenAI names it emits."""
    attrs = values.mapping(getattr(record, "attributes", None))
    events = span_fields.events_of(record)
    operation = values.name(attrs.get(OPERATION)).lower()

    step = span_fields.span_step(record, _kind(operation, attrs, events), dialect)
    step.operation = operation
    step.model = values.first_name(attrs, RESPONSE_MODEL, REQUEST_MODEL)
    step.agent = values.first_name(attrs, AGENT_NAME, AGENT_ID)
    step.conversation_id = values.name(attrs.get(CONVERSATION_ID))
    step.tool_name = values.name(attrs.get(TOOL_NAME))
    step.tool_call_id = values.name(attrs.get(TOOL_CALL_ID))
    arguments = attrs.get(TOOL_CALL_ARGUMENTS)
    if arguments is not None:  # absent stays "", as rendering None gives
        step.tool_arguments = values.truncate(values.render(arguments), max_text)
    result = attrs.get(TOOL_CALL_RESULT)
    if result is not None:
        step.tool_result = values.truncate(values.render(result), max_text)
    step.input_tokens = values.first_count(attrs, INPUT_TOKENS, PROMPT_TOKENS)
    step.output_tokens = values.first_count(attrs, OUTPUT_TOKENS, COMPLETION_TOKENS)

    if step.kind is StepKind.TOOL and events and arguments is None and result is None:
        _tool_from_events(step, events, max_text)

    count, last_user = _inputs(attrs, events)
    step.input_messages = count
    step.input_text = values.truncate(last_user, min(max_text, values.INPUT_TEXT_MAX))

    text, calls, finish = _outputs(attrs, events, max_text)
    step.output_text = values.truncate(text, max_text)
    step.tool_calls = tuple(calls)
    step.finish_reason = _finish_reason(attrs.get(FINISH_REASONS)) or finish

    _apply_evaluations(step.run_attributes, events)
    return step


def _kind(operation: str, attrs: Mapping[str, Any], events: list[tuple[str, Any]]) -> StepKind:
    """Kind from the operation name; without one, from what the span carries.

    Instrumentations before v1.27 sent no operation name, so a missing one is inferred (tool
    fields → TOOL, a model or token usage → LLM, only an evaluation → EVALUATION, only a user
    message event → HUMAN). An operation name we do not know stays OTHER.
    """
    if operation in LLM_OPERATIONS:
        return StepKind.LLM
    if operation in TOOL_OPERATIONS:
        return StepKind.TOOL
    if operation in AGENT_OPERATIONS:
        return StepKind.AGENT
    if operation:
        return StepKind.OTHER
    if values.first(attrs, TOOL_NAME, TOOL_CALL_ID) is not None:
        return StepKind.TOOL
    llm_markers = (REQUEST_MODEL, RESPONSE_MODEL, INPUT_TOKENS, PROMPT_TOKENS, INPUT_MESSAGES)
    if values.first(attrs, *llm_markers) is not None:
        return StepKind.LLM
    if any(name == EVENT_EVALUATION_RESULT for name, _ in events):
        return StepKind.EVALUATION
    if any(name == EVENT_USER_MESSAGE for name, _ in events):
        return StepKind.HUMAN  # a span that only carries a user's message: the user's turn
    return StepKind.OTHER


# --- input ------------------------------------------------------------------------------------


def _inputs(attrs: Mapping[str, Any], events: list[tuple[str, Any]]) -> tuple[int | None, str]:
    """(number of input messages, last user message text), from the first source present.

    Order: `gen_ai.input.messages` on the span, then on an operation-details event, then the
    per-message events, then the old `gen_ai.prompt` attribute or `gen_ai.content.prompt` event.
    """
    if not events and type(attrs) is dict and INPUT_MESSAGES not in attrs and PROMPT not in attrs:
        return None, ""  # no source present (tool and agent spans): what the reads below give
    messages = _message_list(attrs.get(INPUT_MESSAGES))
    if messages is None:
        messages = _message_list(_event_value(events, EVENT_OPERATION_DETAILS, INPUT_MESSAGES))
    if messages is not None:
        return len(messages), _last_user_text(messages)

    from_events = [
        (role, _event_body_text(event_attrs))
        for event, event_attrs in events
        if (role := _INPUT_MESSAGE_EVENTS.get(event)) is not None
    ]
    if from_events:
        users = [text for role, text in from_events if role == ROLE_USER and text]
        return len(from_events), users[-1] if users else ""

    legacy = values.first(attrs, PROMPT)
    if legacy is None:
        legacy = _event_value(events, EVENT_CONTENT_PROMPT, PROMPT)
    messages = _message_list(legacy)
    if messages is not None:
        return len(messages), _last_user_text(messages)
    if isinstance(legacy, str):
        return None, legacy
    return None, ""


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


# --- evaluation -------------------------------------------------------------------------------


def _apply_evaluations(run: dict[str, Any], events: list[tuple[str, Any]]) -> None:
    """Outcome and score from `gen_ai.evaluation.result` events, into run attributes.

    A score in [0, 1] becomes `mast.run.score` and a label that plainly says pass or fail
    becomes `mast.run.outcome`, unless the span set those explicitly (explicit wins, then the
    first evaluation). Values that do not map (a 1-5 score, a label such as "relevant") are
    kept under their GenAI names so the outcome stage can still see them.
    """
    for event, event_attrs in events:
        if event != EVENT_EVALUATION_RESULT:
            continue
        score_raw = event_attrs.get(EVALUATION_SCORE_VALUE)
        label_raw = event_attrs.get(EVALUATION_SCORE_LABEL)
        score = values.to_float(score_raw)
        label = values.name(label_raw)
        unmapped = False
        if score is not None and 0.0 <= score <= 1.0:
            run.setdefault(RUN_SCORE, score)
        elif values.present(score_raw):
            run.setdefault(EVALUATION_SCORE_VALUE, score if score is not None else score_raw)
            unmapped = True
        outcome = _label_outcome(label)
        if outcome:
            run.setdefault(RUN_OUTCOME, outcome)
        elif label:
            run.setdefault(EVALUATION_SCORE_LABEL, label)
            unmapped = True
        evaluation = values.name(event_attrs.get(EVALUATION_NAME))
        if unmapped and evaluation:
            run.setdefault(EVALUATION_NAME, evaluation)


apply_evaluations = _apply_evaluations


def _label_outcome(label: str) -> str:
    word = label.strip().lower()
    if word in _SUCCESS_LABELS:
        return "success"
    if word in _FAILURE_LABELS:
        return "failure"
    return ""


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
    if event in _INPUT_MESSAGE_EVENTS:
        step.input_messages = (step.input_messages or 0) + 1
        if _INPUT_MESSAGE_EVENTS[event] == ROLE_USER:
            text = _event_body_text(body)
            if text:
                step.input_text = values.truncate(text, min(max_text, values.INPUT_TEXT_MAX))
        return
    text, calls, finish = _outputs({}, [(event, body)], max_text)
    if text:
        joined = f"{step.output_text}\n{text}" if step.output_text else text
        step.output_text = values.truncate(joined, max_text)
    if calls:
        step.tool_calls = (*step.tool_calls, *calls)
    step.finish_reason = step.finish_reason or finish
