"""OpenLLMetry (Traceloop) spans read into a `Step`.

OpenLLMetry's LLM spans carry GenAI names (`gen_ai.system`, `gen_ai.request.model`,
`gen_ai.usage.prompt_tokens`), which `genai.build` reads, plus its own indexed message
attributes (`gen_ai.prompt.<i>.content`, `gen_ai.completion.<i>.tool_calls.<j>.name`) and
`llm.request.type`; its decorator spans (`@workflow`, `@task`, `@agent`, `@tool`) carry
`traceloop.*`. This module owns those OpenLLMetry-only names.

Names verified against traceloop/openllmetry:
packages/opentelemetry-semantic-conventions-ai/opentelemetry/semconv_ai/__init__.py and the
`_set_prompts` / `_set_completions` writers of its OpenAI, Groq and Anthropic instrumentations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mast_otel.processors.model import Step, StepKind, ToolCallRequest
from mast_otel.processors.normalize import genai, history, payloads, tool_definitions, values
from mast_otel.processors.normalize.values import MAX_TEXT
from mast_otel.processors.records import SpanRecord

DIALECT = "openllmetry"
TRACELOOP_PREFIX = "traceloop."

SPAN_KIND = "traceloop.span.kind"
ENTITY_NAME = "traceloop.entity.name"
ENTITY_INPUT = "traceloop.entity.input"
ENTITY_OUTPUT = "traceloop.entity.output"
WORKFLOW_NAME = "traceloop.workflow.name"
ASSOCIATION_PREFIX = "traceloop.association.properties."
REQUEST_TYPE = "llm.request.type"
# The functions offered to the model: `llm.request.functions.<i>.name` / `.parameters`.
REQUEST_FUNCTIONS = "llm.request.functions"
RESPONSE_FINISH_REASON = "llm.response.finish_reason"

# Indexed message attributes: `<prefix>.<i>.<field>`, tool calls `...tool_calls.<j>.<field>`.
PROMPT_PREFIX = "gen_ai.prompt"
COMPLETION_PREFIX = "gen_ai.completion"
FIELD_ROLE = "role"
FIELD_CONTENT = "content"
FIELD_FINISH_REASON = "finish_reason"
FIELD_TOOL_CALLS = "tool_calls"
FIELD_TOOL_CALL_ID = "tool_call_id"
FIELD_FUNCTION_CALL = "function_call"
CALL_NAME = "name"
CALL_ARGUMENTS = "arguments"
CALL_ID = "id"

ROLE_USER = "user"
# Association properties an application commonly uses to name its conversation.
CONVERSATION_PROPERTIES = ("session_id", "conversation_id", "thread_id", "chat_id")

SPAN_KINDS = {
    "workflow": StepKind.OTHER,
    "task": StepKind.OTHER,
    "agent": StepKind.AGENT,
    "tool": StepKind.TOOL,
    "unknown": StepKind.OTHER,
}
LLM_REQUEST_TYPES = frozenset({"chat", "completion"})


def recognises(record: SpanRecord) -> bool:
    """A span with `traceloop.*`, `llm.request.type`, or indexed `gen_ai.prompt.<i>.*`."""
    attrs = values.mapping(getattr(record, "attributes", None))
    if REQUEST_TYPE in attrs:
        return True
    # One pass over the names, no grouping: every GenAI span is asked this first.
    prompt, completion = PROMPT_PREFIX + ".", COMPLETION_PREFIX + "."
    markers = (TRACELOOP_PREFIX, prompt, completion)
    for key in attrs:
        if not isinstance(key, str) or not key.startswith(markers):
            continue
        if key.startswith(TRACELOOP_PREFIX):
            return True
        for start in (prompt, completion):
            if key.startswith(start):
                index, _, rest = key[len(start) :].partition(".")
                if rest and index.isdigit():
                    return True
    return False


def to_step(record: SpanRecord, max_text: int = MAX_TEXT) -> Step:
    """The step for an OpenLLMetry span: GenAI fields first, then OpenLLMetry's own."""
    attrs = values.mapping(getattr(record, "attributes", None))
    step = genai.build(record, max_text=max_text, dialect=DIALECT)
    input_max = min(max_text, values.INPUT_TEXT_MAX)

    span_kind = values.name(attrs.get(SPAN_KIND)).lower()
    request_type = values.name(attrs.get(REQUEST_TYPE)).lower()
    prompts = values.indexed(attrs, PROMPT_PREFIX)
    completions = values.indexed(attrs, COMPLETION_PREFIX)
    if span_kind:
        step.kind = SPAN_KINDS.get(span_kind, StepKind.OTHER)
    elif request_type:
        step.kind = StepKind.LLM if request_type in LLM_REQUEST_TYPES else StepKind.OTHER
    elif prompts or completions:
        step.kind = StepKind.LLM
    step.operation = span_kind or request_type or step.operation

    if not step.conversation_id:
        step.conversation_id = values.first_name(
            attrs, *(ASSOCIATION_PREFIX + key for key in CONVERSATION_PROPERTIES)
        )

    entity = values.name(attrs.get(ENTITY_NAME))
    # A decorated function's call as `{"args": [...], "kwargs": {...}}`, its return value as
    # JSON (a string return value quoted).
    entity_input = payloads.call_arguments(values.render(attrs.get(ENTITY_INPUT)))
    entity_output = payloads.unquote_json_string(values.render(attrs.get(ENTITY_OUTPUT)))
    if step.kind is StepKind.TOOL:
        step.tool_name = step.tool_name or entity
        step.tool_arguments = step.tool_arguments or values.truncate(entity_input, max_text)
        step.tool_result = step.tool_result or values.truncate(entity_output, max_text)
        return step
    if step.kind is StepKind.AGENT:
        step.agent = step.agent or entity

    functions = values.indexed(attrs, REQUEST_FUNCTIONS)
    if functions and not step.tools_offered:
        step.tools_offered = tool_definitions.from_indexed(functions.values())
    if prompts:
        step.input_messages = len(prompts)
        step.input_text = values.truncate(_last_user_text(prompts), input_max)
        step.input_history = history.from_indexed(
            prompts.values(),
            max_text,
            role_key=FIELD_ROLE,
            text_of=_prompt_text,
            call_id_key=FIELD_TOOL_CALL_ID,
            calls_of=_calls,
        )
    if completions:
        texts = [_content(completion.get(FIELD_CONTENT)) for completion in completions.values()]
        step.output_text = values.truncate("\n".join(t for t in texts if t), max_text)
        calls = [c for completion in completions.values() for c in _calls(completion, max_text)]
        step.tool_calls = tuple(calls)
        first_completion = next(iter(completions.values()))
        step.finish_reason = step.finish_reason or values.first_name(attrs, RESPONSE_FINISH_REASON)
        step.finish_reason = step.finish_reason or values.name(
            first_completion.get(FIELD_FINISH_REASON)
        )

    if step.kind is not StepKind.LLM:
        step.input_text = step.input_text or values.truncate(entity_input, input_max)
        step.output_text = step.output_text or values.truncate(entity_output, max_text)
    return step


