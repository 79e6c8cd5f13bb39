"""OpenInference spans (Arize Phoenix instrumentations) read into a `Step`.

OpenInference marks every span with `openinference.span.kind` and flattens lists into indexed
attribute names (`llm.input_messages.0.message.role`); this module gathers them back. CrewAI's
crew and task spans carry CrewAI's objects as JSON: `crewai` reads them.

Names verified against Arize-ai/openinference: spec/semantic_conventions.md and
python/openinference-semantic-conventions/src/openinference/semconv/trace/__init__.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mast_otel.processors.model import Step, StepKind, ToolCallRequest
from mast_otel.processors.normalize import (
    crewai,
    history,
    payloads,
    span_fields,
    tool_definitions,
    values,
)
from mast_otel.processors.normalize.values import MAX_TEXT
from mast_otel.processors.records import SpanRecord

DIALECT = "openinference"

SPAN_KIND = "openinference.span.kind"
INPUT_VALUE = "input.value"
OUTPUT_VALUE = "output.value"
SESSION_ID = "session.id"
AGENT_NAME = "agent.name"
GRAPH_NODE_ID = "graph.node.id"
GRAPH_NODE_NAME = "graph.node.name"

TOOL_NAME = "tool.name"
# Per the spec, `tool.parameters` is the tool's parameter *definition*; it is only a fallback
# for the arguments when `input.value` is missing (some instrumentations put the call there).
TOOL_PARAMETERS = "tool.parameters"
TOOL_ID = "tool.id"
TOOL_CALL_ID = "tool_call.id"

LLM_MODEL_NAME = "llm.model_name"
LLM_RESPONSE_MODEL_NAME = "llm.response.model_name"
LLM_REQUEST_MODEL_NAME = "llm.request.model_name"
EMBEDDING_MODEL_NAME = "embedding.model_name"
LLM_PROVIDER = "llm.provider"
LLM_TOKEN_COUNT_PROMPT = "llm.token_count.prompt"
LLM_TOKEN_COUNT_COMPLETION = "llm.token_count.completion"
LLM_FINISH_REASON = "llm.finish_reason"
LLM_INPUT_MESSAGES = "llm.input_messages"
LLM_OUTPUT_MESSAGES = "llm.output_messages"
LLM_PROMPTS = "llm.prompts"
LLM_CHOICES = "llm.choices"
# The tools offered to the model: `llm.tools.<i>.tool.json_schema`, one JSON document each.
LLM_TOOLS = "llm.tools"
TOOL_JSON_SCHEMA = "tool.json_schema"

# Keys inside one flattened message / tool call / completions-API entry.
MESSAGE_ROLE = "message.role"
MESSAGE_CONTENT = "message.content"
MESSAGE_CONTENTS = "message.contents"
MESSAGE_CONTENT_TYPE = "message_content.type"
MESSAGE_CONTENT_TEXT = "message_content.text"
MESSAGE_TOOL_CALLS = "message.tool_calls"
MESSAGE_TOOL_CALL_ID = "message.tool_call_id"
MESSAGE_FUNCTION_CALL_NAME = "message.function_call_name"
MESSAGE_FUNCTION_CALL_ARGUMENTS = "message.function_call_arguments_json"
TOOL_CALL_FUNCTION_NAME = "tool_call.function.name"
TOOL_CALL_FUNCTION_ARGUMENTS = "tool_call.function.arguments"
PROMPT_TEXT = "prompt.text"
COMPLETION_TEXT = "completion.text"

ROLE_USER = "user"
# smolagents' tool for the run's answer (`FinalAnswerTool`), called with `{"answer": ...}`.
FINAL_ANSWER_TOOL = "final_answer"
_HANDOFF_SPAN = re.compile(r"^handoff\s+to\s+\S", re.IGNORECASE)
_TEXT_CONTENT_TYPES = frozenset({"text", "reasoning"})

KINDS = {
    "LLM": StepKind.LLM,
    "TOOL": StepKind.TOOL,
    "AGENT": StepKind.AGENT,
    "EVALUATOR": StepKind.EVALUATION,
    "CHAIN": StepKind.OTHER,
    "RETRIEVER": StepKind.OTHER,
    "EMBEDDING": StepKind.OTHER,
    "RERANKER": StepKind.OTHER,
    "GUARDRAIL": StepKind.OTHER,
    "PROMPT": StepKind.OTHER,
    "UNKNOWN": StepKind.OTHER,
}


def recognises(record: SpanRecord) -> bool:
    """A span carrying `openinference.span.kind` (required on every OpenInference span)."""
    attrs = values.mapping(getattr(record, "attributes", None))
    return SPAN_KIND in attrs


def to_step(record: SpanRecord, max_text: int = MAX_TEXT) -> Step:
    """The step for an OpenInference span; fields the span does not carry stay empty."""
    attrs = values.mapping(getattr(record, "attributes", None))
    span_kind = values.name(attrs.get(SPAN_KIND)).upper()
    kind = KINDS.get(span_kind, StepKind.OTHER)
    input_max = min(max_text, values.INPUT_TEXT_MAX)

    step = span_fields.span_step(record, kind, DIALECT)
    step.operation = span_kind.lower()
    step.model = values.first_name(
        attrs, LLM_MODEL_NAME, LLM_RESPONSE_MODEL_NAME, LLM_REQUEST_MODEL_NAME, EMBEDDING_MODEL_NAME
    )
    step.conversation_id = values.name(attrs.get(SESSION_ID))
    step.agent = values.name(attrs.get(AGENT_NAME))
    if not step.agent and kind is StepKind.AGENT:
        step.agent = values.first_name(attrs, GRAPH_NODE_NAME, GRAPH_NODE_ID)
    step.input_tokens = values.to_count(attrs.get(LLM_TOKEN_COUNT_PROMPT))
    step.output_tokens = values.to_count(attrs.get(LLM_TOKEN_COUNT_COMPLETION))
    step.finish_reason = values.name(attrs.get(LLM_FINISH_REASON))

    input_value = values.to_str(attrs.get(INPUT_VALUE))
    output_value = values.to_str(attrs.get(OUTPUT_VALUE))

    if kind is StepKind.TOOL and not attrs.get(TOOL_NAME) and _HANDOFF_SPAN.match(step.name):
        # The Agents SDK's hand-off: a TOOL span `handoff to <agent>` (no tool name) whose
        # input is the sender and output the receiver; `mark_handoff` makes it a HANDOFF.
        step.agent = values.name(input_value)
        step.target_agent = values.name(output_value)
        return step

    if kind is StepKind.TOOL and values.name(attrs.get(TOOL_NAME)) == FINAL_ANSWER_TOOL:
        # smolagents ends a run by "calling" its final_answer tool: that is the answer.
        step.kind = StepKind.OTHER
        step.operation = FINAL_ANSWER_TOOL
        step.output_text = values.truncate(output_value, max_text)
        return step

    if kind is StepKind.TOOL:
        step.tool_name = values.name(attrs.get(TOOL_NAME))
        step.tool_call_id = values.first_name(attrs, TOOL_CALL_ID, TOOL_ID)
        arguments = input_value or values.render(attrs.get(TOOL_PARAMETERS))
        # smolagents: `{"args": [], "kwargs": {...}}`; LangGraph: the whole ToolMessage as
        # the output (its per-call id must not make equal results differ).
        step.tool_arguments = values.truncate(payloads.call_arguments(arguments), max_text)
        result, call_id = payloads.tool_message_content(output_value)
        step.tool_call_id = step.tool_call_id or call_id
        step.tool_result = values.truncate(result, max_text)
        if crewai.is_tool(attrs):
            crewai.read_tool(step)
        return step

    if kind is StepKind.LLM:
        offered = values.indexed(attrs, LLM_TOOLS)
        if offered:
            step.tools_offered = tool_definitions.from_indexed(offered.values(), TOOL_JSON_SCHEMA)
        inputs = _messages(attrs, LLM_INPUT_MESSAGES)
        prompts = _messages(attrs, LLM_PROMPTS)
        if inputs:
            step.input_messages = len(inputs)
            last_user = _last_user_text(inputs)
            step.input_history = history.from_indexed(
                inputs.values(),
                max_text,
                role_key=MESSAGE_ROLE,
                text_of=_message_text,
                call_id_key=MESSAGE_TOOL_CALL_ID,
                calls_of=_tool_calls,
            )
        elif prompts:
            step.input_messages = len(prompts)
            last_user = values.to_str(list(prompts.values())[-1].get(PROMPT_TEXT))
        else:
            last_user = input_value
        step.input_text = values.truncate(last_user, input_max)

        outputs = _messages(attrs, LLM_OUTPUT_MESSAGES)
        choices = _messages(attrs, LLM_CHOICES)
        if outputs:
            texts = [_message_text(message) for message in outputs.values()]
            calls = [call for m in outputs.values() for call in _tool_calls(m, max_text)]
            output = "\n".join(text for text in texts if text)
            answers = [c for c in calls if c.name == FINAL_ANSWER_TOOL]
            if answers and len(answers) == len(calls):
                # smolagents' final answer: the model answering, not asking for a tool.
                output = output or _final_answer_text(answers[0].arguments)
                calls = []
                step.finish_reason = "stop"
            step.tool_calls = tuple(calls)
        elif choices:
            texts = [values.to_str(choice.get(COMPLETION_TEXT)) for choice in choices.values()]
            output = "\n".join(text for text in texts if text)
        else:
            output = output_value
        step.output_text = values.truncate(output, max_text)
        return step

    # Agents, chains and the rest: input and output are the task and the answer.
    if crewai.recognises(attrs):
        input_value, output_value = crewai.texts(attrs, input_value, output_value)
    step.input_text = values.truncate(input_value, input_max)
    step.output_text = values.truncate(output_value, max_text)
    return step


def _messages(attrs: Mapping[str, Any], prefix: str) -> dict[int, dict[str, Any]]:
    """Indexed entries under `prefix`, flattened or (rarely) sent as one structured list."""
    found = values.indexed(attrs, prefix)
    if found:
        return found
    listed = attrs.get(prefix)
    if isinstance(listed, list):
        return {i: values.flatten(item) for i, item in enumerate(listed)}
    return {}


def _message_text(message: Mapping[str, Any]) -> str:
    content = message.get(MESSAGE_CONTENT)
    if values.present(content):
        return payloads.content_text(content)
    texts: list[str] = []
    for part in _messages(message, MESSAGE_CONTENTS).values():
        part_type = part.get(MESSAGE_CONTENT_TYPE)
        if part_type is None or part_type in _TEXT_CONTENT_TYPES:
            texts.append(values.to_str(part.get(MESSAGE_CONTENT_TEXT)))
    return "\n".join(text for text in texts if text)


def _last_user_text(messages: dict[int, dict[str, Any]]) -> str:
    for message in reversed(list(messages.values())):
        if message.get(MESSAGE_ROLE) == ROLE_USER:
            text = _message_text(message)
            if text:
                return text
    return ""


def _tool_calls(message: Mapping[str, Any], max_text: int) -> list[ToolCallRequest]:
    calls: list[ToolCallRequest] = []
    for call in _messages(message, MESSAGE_TOOL_CALLS).values():
        tool = values.name(call.get(TOOL_CALL_FUNCTION_NAME))
        if tool:
            arguments = values.render(call.get(TOOL_CALL_FUNCTION_ARGUMENTS))
            calls.append(
                ToolCallRequest(
                    name=tool,
                    arguments=values.truncate(arguments, max_text),
                    call_id=values.name(call.get(TOOL_CALL_ID)),
                )
            )
    legacy = values.name(message.get(MESSAGE_FUNCTION_CALL_NAME))
    if legacy and not calls:
        arguments = values.render(message.get(MESSAGE_FUNCTION_CALL_ARGUMENTS))
        calls.append(ToolCallRequest(name=legacy, arguments=values.truncate(arguments, max_text)))
    return calls


def _final_answer_text(arguments: str) -> str:
    parsed = values.parse_json(payloads.call_arguments(arguments))
    if isinstance(parsed, dict) and "answer" in parsed:
        return payloads.content_text(parsed["answer"]) or values.render(parsed["answer"])
    return arguments
