"""What the commands print from the store, made harmless: terminal control characters shown
as escapes, JSON with C1 escaped, and the stream every command writes to."""

from __future__ import annotations

import json
import re
from typing import Any


def print_findings(rows: list[dict[str, Any]], output: str) -> None:
    if output == "json":
        for row in rows:
            print(json_line(row, ensure_ascii=False))
        return
    if not rows:
        print("no findings")
        return
    print(f"{'mode':<7} {'trace id':<32} {'span id':<16} {'conf':>4}  message")
    for row in rows:
        print(
            f"{shown(row['mode']):<7} {shown(row['trace_id']):<32} "
            f"{shown(row['span_id']):<16} {float(row['confidence']):>4.2f}  "
            f"{shown(row['message'])}"
        )


# Terminal control characters: C0 (but newline and tab, which the caller handles), DEL and
# C1. Printed raw, a stored name could move the cursor, retitle the window, hide text or, on
# some terminals, answer back; they are shown as escapes instead.
# Bidirectional overrides and isolates reorder what follows them on screen: escaped too.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROL_OR_BREAK = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def escape_control(match: re.Match[str]) -> str:
    code = ord(match[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(value: Any) -> str:
    """A stored value as one line of harmless text: every control character (newlines and
    tabs included) as an escape such as \\x1b."""
    return _CONTROL_OR_BREAK.sub(escape_control, str(value))


def json_line(row: Any, ensure_ascii: bool = True) -> str:
    """`row` as JSON; JSON escapes C0 itself, C1 (kept raw without ensure_ascii) is escaped."""
    return re.sub(
        r"[\x7f-\x9f]", lambda m: f"\\u{ord(m[0]):04x}", json.dumps(row, ensure_ascii=ensure_ascii)
    )


class SafeOutput:
    """A text stream that writes every terminal control character but newline and tab as an
    escape: the last guard for whatever a command prints from the store."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(CONTROL.sub(escape_control, text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
