"""What the items of a Codex session file hold: a call's name and arguments, an output's text
and whether it failed, a message's text, a reasoning item's summary.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mast_otel.collector.importers import spans as S

__all__ = [
    "call_of",
    "content_text",
    "history_of",
    "output_of",
    "reasoning_text",
    "to_str",
]

_EXIT = re.compile(r"(?:^Exit code:\s*|Process exited with code\s+)(-?\d+)", re.MULTILINE)


def call_of(item: dict[str, Any], index: int) -> tuple[str, str, Any]:
    kind = item.get("type")
    call_id = to_str(item.get("call_id") or item.get("id")) or f"call_{index}"
    if kind == "function_call":
        return call_id, to_str(item.get("name")) or "function", item.get("arguments", "")
    if kind == "custom_tool_call":
        return call_id, to_str(item.get("name")) or "custom_tool", item.get("input", "")
    if kind == "local_shell_call":
        return call_id, "local_shell", item.get("action", {})
    return call_id, "web_search", item.get("action", {})


def output_of(output: Any) -> tuple[str, bool]:
    """(text, failed) of a call's output: a string, content items, or {content, success}."""
    failed = False
    if isinstance(output, dict):
        failed = output.get("success") is False
        output = output.get("content", output.get("output", ""))
    if isinstance(output, list):
        output = "\n".join(
            to_str(part.get("text"))
            for part in output
            if isinstance(part, dict) and part.get("text")
        )
    text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    parsed = None
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
    if isinstance(parsed, dict):
        metadata = parsed.get("metadata")
        code = metadata.get("exit_code") if isinstance(metadata, dict) else None
        if isinstance(code, int) and code != 0:
            failed = True
    match = _EXIT.search(text[:2_000])
    if match and int(match[1]) != 0:
        failed = True
    return text, failed


def history_of(items: list[Any]) -> list[dict[str, Any]]:
    history = []
    for item in items:
        if isinstance(item, dict) and item.get("type") == "message":
            role = "assistant" if item.get("role") == "assistant" else "user"
            history.append(
                {"role": role, "parts": [S.text_part(content_text(item.get("content")))]}
            )
    return history


def reasoning_text(item: dict[str, Any]) -> str:
    texts = []
    for key in ("summary", "content"):
        value = item.get(key)
        if isinstance(value, list):
            texts += [to_str(p.get("text")) for p in value if isinstance(p, dict) and p.get("text")]
    return "\n".join(texts)


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(
        to_str(part.get("text")) for part in content if isinstance(part, dict) and part.get("text")
    )


def to_str(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))
