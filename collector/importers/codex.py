"""Codex CLI session files (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`).

Each line is a `RolloutLine` of codex-rs (`protocol.rs`): `{"timestamp", "type", "payload"}`
with `type` one of `session_meta` (the session: id, cwd, instructions, model provider),
`turn_context` (the model and policies of the turn that follows), `response_item` (a
`ResponseItem` of `models.rs`: `message`, `reasoning`, `function_call`,
`function_call_output`, `custom_tool_call` / `custom_tool_call_output`, `local_shell_call`,
`web_search_call`, ...), `event_msg` (harness events: `token_count`, `error`,
`stream_error`, `turn_aborted`, and copies of the messages) and `compacted` (history replaced
by a summary). Files written before the wrapper existed (a bare meta object, then bare
response items, one per line) are read too.

One file is one run (trace id `sha256("codex" ␟ session id)`, as for the Codex CLI's own OTLP
log events, see schemas/conventions.md):
- consecutive model output items (reasoning, assistant message, calls) are one `chat` span
  (one model response), with the history before it as input; the next `token_count` event's
  `last_token_usage` gives its tokens;
- every call is an `execute_tool` span with its arguments as given (`shell` / `exec_command`
  / `shell_command` JSON, the `apply_patch` patch text, a local shell call's action), joined
  to its output by `call_id`; an output saying `success: false`, a non-zero exit code
  (`Exit code: N`, `Process exited with code N`, `metadata.exit_code`) marks it failed;
- user messages are spans of their own (`mast.import.role` user); a turn the user typed (not
  instructions or `<environment_context>`) carries a `gen_ai.user.message` event, read as a
  HUMAN step; `error` / `stream_error`
  events are failed `chat` spans; `turn_aborted` is a plain span, `compacted` a span of the
  agent (`gen_ai.agent.name`) named `compacted`, which detectors read as a deliberate summary;
- the task (`mast.task.description`) is the session's instructions, developer messages and
  instruction files (AGENTS.md), then the first user message that is not the harness's
  `<environment_context>`.
Times are the lines' timestamps (kept strictly increasing in file order); every span carries
its line's index (0-based, blank lines counted) as `mast.import.message_index`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from mast_otel.collector.importers import spans as S
from mast_otel.collector.importers.codex_items import (
    call_of,
    content_text,
    history_of,
    output_of,
    reasoning_text,
    to_str,
)
from mast_otel.collector.importers.errors import ImportFormatError
from mast_otel.collector.importers.spans import RunSpec, SpanSpec
from mast_otel.processors.ids import stable_hex

FORMAT = "codex"
AGENT = "codex"
LINE_TYPES = frozenset({"session_meta", "turn_context", "response_item", "event_msg", "compacted"})
OUTPUT_ITEMS = frozenset(
    {"reasoning", "function_call", "custom_tool_call", "local_shell_call", "web_search_call"}
)
CALL_ITEMS = frozenset({"function_call", "custom_tool_call", "local_shell_call", "web_search_call"})
RESULT_ITEMS = frozenset({"function_call_output", "custom_tool_call_output"})
_CONTEXT_PREFIXES = ("<environment_context>",)
_INSTRUCTION_PREFIXES = ("<user_instructions>", "# AGENTS.md instructions")


def recognises(head: bytes) -> bool:
    """JSON lines whose first line is a rollout line (`type` + `payload`) or a bare meta."""
    first = head.lstrip().split(b"\n", 1)[0]
    try:
        doc = json.loads(first)
    except ValueError:
        return False
    if not isinstance(doc, dict):
        return False
    if doc.get("type") in LINE_TYPES and isinstance(doc.get("payload"), dict):
        return True
    # Before the wrapper: the first line was the session meta alone.
    return "id" in doc and "timestamp" in doc and "type" not in doc and "role" not in doc


def read(path: str) -> Iterator[Any]:
    for run in runs(path):
        yield S.request_for(run)


def runs(path: str) -> Iterator[RunSpec]:
    with open(path, "rb") as handle:
        raw = handle.read()
    yield build_run(_lines(raw, path), path, hashlib.sha256(raw).hexdigest()[:16])


def _lines(raw: bytes, path: str) -> list[tuple[int, dict[str, Any]]]:
    """(line index, rollout line as {timestamp, type, payload})."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"{path}: not UTF-8 text ({exc.reason})") from exc
    out = []
    for index, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ImportFormatError(f"{path}:{index + 1}: malformed JSON: {exc.msg}") from exc
        if not isinstance(doc, dict):
            raise ImportFormatError(
                f"{path}:{index + 1}: expected a JSON object, got {type(doc).__name__}"
            )
        if doc.get("type") in LINE_TYPES and isinstance(doc.get("payload"), dict):
            out.append((index, doc))
        elif not out and "id" in doc and "type" not in doc:
            out.append(
                (index, {"timestamp": doc.get("timestamp"), "type": "session_meta", "payload": doc})
            )
        elif isinstance(doc.get("type"), str) and "payload" not in doc:
            out.append(
                (
                    index,
                    {"timestamp": doc.get("timestamp"), "type": "response_item", "payload": doc},
                )
            )
        else:
            raise ImportFormatError(
                f"{path}:{index + 1}: not a Codex rollout line (type {doc.get('type')!r})"
            )
    if not out:
        raise ImportFormatError(f"{path}: empty")
    return out