def _content(value: object) -> str:
    """Message content: plain text, or a JSON list of parts (multimodal prompts)."""
    parsed = values.parse_json(value) if isinstance(value, str) else None
    text = payloads.content_text(parsed) if parsed is not None else ""
    return text or payloads.content_text(value)


def _prompt_text(prompt: Mapping[str, Any]) -> str:
    return _content(prompt.get(FIELD_CONTENT))


def _last_user_text(prompts: dict[int, dict[str, Any]]) -> str:
    for prompt in reversed(list(prompts.values())):
        if prompt.get(FIELD_ROLE) == ROLE_USER:
            text = _content(prompt.get(FIELD_CONTENT))
            if text:
                return text
    return ""


def _calls(completion: Mapping[str, Any], max_text: int) -> list[ToolCallRequest]:
    found = list(values.indexed(completion, FIELD_TOOL_CALLS).values())
    start = FIELD_FUNCTION_CALL + "."
    legacy = {
        key[len(start) :]: value
        for key, value in completion.items()
        if isinstance(key, str) and key.startswith(start)
    }
    if legacy:  # the older single `function_call.name` / `.arguments` form
        found.append(legacy)
    calls: list[ToolCallRequest] = []
    for call in found:
        tool = values.name(call.get(CALL_NAME))
        if not tool:
            continue
        arguments = values.truncate(values.render(call.get(CALL_ARGUMENTS)), max_text)
        calls.append(ToolCallRequest(tool, arguments, values.name(call.get(CALL_ID))))
    return calls
