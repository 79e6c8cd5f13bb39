"""Team transcripts: multi-agent runs where each message is one agent's turn.

Recognised by content (before OpenAI-style chat transcripts):
- AG2 / AutoGen group chats: a list of messages with `name` (the agent), `role` and
  `content`, alone or in a run object under `history` / `messages` (the Who&When
  `Algorithm-Generated` files: CaptainAgent's experts and the `Computer_terminal` executor);
- Magentic-One logs: the agent in `role` (`Orchestrator (thought)`, `Orchestrator (-> WebSurfer)`,
  `WebSurfer`, `ComputerTerminal`, ...), the first message (`human`) the task (the Who&When
  `Hand-Crafted` files);
- the MAST dataset's envelope (`mas_name`, `trace.trajectory` as text): one run, one turn.

Each run is written as a team's instrumentation would send it: a root `invoke_agent` span for
the team, then per agent message an `invoke_agent` span named for the agent with a `chat` span
under it (`gen_ai.agent.name`, the conversation so far as input, each teammate's message in
it named for its agent, the message as output).
Code blocks (```python / ```sh) in a message that an executor answers are the writing agent's
tool calls: an `execute_tool` span per block (`bash` with the script as `command`, `python`
with it as `code`), the executor's reply as result and a non-zero `exitcode: N` as failure;
code another agent speaks after, before any executor ran it, is no call that ran (no span).
An instruction from one agent to another (`Orchestrator (-> WebSurfer)`) is also a hand-off
span (`gen_ai.operation.name` handoff, `handoff from A to B`). The task, when the file names it
apart from the messages (`question`), is the user message the team's first call received.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from typing import Any

from mast_otel.collector.importers import spans as S
from mast_otel.collector.importers.errors import ImportFormatError
from mast_otel.collector.importers.spans import RunSpec, SpanSpec
from mast_otel.processors.code_execution import EXIT_CODE, code_calls, is_executor

FORMAT = "team"
TEAM = "team"
EPOCH_NS = 1_704_067_200 * S.NS  # 2024-01-01T00:00:00Z
RUN_SPACING_NS = 3_600 * S.NS
HUMAN_ROLES = frozenset({"human", "user_proxy"})
INSTRUCTION = re.compile(r"^(?P<agent>[^()]+?)\s*\(\s*->\s*(?P<to>[^()]+?)\s*\)\s*$")
ASIDE = re.compile(r"^(?P<agent>[^()]+?)\s*\((?P<what>[^()]*)\)\s*$")


def recognises(head: bytes) -> bool:
    """JSON holding a team's messages: Who&When / Magentic-One `history`, AG2 messages with
    `name`, or the MAST dataset's `mas_name`."""
    text = head.lstrip()
    if text[:1] not in (b"[", b"{") or b'"resourceSpans"' in head:
        return False
    if b'"mas_name"' in head and b'"trajectory"' in head:
        return True
    if b'"history"' in head and b'"role"' in head and b'"content"' in head:
        return True
    if b'"tool_calls"' in head:
        return False
    return (
        b'"role"' in head
        and b'"name"' in head
        and (b"exitcode:" in head or b"Orchestrator (" in head or b'"Computer_terminal"' in head)
    )


def read(path: str) -> Iterator[Any]:
    """The OTLP export requests of the file's runs, one per run."""
    for run in runs(path):
        yield S.request_for(run)


def runs(path: str) -> Iterator[RunSpec]:
    """The file's runs, as spans."""
    with open(path, "rb") as handle:
        raw = handle.read()
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ImportFormatError(f"{path}: not a JSON team transcript ({exc})") from exc
    digest = hashlib.sha256(raw).hexdigest()[:16]
    name = os.path.basename(path)
    objects = doc if isinstance(doc, list) and doc and not _is_message(doc[0]) else [doc]
    for position, obj in enumerate(objects):
        yield build_run(obj, position, f"{path} run {position}", source=name, digest=digest)