class _Builder:
    def __init__(self, trace_id: str, path: str) -> None:
        self.trace_id = trace_id
        self.path = path
        self.root_id = S.span_id_for(trace_id, "root")
        self.spans: list[SpanSpec] = []
        self.history: list[dict[str, Any]] = []
        self.model = ""
        self.calls: dict[str, SpanSpec] = {}
        self.group: list[tuple[int, int, dict[str, Any]]] = []  # (index, time, item)
        self.instructions: list[str] = []
        # Token usage of the model response being gathered, or of the next one: Codex writes
        # a response's `token_count` event just before or just after its items.
        self.usage: dict[str, int] = {}
        self.pending_usage: dict[str, int] = {}
        self.last_total: Any = None
        self.first_user = ""

    def common(self) -> dict[str, Any]:
        attrs: dict[str, Any] = {"gen_ai.agent.name": AGENT}
        if self.model:
            attrs["gen_ai.request.model"] = self.model
        return attrs

    def flush(self) -> None:
        """Close the model response being gathered: its chat span, then its calls' spans."""
        if not self.group:
            return
        first_index, first_time, _ = self.group[0]
        last_time = self.group[-1][1]
        parts: list[dict[str, Any]] = []
        calls: list[tuple[int, int, str, str, Any]] = []
        for index, time_ns, item in self.group:
            kind = item.get("type")
            if kind == "message":
                text = content_text(item.get("content"))
                if text:
                    parts.append(S.text_part(text))
            elif kind == "reasoning":
                text = reasoning_text(item)
                if text:
                    parts.append(S.text_part(text, "reasoning"))
            else:
                call_id, name, arguments = call_of(item, index)
                parts.append(S.tool_call_part(call_id, name, S.arguments_value(arguments)))
                calls.append((index, time_ns, call_id, name, arguments))
        finish = "tool_call" if calls else "stop"
        usage, self.usage, self.pending_usage = self.usage or self.pending_usage, {}, {}
        output = {"role": "assistant", "parts": parts, "finish_reason": finish}
        chat = SpanSpec(
            S.span_id_for(self.trace_id, "line", str(first_index)),
            f"chat {self.model}".strip(),
            first_time,
            last_time + 1_000,
            self.root_id,
            {
                "gen_ai.operation.name": "chat",
                **self.common(),
                "gen_ai.input.messages": S.input_messages(self.history),
                "gen_ai.output.messages": json.dumps([output], ensure_ascii=False),
                "gen_ai.response.finish_reasons": [finish],
                S.MESSAGE_INDEX: first_index,
                **usage,
            },
        )
        self.spans.append(chat)
        self.history.append({"role": "assistant", "parts": parts})
        for offset, (index, time_ns, call_id, name, arguments) in enumerate(calls):
            if call_id in self.calls:
                raise ImportFormatError(f"{self.path}:{index + 1}: call id {call_id!r} used twice")
            tool = SpanSpec(
                S.span_id_for(self.trace_id, "call", str(index)),
                f"execute_tool {name}",
                time_ns + 2_000 + offset,
                time_ns + 2_000 + offset,
                self.root_id,
                {
                    "gen_ai.operation.name": "execute_tool",
                    **self.common(),
                    "gen_ai.tool.name": name,
                    "gen_ai.tool.call.id": call_id,
                    "gen_ai.tool.call.arguments": arguments
                    if isinstance(arguments, str)
                    else json.dumps(arguments, ensure_ascii=False),
                    S.MESSAGE_INDEX: index,
                },
            )
            self.spans.append(tool)
            self.calls[call_id] = tool
        self.group = []

    def result(self, index: int, time_ns: int, item: dict[str, Any]) -> None:
        call_id = to_str(item.get("call_id"))
        tool = self.calls.pop(call_id, None)
        if tool is None:
            raise ImportFormatError(
                f"{self.path}:{index + 1}: {item.get('type')} for call id {call_id!r}, which no "
                f"earlier call made (or was already answered)"
            )
        text, failed = output_of(item.get("output"))
        tool.attributes["gen_ai.tool.call.result"] = text
        tool.attributes[S.RESULT_MESSAGE_INDEX] = index
        tool.end_ns = max(tool.start_ns, time_ns)
        if failed:
            tool.error = S.cut(text.strip(), 500) or "tool failed"
        self.history.append({"role": "tool", "parts": [S.tool_response_part(call_id, text)]})

    def plain(
        self, index: int, time_ns: int, name: str, attrs: dict[str, Any], error: str | None = None
    ) -> SpanSpec:
        span = SpanSpec(
            S.span_id_for(self.trace_id, "line", str(index)),
            name,
            time_ns,
            time_ns + 1_000,
            self.root_id,
            {S.MESSAGE_INDEX: index, **attrs},
            error,
        )
        self.spans.append(span)
        return span


