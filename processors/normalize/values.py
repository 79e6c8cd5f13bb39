"""Coercion, rendering and common step fields shared by the dialect readers.

Attribute values arrive as whatever the sender put on the wire: a count may be a string, a
message list may be a JSON string or a structured value, a field may be missing, or hostile
(10 MB strings, maps where text is expected, lists of mixed types). Every function here returns
a usable value or an empty one and never raises, so each dialect reader stays a plain list of
look-ups and a bad attribute costs one empty field, not the step.

Names spelled here are general OpenTelemetry ones (`error.type`, the `exception` event) and the
JSON shapes of chat messages that several dialects embed; each dialect's own attribute names
live in its module.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from processors.conventions import RUN_ATTRIBUTES
from processors.model import Step, StepKind, StepStatus, ToolCallRequest

# Default cap for tool arguments, tool results and output text (characters).
MAX_TEXT = 16384
# input_text holds the last user message: enough to name the task's entities, no more.
INPUT_TEXT_MAX = 4096
# Error strings and identifiers (names, ids, models) are short in any honest telemetry.
ERROR_TEXT_MAX = 2048
NAME_MAX = 1024
# A number written as text longer than this is not a count.
_NUMBER_CHARS_MAX = 64
# Nesting depth we follow inside message payloads before giving up on a branch.
_DEPTH_MAX = 12
# Longest index we accept in flattened keys such as `llm.input_messages.3.message.role`.
_INDEX_DIGITS_MAX = 6

TRUNCATION_MARKER = "…[truncated {n} chars]"

# General OpenTelemetry names (trace semantic conventions), not owned by any one dialect.
ERROR_TYPE = "error.type"
EXCEPTION_EVENT = "exception"
EXCEPTION_MESSAGE = "exception.message"
EXCEPTION_TYPE = "exception.type"
# SpanRecord.status_code spellings (ClickHouse exporter: "Unset", "Ok", "Error"), compared
# case-insensitively so the OTLP enum names also work.
_STATUS_ERROR = frozenset({"error", "status_code_error"})
_STATUS_OK = frozenset({"ok", "status_code_ok"})

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


# --- attribute access -------------------------------------------------------------------------


def mapping(value: object) -> Mapping[str, Any]:
    """`value` if it is a mapping, else an empty one: records built by hand may carry None."""
    if type(value) is dict:  # decoded records: skip the slower abstract-class check
        return value
    return value if isinstance(value, Mapping) else {}


def present(value: object) -> bool:
    """True for a value that says something (not None, not an empty string or container)."""
    if value is None:
        return False
    if isinstance(value, str | bytes | list | tuple | dict):
        return len(value) > 0
    return True


def first(attrs: Mapping[str, Any], *keys: str) -> Any:
    """The first present value among `keys`: newer and older names of one field, in order."""
    for key in keys:
        try:
            value = attrs.get(key)
        except Exception:
            return None
        if value is not None and present(value):
            return value
    return None


def first_name(attrs: Mapping[str, Any], *keys: str) -> str:
    """The first of `keys` that holds a usable identifier (a garbage newer name falls back)."""
    for key in keys:
        raw = attrs.get(key)
        if raw is None:  # absent: the usual case for all but one of the names
            continue
        value = name(raw)
        if value:
            return value
    return ""


def first_count(attrs: Mapping[str, Any], *keys: str) -> int | None:
    """The first of `keys` that holds a non-negative count."""
    for key in keys:
        raw = attrs.get(key)
        if raw is None:
            continue
        value = to_count(raw)
        if value is not None:
            return value
    return None


def has_prefix(attrs: Mapping[str, Any], prefix: str) -> bool:
    """Whether any attribute name starts with `prefix` (how a dialect is told apart)."""
    # A loop rather than any(): resuming a generator per name costs more than the check.
    for key in attrs:  # noqa: SIM110
        if isinstance(key, str) and key.startswith(prefix):
            return True
    return False


def indexed(attrs: Mapping[str, Any], prefix: str) -> dict[int, dict[str, Any]]:
    """Group flattened list attributes `prefix.<i>.<rest>` into {i: {rest: value}}.

    OpenInference and OpenLLMetry spread lists of messages and tool calls over indexed
    attribute names; this gathers them back, ordered by index.
    """
    start = prefix + "."
    size = len(start)
    found: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not isinstance(key, str) or not key.startswith(start):
            continue
        index, _, rest = key[size:].partition(".")
        if not rest or not index.isascii() or not index.isdigit():
            continue
        if len(index) > _INDEX_DIGITS_MAX:
            continue
        number = int(index)
        entry = found.get(number)
        if entry is None:
            found[number] = {rest: value}
        else:
            entry[rest] = value
    return dict(sorted(found.items()))


def flatten(value: object, prefix: str = "", depth: int = 0) -> dict[str, Any]:
    """Nested maps as one map with dotted keys, so structured and flattened senders read alike."""
    out: dict[str, Any] = {}
    if not isinstance(value, Mapping) or depth > _DEPTH_MAX:
        return out
    for key, item in value.items():
        name = f"{prefix}{key}" if isinstance(key, str) else f"{prefix}{to_str(key)}"
        if isinstance(item, Mapping):
            out.update(flatten(item, name + ".", depth + 1))
        else:
            out[name] = item
    return out


def run_attributes(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The `mast.*` policy and outcome attributes present, with their values as sent."""
    return {key: attrs[key] for key in RUN_ATTRIBUTES if key in attrs}