def _is_message(item: Any) -> bool:
    return isinstance(item, dict) and isinstance(item.get("role"), str) and "content" in item


def turns(obj: Any, where: str) -> tuple[list[tuple[str, str, str]], str, dict[str, Any]]:
    """((agent, addressee, text) per message, task, run object) of one run."""
    meta: dict[str, Any] = obj if isinstance(obj, dict) else {}
    if isinstance(obj, list):
        messages: Any = obj
    elif "mas_name" in meta:
        trace = meta.get("trace") if isinstance(meta.get("trace"), dict) else {}
        text = trace.get("trajectory") if isinstance(trace, dict) else None
        agent = str(meta.get("mas_name") or TEAM)
        return [(agent, "", text if isinstance(text, str) else "")], "", meta
    else:
        messages = next(
            (meta[key] for key in ("history", "messages", "chat_history") if key in meta), None
        )
    if not isinstance(messages, list) or not messages:
        raise ImportFormatError(f"{where}: a team run needs a non-empty list of messages")
    out = []
    for index, message in enumerate(messages):
        if not _is_message(message):
            raise ImportFormatError(f"{where}, message {index}: expected role and content")
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        role = message["role"].strip()
        name = message.get("name")
        if isinstance(name, str) and name.strip():
            out.append((name.strip(), "", text))
            continue
        instruction = INSTRUCTION.match(role)
        if instruction:
            out.append((instruction["agent"].strip(), instruction["to"].strip(), text))
            continue
        aside = ASIDE.match(role)
        out.append(((aside["agent"] if aside else role).strip(), "", text))
    task = meta.get("question")
    return out, task if isinstance(task, str) else "", meta


def build_run(
    obj: Any, position: int, where: str, *, source: str = "", digest: str = ""
) -> RunSpec:
    """The spans of one team run."""
    messages, task, meta = turns(obj, where)
    trace_id = S.stable_hex_trace(FORMAT, digest, str(position))
    start = EPOCH_NS + position * RUN_SPACING_NS

    def at(index: int, offset_ms: int = 0) -> int:
        return start + index * S.NS + offset_ms * 1_000_000

    root_id = S.span_id_for(trace_id, "root")
    root_attrs: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": TEAM,
        S.MESSAGE_INDEX: 0,
        S.RUN_INDEX: position,
        S.FORMAT: FORMAT,
    }
    if source:
        root_attrs[S.SOURCE] = source
    correct = meta.get("is_correct", meta.get("is_corrected"))
    if isinstance(correct, bool):
        root_attrs["mast.run.outcome"] = "success" if correct else "failure"
    spans = [SpanSpec(root_id, f"invoke_agent {TEAM}", at(0), at(len(messages)), "", root_attrs)]

    history: list[dict[str, Any]] = []
    opening = messages[0] if messages else ("", "", "")
    # The task given apart is the user message the team's first call received, unless the
    # opening message is the human's and says it already.
    if task and not (opening[0].lower() in HUMAN_ROLES and task.strip() in opening[2]):
        history.append({"role": "user", "parts": [S.text_part(task)]})
    open_calls: list[SpanSpec] = []
    asked: tuple[SpanSpec, dict[str, Any]] | None = None  # the message that wrote them
    for index, (agent, addressee, text) in enumerate(messages):
        if agent.lower() in HUMAN_ROLES or (index == 0 and agent.lower() == "user"):
            history.append({"role": "user", "parts": [S.text_part(text)]})
            continue
        if open_calls and is_executor(agent, text):
            exit_code = EXIT_CODE.search(text[:200])
            failed = exit_code is not None and exit_code["code"] != "0"
            for call in open_calls:
                call.attributes["gen_ai.tool.call.result"] = text
                call.attributes[S.RESULT_MESSAGE_INDEX] = index
                call.end_ns = at(index, 1)
                if failed:
                    call.error = S.cut(text.strip(), 500)
            history.append(
                {
                    "role": "tool",
                    "parts": [
                        S.tool_response_part(str(c.attributes["gen_ai.tool.call.id"]), text)
                        for c in open_calls
                    ],
                }
            )
            open_calls = []
            continue
        if is_executor(agent, text):
            # An executor with nothing to run: its reply is a teammate's turn, named.
            history.append({"role": "assistant", "name": agent, "parts": [S.text_part(text)]})
            continue
        if open_calls:
            _unrun(spans, open_calls, asked)
        open_calls = []
        turn_id = S.span_id_for(trace_id, "turn", str(index))
        spans.append(
            SpanSpec(
                turn_id,
                f"invoke_agent {agent}",
                at(index),
                at(index, 900),
                root_id,
                {
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": agent,
                    S.MESSAGE_INDEX: index,
                },
            )
        )
        calls = code_calls(text)
        call_ids = [f"call_{index}_{offset}" for offset in range(len(calls))]
        parts: list[dict[str, Any]] = [S.text_part(text)] if text else []
        parts += [
            S.tool_call_part(cid, name, args)
            for cid, (name, args) in zip(call_ids, calls, strict=True)
        ]
        finish = "tool_call" if calls else "stop"
        chat = SpanSpec(
            S.span_id_for(trace_id, "message", str(index)),
            "chat",
            at(index, 1),
            at(index, 500),
            turn_id,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.agent.name": agent,
                "gen_ai.input.messages": S.input_messages(history),
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": parts, "finish_reason": finish}],
                    ensure_ascii=False,
                ),
                "gen_ai.response.finish_reasons": [finish],
                S.MESSAGE_INDEX: index,
            },
        )
        spans.append(chat)
        said = {"role": "assistant", "name": agent, "parts": parts}
        history.append(said)
        asked = (chat, said)
        for offset, ((name, args), call_id) in enumerate(zip(calls, call_ids, strict=True)):
            tool = SpanSpec(
                S.span_id_for(trace_id, "call", str(index), str(offset)),
                f"execute_tool {name}",
                at(index, 500 + offset),
                at(index, 500 + offset),
                turn_id,
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.agent.name": agent,
                    "gen_ai.tool.name": name,
                    "gen_ai.tool.call.id": call_id,
                    "gen_ai.tool.type": "function",
                    "gen_ai.tool.call.arguments": json.dumps(args, ensure_ascii=False),
                    S.MESSAGE_INDEX: index,
                },
            )
            spans.append(tool)
            open_calls.append(tool)
        if addressee:
            spans.append(
                SpanSpec(
                    S.span_id_for(trace_id, "handoff", str(index)),
                    f"handoff from {agent} to {addressee}",
                    at(index, 600),
                    at(index, 600),
                    turn_id,
                    {
                        "gen_ai.operation.name": "handoff",
                        "gen_ai.agent.name": agent,
                        S.MESSAGE_INDEX: index,
                    },
                )
            )
    return RunSpec(trace_id, spans, service="imported-team", label=where)


def _unrun(
    spans: list[SpanSpec],
    calls: list[SpanSpec],
    asked: tuple[SpanSpec, dict[str, Any]] | None,
) -> None:
    """Code another agent spoke after, before any executor ran it, was never a call that ran:
    its spans go, and the message that wrote it asked for no call (its code stays text)."""
    unrun = {id(call) for call in calls}
    spans[:] = [span for span in spans if id(span) not in unrun]
    if asked is None:
        return
    chat, said = asked
    said["parts"] = [part for part in said["parts"] if part.get("type") == "text"]
    chat.attributes["gen_ai.output.messages"] = json.dumps(
        [{"role": "assistant", "parts": said["parts"], "finish_reason": "stop"}],
        ensure_ascii=False,
    )
    chat.attributes["gen_ai.response.finish_reasons"] = ["stop"]