def build_run(lines: list[tuple[int, dict[str, Any]]], path: str, digest: str) -> RunSpec:
    meta: dict[str, Any] = next(
        (doc["payload"] for _, doc in lines if doc["type"] == "session_meta"), {}
    )
    session = to_str(meta.get("id") or meta.get("session_id"))
    trace_id = stable_hex("codex", session) if session else S.stable_hex_trace(FORMAT, digest)
    b = _Builder(trace_id, path)
    b.model = to_str(meta.get("model"))
    if isinstance(meta.get("instructions"), str) and meta["instructions"].strip():
        b.instructions.append(meta["instructions"].strip())

    times = _times(lines)
    for (index, doc), time_ns in zip(lines, times, strict=True):
        kind, payload = doc["type"], doc["payload"]
        if kind == "turn_context":
            b.model = to_str(payload.get("model")) or b.model
        elif kind == "compacted":
            b.flush()
            summary = to_str(payload.get("message"))
            replacement = payload.get("replacement_history")
            b.history = [{"role": "user", "parts": [S.text_part(summary)]}] if summary else []
            if isinstance(replacement, list):
                b.history = history_of(replacement)
            # The agent's own compaction: a step of its own (named so detectors read it as a
            # deliberate summary), so the shorter history after it is not a loss.
            b.plain(index, time_ns, "compacted", {"gen_ai.agent.name": AGENT, S.CONTENT: summary})
        elif kind == "event_msg":
            _event(b, index, time_ns, payload)
        elif kind == "response_item":
            _item(b, index, time_ns, payload)
    b.flush()

    first_time, last_time = times[0], times[-1]
    root_attrs: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": AGENT,
        S.MESSAGE_INDEX: lines[0][0],
        S.FORMAT: FORMAT,
        S.SOURCE: os.path.basename(path),
    }
    if session:
        root_attrs["gen_ai.conversation.id"] = session
    provider = to_str(meta.get("model_provider"))
    if provider:
        root_attrs["gen_ai.provider.name"] = provider
    if b.model:
        root_attrs["gen_ai.request.model"] = b.model
    task = "\n\n".join([*b.instructions, b.first_user] if b.first_user else b.instructions)
    if task:
        root_attrs["mast.task.description"] = task
    root = SpanSpec(
        b.root_id, f"invoke_agent {AGENT}", first_time, last_time + 10_000, "", root_attrs
    )
    return RunSpec(trace_id, [root, *b.spans], service="codex", label=path)


