"""Text and tool calls inside the JSON payloads that attributes carry.

Chat messages (OpenTelemetry GenAI parts, OpenAI and Anthropic shapes) and the wrappers
frameworks serialize around a call (`{"args": [...], "kwargs": {...}}`, a LangChain
ToolMessage, a return value quoted as a JSON string). Like `values`, every function returns a
usable value or an empty one and never raises.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from mast_otel.processors.model import ToolCallRequest
from mast_otel.processors.normalize.values import (
    DEPTH_MAX,
    first,
    name,
    parse_json,
    present,
    render,
    to_str,
    truncate,
)

# --- chat messages ---------------------------------------------------------------------------

# JSON shapes of chat messages (OpenTelemetry GenAI parts, OpenAI and Anthropic payloads).
_MSG_PARTS = "parts"
_MSG_CONTENT = "content"
_MSG_TEXT = "text"
_MSG_TYPE = "type"
_MSG_TOOL_CALLS = "tool_calls"
_MSG_FUNCTION = "function"
_MSG_NAME = "name"
_MSG_ARGUMENTS = "arguments"
_MSG_INPUT = "input"
_MSG_ID = "id"
_MSG_CALL_ID = "call_id"
_TEXT_PART_TYPES = frozenset(
    {"text", "reasoning", "thinking", "input_text", "output_text", "summary_text"}
)
_TOOL_CALL_PART_TYPES = frozenset({"tool_call", "function", "function_call", "tool_use"})


def content_text(value: object, depth: int = 0) -> str:
    """The text in a message content value: a string, a list of parts, or a part.

    Non-text parts (images, tool calls, blobs) are skipped; text and reasoning parts are joined
    with newlines in the order given.
    """
    if depth > DEPTH_MAX:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = [content_text(item, depth + 1) for item in value]
        return "\n".join(text for text in texts if text)
    if type(value) is dict or isinstance(value, Mapping):
        kind = value.get(_MSG_TYPE)
        if isinstance(kind, str) and kind not in _TEXT_PART_TYPES:
            return ""
        for key in (_MSG_CONTENT, _MSG_TEXT):
            inner = value.get(key)
            if present(inner):
                return content_text(inner, depth + 1)
        return ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return to_str(value)
    return ""


def message_text(message: object) -> str:
    """The text of one chat message: GenAI `parts`, or an OpenAI-style `content`."""
    if isinstance(message, str):
        return message
    if type(message) is not dict and not isinstance(message, Mapping):
        return ""
    parts = message.get(_MSG_PARTS)
    if isinstance(parts, list):
        return content_text(parts)
    return content_text(message.get(_MSG_CONTENT))


def tool_call_from(obj: object, max_text: int) -> ToolCallRequest | None:
    """A requested tool call from a GenAI `tool_call` part or an OpenAI/Anthropic tool call."""
    if type(obj) is not dict and not isinstance(obj, Mapping):
        return None
    function = obj.get(_MSG_FUNCTION)
    if type(function) is dict or isinstance(function, Mapping):
        tool = function.get(_MSG_NAME)
        arguments = function.get(_MSG_ARGUMENTS)
    else:
        tool = obj.get(_MSG_NAME)
        arguments = first(obj, _MSG_ARGUMENTS, _MSG_INPUT)
    tool_name = name(tool)
    if not tool_name:
        return None
    return ToolCallRequest(
        name=tool_name,
        arguments=truncate(render(arguments), max_text),
        call_id=name(first(obj, _MSG_ID, _MSG_CALL_ID)),
    )


def message_tool_calls(message: object, max_text: int) -> list[ToolCallRequest]:
    """Tool calls a chat message requests: GenAI `tool_call` parts or an OpenAI `tool_calls`."""
    if type(message) is not dict and not isinstance(message, Mapping):
        return []
    candidates: list[object] = []
    parts = message.get(_MSG_PARTS)
    if isinstance(parts, list):
        candidates.extend(part for part in parts if _is_tool_call_part(part))
    content = message.get(_MSG_CONTENT)
    if isinstance(content, list):
        candidates.extend(part for part in content if _is_tool_call_part(part))
    listed = parse_json(message.get(_MSG_TOOL_CALLS))
    if isinstance(listed, list):
        candidates.extend(listed)
    calls = (tool_call_from(candidate, max_text) for candidate in candidates)
    return [call for call in calls if call is not None]


def tool_calls_from(value: object, max_text: int) -> list[ToolCallRequest]:
    """Tool calls from a list (or JSON list) of tool-call objects."""
    listed = parse_json(value)
    if isinstance(listed, Mapping):
        listed = [listed]
    if not isinstance(listed, list):
        return []
    calls = (tool_call_from(item, max_text) for item in listed)
    return [call for call in calls if call is not None]


def _is_tool_call_part(part: object) -> bool:
    if type(part) is not dict and not isinstance(part, Mapping):
        return False
    kind = part.get(_MSG_TYPE)
    return kind in _TOOL_CALL_PART_TYPES or isinstance(part.get(_MSG_FUNCTION), Mapping)


# --- framework call wrappers -------------------------------------------------------------------

# Keys of the `{"args": [...], "kwargs": {...}}` wrapper smolagents and OpenLLMetry put around
# a Python call's arguments (smolagents adds `sanitize_inputs_outputs`).
_CALL_WRAPPER_KEYS = frozenset({"args", "kwargs", "sanitize_inputs_outputs"})


def call_arguments(text: str) -> str:
    """A tool's arguments as the call named them: inside a `{"args": [...], "kwargs": {...}}`
    wrapper, the keyword arguments (or, with none, the positional ones) as JSON; anything
    else unchanged."""
    if not text.startswith("{") or '"kwargs"' not in text:
        return text
    parsed = parse_json(text)
    if not isinstance(parsed, dict) or not parsed.keys() <= _CALL_WRAPPER_KEYS:
        return text
    kwargs, args = parsed.get("kwargs"), parsed.get("args")
    if not isinstance(kwargs, dict):
        return text
    if kwargs or not args:
        return render(kwargs)
    return render(args[0] if isinstance(args, list) and len(args) == 1 else args)


def tool_message_content(text: str) -> tuple[str, str]:
    """(content, tool call id) of a LangChain ToolMessage serialized as JSON
    (`{"type": "tool", "data": {"content": ..., "tool_call_id": ...}}`), or (text, "")."""
    if not text.startswith("{") or '"tool"' not in text:
        return text, ""
    parsed = parse_json(text)
    if not isinstance(parsed, dict) or parsed.get("type") != "tool":
        return text, ""
    data = parsed.get("data")
    if not isinstance(data, dict) or "content" not in data:
        return text, ""
    return content_text(data["content"]), name(data.get("tool_call_id"))


def unquote_json_string(text: str) -> str:
    """A value serialized as a JSON string (`"\\"ok\\""`, as OpenLLMetry writes a function's
    return value) as the string itself; anything else unchanged."""
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        return text
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return text
    return value if isinstance(value, str) else text
