"""OpenAI-style chat transcripts: messages with `tool_calls` and `tool` results.

Accepted layouts (JSON or JSON lines):
- a list of messages (`{"role": ..., "content": ...}`): one run;
- a run object holding its messages under `traj`, `messages` or `conversation`, with an
  optional outcome (`reward`, `score`, `success`, `outcome`), `task_id` / `trial` / `model`,
  and the `tools` the model was offered (OpenAI request shape): one run; a list of run
  objects (tau-bench's historical trajectories): a run each;
- JSON lines: a run per line (a message list or a run object), or one message per line (one
  run).

Each run becomes one trace (see `collector.importers.spans`): a root `invoke_agent` span
carrying `mast.task.description` (the system/developer prompt followed by the first user
message), `mast.run.outcome` / `mast.run.score` (reward 1 is success, anything lower a
failure; the reward is the score when it lies in [0, 1]); a `chat` span per assistant message
(its text and requested calls as output, the messages before it as input); an `execute_tool`
span per requested call, joined to its `tool` result by `tool_call_id` (a result without an
id answers the oldest unanswered call); and a span per user message (`mast.import.role` user,
no GenAI operation, a `gen_ai.user.message` event, which normalizes to a HUMAN step: later
turns of a simulated user or a harness are steps the detectors see). A result whose text
starts with `Error` marks its tool span failed, the convention of function-calling harnesses
(tau-bench among them).

Ids and times are deterministic: the trace id is derived from the file's content and the run's
position, span ids from the trace id and the message index; run N starts at
2024-01-01T00:00:00Z plus N hours and message i sits i seconds after it (files carry no times).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from typing import Any

from mast_otel.collector.importers import spans as S
from mast_otel.collector.importers.errors import ImportFormatError
from mast_otel.collector.importers.spans import RunSpec, SpanSpec

FORMAT = "chat"
MESSAGE_KEYS = ("traj", "messages", "conversation")
ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
EPOCH_NS = 1_704_067_200 * S.NS  # 2024-01-01T00:00:00Z
RUN_SPACING_NS = 3_600 * S.NS
AGENT = "assistant"


def recognises(head: bytes) -> bool:
    """JSON whose first object is a message (`role`) or a run holding messages."""
    text = head.lstrip()
    if text[:1] not in (b"[", b"{"):
        return False
    return (
        any(marker in head for marker in (b'"role"', b'"traj"', b'"messages"', b'"conversation"'))
        and b'"resourceSpans"' not in head
        and b'"resource_spans"' not in head
    )


def read(path: str) -> Iterator[Any]:
    """The OTLP export requests of the file's runs, one per run."""
    for run in runs(path):
        yield S.request_for(run)


def runs(path: str) -> Iterator[RunSpec]:
    """The file's runs, as spans."""
    name = os.path.basename(path)
    raw = _read_bytes(path)
    digest = hashlib.sha256(raw).hexdigest()[:16]
    for position, obj in _documents(raw, path):
        yield build_run(obj, position, f"{path} run {position}", source=name, digest=digest)


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def _documents(raw: bytes, path: str) -> list[tuple[int, Any]]:
    """(run position, run object or message list) for every run in the file."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"{path}: not UTF-8 text ({exc.reason})") from exc
    lines: list[tuple[int, Any]] | None = None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        doc = None
        lines = _json_lines(text, path)
    if lines is not None:
        if lines and all(_is_message(item) for _, item in lines):
            return [(0, [item for _, item in lines])]
        return [(i, item) for i, (_, item) in enumerate(lines)]
    if isinstance(doc, list):
        if doc and all(_is_message(item) for item in doc):
            return [(0, doc)]
        return list(enumerate(doc))
    if isinstance(doc, dict):
        return [(0, doc)]
    raise ImportFormatError(
        f"{path}: expected a list of messages or of runs, or a run object, got {type(doc).__name__}"
    )


def _json_lines(text: str, path: str) -> list[tuple[int, Any]]:
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append((lineno, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise ImportFormatError(f"{path}:{lineno}: malformed JSON: {exc.msg}") from exc
    if not out:
        raise ImportFormatError(f"{path}: empty")
    return out


def _is_message(item: Any) -> bool:
    return isinstance(item, dict) and isinstance(item.get("role"), str)


# --- one run ------------------------------------------------------------------------------


def build_run(
    obj: Any, position: int, where: str, *, source: str = "", digest: str = ""
) -> RunSpec:
    """The spans of one run (a run object or a message list)."""
    meta: dict[str, Any] = {}
    if isinstance(obj, dict):
        messages = next((obj[key] for key in MESSAGE_KEYS if key in obj), None)
        if messages is None:
            raise ImportFormatError(
                f"{where}: a run object needs its messages under one of "
                f"{', '.join(MESSAGE_KEYS)}; got keys {sorted(obj)[:6]}"
            )
        meta = obj
    else:
        messages = obj
    if not isinstance(messages, list):
        raise ImportFormatError(f"{where}: messages must be a list, got {type(messages).__name__}")
    if not messages:
        raise ImportFormatError(f"{where}: no messages")
    for index, message in enumerate(messages):
        _check_message(message, f"{where}, message {index}")

    trace_id = S.stable_hex_trace(FORMAT, digest, str(position))
    start = EPOCH_NS + position * RUN_SPACING_NS

    def at(index: int, offset_ms: int = 0) -> int:
        return start + index * S.NS + offset_ms * 1_000_000

    root_id = S.span_id_for(trace_id, "root")
    model = _text(meta.get("model"))
    common: dict[str, Any] = {"gen_ai.agent.name": AGENT}
    root_attrs: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        **common,
        S.MESSAGE_INDEX: 0,
        S.RUN_INDEX: position,
        S.FORMAT: FORMAT,
    }
    if source:
        root_attrs[S.SOURCE] = source
    if model:
        root_attrs["gen_ai.request.model"] = model
        common["gen_ai.request.model"] = model
    tools = meta.get("tools")
    common_chat: dict[str, Any] = {}
    if isinstance(tools, list) and tools:
        # The tools offered to the model, on each of its calls, as GenAI instrumentations send.
        common_chat["gen_ai.tool.definitions"] = json.dumps(tools, ensure_ascii=False)
    outcome, score = outcome_of(meta)
    if outcome:
        root_attrs["mast.run.outcome"] = outcome
    if score is not None:
        root_attrs["mast.run.score"] = score
    for key, attr in (("task_id", S.TASK_ID), ("trial", S.TRIAL)):
        value = meta.get(key)
        if isinstance(value, int | str) and not isinstance(value, bool):
            root_attrs[attr] = value
    spans = [SpanSpec(root_id, f"invoke_agent {AGENT}", at(0), at(len(messages)), "", root_attrs)]

    history: list[dict[str, Any]] = []
    open_calls: dict[str, SpanSpec] = {}  # call id → its tool span, until answered
    order: list[str] = []  # unanswered call ids, oldest first
    for index, message in enumerate(messages):
        role = message["role"]
        text = _content_text(message.get("content"))
        if role in ("system", "developer"):
            history.append({"role": "system", "parts": [S.text_part(text)]})
            continue
        if role == "user":
            # No span of its own: an instrumented agent loop shows the user's turn only in the
            # next model call's input, and so does this importer.
            history.append({"role": "user", "parts": [S.text_part(text)]})
            continue
        if role == "assistant":
            calls = _calls(message, index, where)
            parts: list[dict[str, Any]] = [S.text_part(text)] if text else []
            parts += [
                S.tool_call_part(cid, name, S.arguments_value(args)) for cid, name, args in calls
            ]
            output = {
                "role": "assistant",
                "parts": parts,
                "finish_reason": "tool_call" if calls else "stop",
            }
            spans.append(
                SpanSpec(
                    S.span_id_for(trace_id, "message", str(index)),
                    f"chat {model}".strip(),
                    at(index),
                    at(index, 500),
                    root_id,
                    {
                        "gen_ai.operation.name": "chat",
                        **common,
                        **common_chat,
                        "gen_ai.input.messages": S.input_messages(history),
                        "gen_ai.output.messages": json.dumps([output], ensure_ascii=False),
                        "gen_ai.response.finish_reasons": [output["finish_reason"]],
                        S.MESSAGE_INDEX: index,
                    },
                )
            )
            history.append({"role": "assistant", "parts": parts})
            for offset, (call_id, name, arguments) in enumerate(calls):
                if call_id in open_calls:
                    raise ImportFormatError(
                        f"{where}, message {index}: tool call id {call_id!r} used twice"
                    )
                tool = SpanSpec(
                    S.span_id_for(trace_id, "call", str(index), str(offset)),
                    f"execute_tool {name}",
                    at(index, 500 + offset),
                    at(index, 500 + offset),
                    root_id,
                    {
                        "gen_ai.operation.name": "execute_tool",
                        **common,
                        "gen_ai.tool.name": name,
                        "gen_ai.tool.call.id": call_id,
                        "gen_ai.tool.type": "function",
                        "gen_ai.tool.call.arguments": arguments
                        if isinstance(arguments, str)
                        else json.dumps(arguments, ensure_ascii=False),
                        S.MESSAGE_INDEX: index,
                    },
                )
                spans.append(tool)
                open_calls[call_id] = tool
                order.append(call_id)
            continue
        # role tool / function: the result of an earlier call
        call_id = _text(message.get("tool_call_id"))
        if not call_id:
            if not order:
                raise ImportFormatError(
                    f"{where}, message {index}: a {role} result with no earlier unanswered call"
                )
            call_id = order[0]
        if call_id not in open_calls:
            raise ImportFormatError(
                f"{where}, message {index}: tool result for call id {call_id!r}, "
                f"which no earlier assistant message requested (or was already answered)"
            )
        answered = open_calls.pop(call_id)
        order.remove(call_id)
        answered.attributes["gen_ai.tool.call.result"] = text
        answered.attributes[S.RESULT_MESSAGE_INDEX] = index
        answered.end_ns = max(answered.start_ns, at(index, 1))
        if text.lstrip().startswith("Error"):
            answered.error = S.cut(text.strip(), 500)
        history.append({"role": "tool", "parts": [S.tool_response_part(call_id, text)]})
    return RunSpec(trace_id, spans, service="imported-agent", label=where)


def _check_message(message: Any, where: str) -> None:
    if not isinstance(message, dict):
        raise ImportFormatError(f"{where}: expected a message object, got {type(message).__name__}")
    role = message.get("role")
    if role not in ROLES:
        raise ImportFormatError(
            f"{where}: role must be one of {', '.join(sorted(ROLES))}, got {role!r}"
        )
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        raise ImportFormatError(
            f"{where}: content must be text, a list of parts or null, got {type(content).__name__}"
        )


def _calls(message: dict[str, Any], index: int, where: str) -> list[tuple[str, str, Any]]:
    """(call id, tool name, arguments as given) for every call an assistant message requests."""
    raw = message.get("tool_calls") or []
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        raw = [*raw, {"function": legacy}] if isinstance(raw, list) else raw
    if not isinstance(raw, list):
        raise ImportFormatError(f"{where}, message {index}: tool_calls must be a list")
    calls = []
    for offset, call in enumerate(raw):
        function = call.get("function") if isinstance(call, dict) else None
        source = function if isinstance(function, dict) else call
        name = _text(source.get("name")) if isinstance(source, dict) else ""
        if not name:
            raise ImportFormatError(
                f"{where}, message {index}: tool call {offset} has no function name"
            )
        arguments = source.get("arguments", "")
        call_id = _text(call.get("id")) or f"call_{index}_{offset}"
        calls.append((call_id, name, arguments if arguments is not None else ""))
    return calls


def task_description(messages: list[dict[str, Any]]) -> str:
    """The first substantive instruction: the system/developer prompt(s), then the first user
    message (both, when both are there)."""
    prompts = []
    for message in messages:
        if message["role"] in ("system", "developer"):
            text = _content_text(message.get("content")).strip()
            if text:
                prompts.append(text)
        elif message["role"] == "user":
            text = _content_text(message.get("content")).strip()
            if text:
                prompts.append(text)
                break
    return "\n\n".join(prompts)


def outcome_of(meta: dict[str, Any]) -> tuple[str, float | None]:
    """(mast.run.outcome, mast.run.score) from a run object's outcome fields."""
    for key in ("reward", "score"):
        value = meta.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            score = float(value) if 0.0 <= value <= 1.0 else None
            return ("success" if value >= 1.0 else "failure"), score
    success = meta.get("success", meta.get("resolved"))
    if isinstance(success, bool):
        return ("success" if success else "failure"), None
    outcome = meta.get("outcome")
    if isinstance(outcome, str) and outcome.strip():
        return outcome.strip(), None
    return "", None


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict):
            value = part.get("text", part.get("content"))
            if isinstance(value, str):
                texts.append(value)
    return "\n".join(texts)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))