def _item(b: _Builder, index: int, time_ns: int, item: dict[str, Any]) -> None:
    kind = item.get("type")
    role = item.get("role")
    if (kind == "message" and role == "assistant") or kind in OUTPUT_ITEMS:
        b.group.append((index, time_ns, item))
        return
    b.flush()
    if kind in RESULT_ITEMS:
        b.result(index, time_ns, item)
    elif kind == "message" and role in ("user", "developer", "system"):
        text = content_text(item.get("content"))
        stripped = text.strip()
        # Instruction files and the environment context Codex sends as user messages are
        # instructions, not turns of the user: written as such in the model's input.
        said_by_user = role == "user" and not stripped.startswith(
            _INSTRUCTION_PREFIXES + _CONTEXT_PREFIXES
        )
        b.history.append(
            {"role": "user" if said_by_user else "system", "parts": [S.text_part(text)]}
        )
        if role != "user" or stripped.startswith(_INSTRUCTION_PREFIXES):
            if stripped:
                b.instructions.append(stripped)
        elif stripped and not stripped.startswith(_CONTEXT_PREFIXES) and not b.first_user:
            b.first_user = stripped
        if role == "user":
            span = b.plain(index, time_ns, "user message", {S.ROLE: "user", S.CONTENT: text})
            if stripped and not stripped.startswith(_INSTRUCTION_PREFIXES + _CONTEXT_PREFIXES):
                span.events = S.user_message(text)  # a turn of the user: a HUMAN step
    # ghost_snapshot, compaction markers and unknown items carry no step


def _event(b: _Builder, index: int, time_ns: int, event: dict[str, Any]) -> None:
    kind = event.get("type")
    if kind == "token_count":
        info = event.get("info")
        if not isinstance(info, dict) or not isinstance(info.get("last_token_usage"), dict):
            return
        if info.get("total_token_usage") == b.last_total:
            return  # the same count again (Codex repeats it at turn boundaries)
        b.last_total = info.get("total_token_usage")
        usage = {}
        for key, attr in (
            ("input_tokens", "gen_ai.usage.input_tokens"),
            ("output_tokens", "gen_ai.usage.output_tokens"),
        ):
            value = info["last_token_usage"].get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                usage[attr] = value
        if b.group:
            b.usage = usage
        else:
            b.pending_usage = usage
    elif kind in ("error", "stream_error"):
        b.flush()
        message = to_str(event.get("message")) or kind
        b.plain(
            index,
            time_ns,
            f"chat {b.model}".strip(),
            {"gen_ai.operation.name": "chat", **b.common(), "error.type": kind},
            error=message,
        )
    elif kind == "turn_aborted":
        b.flush()
        b.plain(index, time_ns, "turn aborted", {S.CONTENT: to_str(event.get("reason"))})


def _times(lines: list[tuple[int, dict[str, Any]]]) -> list[int]:
    """Each line's time in ns, strictly increasing in file order (ties and lines without a
    timestamp get the previous time plus a microsecond)."""
    out: list[int] = []
    previous = 0
    for _, doc in lines:
        moment = _parse_time(doc.get("timestamp"))
        current = max(moment, previous + 1_000) if moment else previous + 1_000
        out.append(current)
        previous = current
    return out


def _parse_time(value: Any) -> int:
    if not isinstance(value, str) or not value:
        return 0
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return 0
    return int(moment.timestamp() * 1_000_000) * 1_000