# --- coercion ---------------------------------------------------------------------------------


def to_str(value: object) -> str:
    """Text for any attribute value: strings as-is, scalars spelled, containers as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        try:
            return str(value)
        except ValueError:  # ints past the interpreter's digit limit
            return ""
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    return render(value)


def render(value: object) -> str:
    """JSON-ish text of a value (strings unchanged), for arguments and results sent structured."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    try:
        return json.dumps(value, ensure_ascii=False, default=_json_default)
    except (TypeError, ValueError, RecursionError):
        pass
    try:
        return str(value)
    except Exception:
        return f"<{type(value).__name__}>"


def _json_default(value: object) -> object:
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def to_int(value: object) -> int | None:
    """An integer from an int, an integral float or a numeric string; None otherwise."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else None
    if isinstance(value, bytes | bytearray):
        value = bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, str):
        text = value.strip()
        if not text or len(text) > _NUMBER_CHARS_MAX:
            return None
        try:
            return int(text)
        except ValueError:
            pass
        try:
            number = float(text)
        except ValueError:
            return None
        return int(number) if math.isfinite(number) else None
    return None


def to_count(value: object) -> int | None:
    """A non-negative count (tokens, messages); instrumentations use -1 for 'unknown'."""
    number = to_int(value)
    return number if number is not None and number >= 0 else None


def to_float(value: object) -> float | None:
    """A finite float from a number or numeric string; None otherwise."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        try:
            number = float(value)
        except OverflowError:
            return None
    elif isinstance(value, float):
        number = value
    elif isinstance(value, str) and 0 < len(value.strip()) <= _NUMBER_CHARS_MAX:
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


_TRUE = frozenset({"true", "1", "yes", "ok", "success", "succeeded"})
_FALSE = frozenset({"false", "0", "no", "failure", "failed", "error"})


def to_bool(value: object) -> bool | None:
    """A boolean from a bool, 0/1, or a word such as "true"/"false"; None when unclear."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return {0: False, 1: True}.get(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    return None


def parse_json(value: object) -> Any:
    """Lists and maps as they are; a JSON string holding a list or map parsed; else None.

    GenAI message attributes may be sent structured or as JSON strings, and OpenLLMetry
    serializes inputs and outputs as JSON; both read the same after this.
    """
    if value is None:  # the usual case: the attribute is absent
        return None
    if type(value) is not str:
        if isinstance(value, list | dict):
            return value
        if isinstance(value, bytes | bytearray):
            value = bytes(value).decode("utf-8", errors="replace")
        if not isinstance(value, str):
            return None
    text = value.strip()
    if not text or text[0] not in "[{":
        return None
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return parsed if isinstance(parsed, list | dict) else None


def iso_to_ns(value: object) -> int:
    """Nanoseconds since the epoch from an ISO 8601 timestamp; 0 when it does not parse."""
    if not isinstance(value, str) or not 0 < len(value) <= _NUMBER_CHARS_MAX:
        return 0
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        return 0
    try:
        return int(moment.timestamp() * 1_000_000_000)
    except (OverflowError, OSError, ValueError):
        return 0


# --- text -------------------------------------------------------------------------------------


def truncate(text: str, limit: int) -> str:
    """`text` cut to `limit` characters with a marker saying how much was dropped.

    Detectors compare and search these fields; a bounded size keeps one huge tool output from
    dominating memory while the marker keeps the cut visible in evidence.
    """
    if limit < 0 or len(text) <= limit:
        return text
    return text[:limit] + TRUNCATION_MARKER.format(n=len(text) - limit)


def clip(value: object, limit: int) -> str:
    """Text of `value` (JSON for containers), truncated to `limit`."""
    return truncate(to_str(value), limit)


def name(value: object) -> str:
    """An identifier-like field (name, id, model): scalars only, short."""
    if type(value) is str:  # the usual case, without the general coercion
        text = value.strip()
        return text if len(text) <= NAME_MAX else truncate(text, NAME_MAX)
    if value is None:
        return ""
    if isinstance(value, list | dict | tuple):
        return ""
    return truncate(to_str(value).strip(), NAME_MAX)


# --- chat message payloads --------------------------------------------------------------------


def content_text(value: object, depth: int = 0) -> str:
    """The text in a message content value: a string, a list of parts, or a part.

    Non-text parts (images, tool calls, blobs) are skipped; text and reasoning parts are joined
    with newlines in the order given.
    """
    if depth > _DEPTH_MAX:
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


# --- common step fields -----------------------------------------------------------------------


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
