"""A scripted OpenAI-compatible model server on loopback: Chat Completions (plain and streamed)
and the Responses API.

The test sets a script per run: the model turns in order, each a list of tool calls or the
final answer. Which turn a request gets is the number of tool results (or model turns) in its
conversation, so the server keeps no per-conversation state and any framework's retries or
extra requests (a hand-off carries the history along) land on the same turn.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "gpt-4o-mini"


@dataclass(frozen=True)
class Call:
    tool: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Turn:
    calls: tuple[Call, ...] = ()
    answer: str = ""


@dataclass
class Script:
    turns: list[Turn] = field(default_factory=list)
    # A team's script: each agent's own turns, the agent named in its instructions
    # ("You are NAME."), its turn the number of its own earlier answers in the conversation
    # (assistant messages named for it or for no one: a teammate's are named for the teammate).
    agents: dict[str, list[Turn]] = field(default_factory=dict)

    def turn(self, tool_results: int) -> Turn:
        if tool_results < len(self.turns):
            return self.turns[tool_results]
        return self.turns[-1] if self.turns and not self.turns[-1].calls else Turn(answer="done")

    def agent_turn(self, body: dict[str, Any]) -> Turn | None:
        """The turn of the team agent whose instructions the request carries (None outside a
        team's script)."""
        messages = body.get("messages") or []
        system = " ".join(str(m.get("content")) for m in messages if m.get("role") == "system")
        for name, turns in self.agents.items():
            if f"You are {name}." in system:
                own = sum(
                    1
                    for m in messages
                    if m.get("role") == "assistant" and m.get("name") in (None, name)
                )
                return turns[own] if own < len(turns) else Turn(answer="TERMINATE")
        return None


def _chat_tool_results(body: dict[str, Any]) -> int:
    """Tool results so far; frameworks that send them back as user messages (smolagents'
    "Observation:") are counted by the model turns before them."""
    messages = body.get("messages") or []
    results = sum(1 for m in messages if m.get("role") in ("tool", "function"))
    return max(results, sum(1 for m in messages if m.get("role") == "assistant"))


def _responses_tool_results(body: dict[str, Any]) -> int:
    items = body.get("input")
    if not isinstance(items, list):
        return 0
    return sum(1 for i in items if isinstance(i, dict) and i.get("type") == "function_call_output")


class ModelServer:
    """Serves the current script; `requests` keeps every request body for assertions."""

    def __init__(self) -> None:
        self.script = Script()
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._ids = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._json({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append({"path": self.path, "body": body})
                if self.path.rstrip("/").endswith("/chat/completions"):
                    turn = server.script.agent_turn(body) or server.script.turn(
                        _chat_tool_results(body)
                    )
                    if body.get("stream"):
                        self._sse(server._chat_chunks(body, turn))
                    else:
                        self._json(server._chat(body, turn))
                elif self.path.rstrip("/").endswith("/responses"):
                    turn = server.script.turn(_responses_tool_results(body))
                    self._json(server._response(body, turn))
                else:
                    self.send_error(404)

            def _json(self, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, chunks: list[dict[str, Any]]) -> None:
                data = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks)
                data += b"data: [DONE]\n\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def start(self) -> ModelServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    def play(self, turns: list[Turn]) -> None:
        self.script = Script(list(turns))

    def play_team(self, agents: dict[str, list[Turn]]) -> None:
        """Each team agent's own turns (see `Script.agent_turn`)."""
        self.script = Script(agents={name: list(turns) for name, turns in agents.items()})

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            self._ids += 1
            return f"{prefix}_{self._ids:06d}"

    @staticmethod
    def _usage(body: dict[str, Any]) -> tuple[int, int]:
        return 20 + len(json.dumps(body)) // 40, 12

    def _chat(self, body: dict[str, Any], turn: Turn) -> dict[str, Any]:
        prompt, completion = self._usage(body)
        message: dict[str, Any] = {"role": "assistant", "content": turn.answer or None}
        if turn.calls:
            message["tool_calls"] = [
                {
                    "id": self._next_id("call"),
                    "type": "function",
                    "function": {"name": c.tool, "arguments": json.dumps(c.arguments)},
                }
                for c in turn.calls
            ]
        return {
            "id": self._next_id("chatcmpl"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if turn.calls else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }

    def _chat_chunks(self, body: dict[str, Any], turn: Turn) -> list[dict[str, Any]]:
        whole = self._chat(body, turn)
        message = whole["choices"][0]["message"]
        delta: dict[str, Any] = {"role": "assistant", "content": message["content"]}
        if "tool_calls" in message:
            delta["tool_calls"] = [dict(c, index=i) for i, c in enumerate(message["tool_calls"])]
        base = {k: whole[k] for k in ("id", "created", "model")}
        base["object"] = "chat.completion.chunk"
        return [
            base | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            base
            | {
                "choices": [
                    {"index": 0, "delta": {}, "finish_reason": whole["choices"][0]["finish_reason"]}
                ],
            },
            base | {"choices": [], "usage": whole["usage"]},
        ]

    def _response(self, body: dict[str, Any], turn: Turn) -> dict[str, Any]:
        prompt, completion = self._usage(body)
        output: list[dict[str, Any]] = []
        for c in turn.calls:
            call_id = self._next_id("call")
            output.append(
                {
                    "type": "function_call",
                    "id": "fc_" + call_id,
                    "call_id": call_id,
                    "name": c.tool,
                    "arguments": json.dumps(c.arguments),
                    "status": "completed",
                }
            )
        if not turn.calls:
            output.append(
                {
                    "type": "message",
                    "id": self._next_id("msg"),
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": turn.answer, "annotations": []}],
                }
            )
        return {
            "id": self._next_id("resp"),
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "model": body.get("model") or MODEL,
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": body.get("tool_choice") or "auto",
            "tools": body.get("tools") or [],
            "instructions": body.get("instructions"),
            "metadata": {},
            "temperature": 1.0,
            "top_p": 1.0,
            "error": None,
            "incomplete_details": None,
            "usage": {
                "input_tokens": prompt,
                "output_tokens": completion,
                "total_tokens": prompt + completion,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }
