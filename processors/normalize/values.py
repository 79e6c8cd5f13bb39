"""Attribute access, coercion and bounded text shared by the dialect readers.

Attribute values arrive as whatever the sender put on the wire: a count may be a string, a
message list may be a JSON string or a structured value, a field may be missing, or hostile
(10 MB strings, maps where text is expected, lists of mixed types). Every function here returns
a usable value or an empty one and never raises, so each dialect reader stays a plain list of
look-ups and a bad attribute costs one empty field, not the step.

The chat messages and call wrappers embedded in attributes are read in `payloads`; the step
fields every span dialect fills the same way in `span_fields`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from mast_otel.processors.conventions import RUN_ATTRIBUTES

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
DEPTH_MAX = 12
# Longest index we accept in flattened keys such as `llm.input_messages.3.message.role`.
_INDEX_DIGITS_MAX = 6

TRUNCATION_MARKER = "…[truncated {n} chars]"


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
    if not isinstance(value, Mapping) or depth > DEPTH_MAX:
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


# Typographic apostrophes in prose (U+2019 in "I\u2019m unable to"), which models write as
# often as plain ones: the detectors' patterns are written with the plain one.
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'"})


def plain_prose(text: str) -> str:
    """What a model or a user said, with plain apostrophes (tool arguments and results stay as
    sent)."""
    if "\u2019" in text or "\u2018" in text:
        return text.translate(_APOSTROPHES)
    return text


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
