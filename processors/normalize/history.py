"""A model call's input messages, read into `InputMessage`s in every dialect's shape.

Instrumentations send the whole conversation so far with each model call (GenAI
`gen_ai.input.messages` or per-message events, OpenInference `llm.input_messages.<i>.*`,
OpenLLMetry `gen_ai.prompt.<i>.*`); the user's turns, the instructions and, without tool spans,
the tools' results exist only there. This module reads them into one shape; the run windows
(`processors.conversation`) find what is new in each call.

Bounds: the opening messages (the leading system/developer ones and the first user message, at
most `HEAD_MAX`) and the last `TAIL_MAX` are kept, so a long conversation costs at most
`HEAD_MAX + TAIL_MAX` messages per call; texts are cut as the step's other fields are (a user's
turn like the input text, a tool result like a tool span's result, an assistant message to what
recognising it needs). Like `values`, nothing here raises on any input.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from mast_otel.processors.model import InputMessage, ToolCallRequest
from mast_otel.processors.normalize import payloads, values

HEAD_MAX = 8
TAIL_MAX = 64
# An assistant message is kept only to recognise it in a later call's input.
ASSISTANT_TEXT_MAX = 2048

SYSTEM = "system"
USER = "user"
ASSISTANT = "assistant"
TOOL = "tool"
# Role spellings across dialects and providers, by what they are.
ROLES = {
    "system": SYSTEM,
    "developer": SYSTEM,
    "user": USER,
    "human": USER,
    "assistant": ASSISTANT,
    "ai": ASSISTANT,
    "model": ASSISTANT,
    "tool": TOOL,
    "function": TOOL,
    "ipython": TOOL,
}

_RESPONSE_PART_TYPES = frozenset({"tool_call_response", "tool_result", "function_call_output"})


def role_of(value: object) -> str:
    """The role a message plays (system, user, assistant, tool), or "" for an unknown one."""
    return ROLES.get(values.name(value).lower(), "")


def message(
    role: str,
    text: str,
    max_text: int,
    call_id: str = "",
    calls: Iterable[ToolCallRequest] = (),
    name: str = "",
) -> InputMessage:
    """One input message, its text cut to what its role needs."""
    if role == USER:
        limit = min(max_text, values.INPUT_TEXT_MAX)
    elif role == ASSISTANT:
        limit = ASSISTANT_TEXT_MAX
    else:
        limit = max_text
    return InputMessage(role, values.truncate(text, limit), call_id, tuple(calls), name)


def bounded(messages: list[InputMessage]) -> tuple[InputMessage, ...]:
    """The opening messages and the most recent ones (all of them when few)."""
    if len(messages) <= HEAD_MAX + TAIL_MAX:
        return tuple(messages)
    return (*_head(messages[:HEAD_MAX]), *messages[-TAIL_MAX:])


def _head(messages: list[InputMessage]) -> list[InputMessage]:
    """The leading system messages and the first message after them."""
    head: list[InputMessage] = []
    for item in messages:
        head.append(item)
        if item.role != SYSTEM:
            break
    return head


def from_messages(messages: list[Any], max_text: int) -> tuple[InputMessage, ...]:
    """GenAI or OpenAI-shaped messages (`role` with `parts` or `content`); of a long list only
    the opening and the most recent ones are read."""
    if len(messages) <= HEAD_MAX + TAIL_MAX:
        return tuple(_read(messages, max_text))
    head = _head(_read(messages[:HEAD_MAX], max_text))
    return (*head, *_read(messages[-TAIL_MAX:], max_text))


def _read(messages: list[Any], max_text: int) -> list[InputMessage]:
    out: list[InputMessage] = []
    for raw in messages:
        out.extend(from_message(raw, max_text))
    return out


def from_message(raw: object, max_text: int) -> list[InputMessage]:
    """One GenAI or OpenAI-shaped message as input messages: usually one; a message of any role
    that carries tool results as parts (pydantic-ai sends them in a `user` message) gives a
    `tool` message per result, then one for its text, if any. [] for what is not a message."""
    if isinstance(raw, str):
        return [message(USER, raw, max_text)]
    if type(raw) is not dict and not isinstance(raw, Mapping):
        return []
    role = role_of(raw.get("role"))
    if not role:
        return []
    if role == TOOL:
        text, call_id = _tool_response(raw)
        return [message(TOOL, text, max_text, call_id)]
    parts = raw.get("parts")
    if isinstance(parts, list) and any(_is_response(part) for part in parts):
        out = [
            message(TOOL, _response_text(part), max_text, values.name(part.get("id")))
            for part in parts
            if _is_response(part)
        ]
        text = payloads.content_text([part for part in parts if not _is_response(part)])
        if text:
            out.append(message(role, text, max_text))
        return out
    calls = payloads.message_tool_calls(raw, max_text) if role == ASSISTANT else []
    name = values.name(raw.get("name"))
    return [message(role, payloads.message_text(raw), max_text, calls=calls, name=name)]


def _is_response(part: object) -> bool:
    if type(part) is not dict and not isinstance(part, Mapping):
        return False
    return part.get("type") in _RESPONSE_PART_TYPES


def _response_text(part: Mapping[str, Any]) -> str:
    return values.render(values.first(part, "response", "result", "output"))


def _tool_response(raw: Mapping[str, Any]) -> tuple[str, str]:
    """(result text, the call it answers) of a tool message: GenAI `tool_call_response` parts
    or an OpenAI-style `content` with `tool_call_id`."""
    call_id = values.name(values.first(raw, "tool_call_id", "id", "call_id"))
    parts = raw.get("parts")
    if isinstance(parts, list):
        texts: list[str] = []
        for part in parts:
            if type(part) is not dict and not isinstance(part, Mapping):
                continue
            if _is_response(part):
                call_id = call_id or values.name(part.get("id"))
                texts.append(_response_text(part))
            else:
                texts.append(payloads.content_text(part))
        return "\n".join(text for text in texts if text), call_id
    content = raw.get("content")
    if isinstance(content, str):
        return content, call_id
    return payloads.content_text(content) or values.render(content), call_id


def from_indexed(
    entries: Iterable[Mapping[str, Any]],
    max_text: int,
    *,
    role_key: str,
    text_of: Any,
    call_id_key: str,
    calls_of: Any,
) -> tuple[InputMessage, ...]:
    """Indexed message attributes (OpenInference, OpenLLMetry), each entry one message's
    flattened fields; `text_of(entry)` and `calls_of(entry, max_text)` read the dialect's own
    spellings."""
    out: list[InputMessage] = []
    for entry in entries:
        role = role_of(entry.get(role_key))
        if not role:
            continue
        calls = calls_of(entry, max_text) if role == ASSISTANT else []
        call_id = values.name(entry.get(call_id_key)) if role == TOOL else ""
        out.append(message(role, text_of(entry), max_text, call_id, calls))
    return bounded(out)
