"""A model server on loopback that answers with a recorded run's assistant turns.

Each run has a path of its own (`/run/<index>/v1`, the OpenAI client's `base_url`): a Chat
Completions request there gets the run's k-th assistant message, k being the number of
assistant messages the request already carries, so the server keeps no per-conversation state.
It also checks that the request's messages are the recorded run's messages up to that turn
(roles, texts, call ids, call arguments as JSON values, tool results) and answers 409 with the
first difference otherwise: a replay that drifted from the recording fails loudly instead of
producing other spans. `RecordedTeam` serves a group chat's recorded messages to its agents the
same way (see there).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "gpt-4o"


def content_text(content: Any) -> str:
    """A message's text (a string, a list of text parts, or nothing)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
    return "\n".join(texts)


def assistant_positions(traj: list[dict[str, Any]]) -> list[int]:
    """The message index of every assistant turn, in order: the model's k-th answer."""
    return [i for i, m in enumerate(traj) if m.get("role") == "assistant"]


def _arguments(text: Any) -> Any:
    """A call's arguments as the JSON value they spell (a framework sending the answered call
    back may write it compactly), or as sent when they are not JSON."""
    try:
        return json.dumps(json.loads(text), sort_keys=True)
    except (TypeError, ValueError):
        return text


def _shape(message: dict[str, Any]) -> tuple[Any, ...]:
    """What must agree between a sent message and the recorded one."""
    role = message.get("role")
    calls = tuple(
        (
            c.get("id"),
            (c.get("function") or {}).get("name"),
            _arguments((c.get("function") or {}).get("arguments")),
        )
        for c in message.get("tool_calls") or []
    )
    call_id = message.get("tool_call_id") if role == "tool" else None
    return role, content_text(message.get("content")), calls, call_id


def first_difference(sent: list[dict[str, Any]], recorded: list[dict[str, Any]]) -> str:
    """'' when the request's messages are the recorded prefix, else where they part."""
    if len(sent) != len(recorded):
        return f"{len(sent)} messages sent, {len(recorded)} recorded before this turn"
    for i, (a, b) in enumerate(zip(sent, recorded, strict=True)):
        if _shape(a) != _shape(b):
            return f"message {i}: sent {_shape(a)!r:.300} recorded {_shape(b)!r:.300}"
    return ""


class RecordedModel:
    """Serves the recorded assistant turns of the runs given to `load`."""

    def __init__(self, latency_s: float = 0.0) -> None:
        self.latency_s = latency_s  # how long each answer takes, as a real model's would
        self._runs: dict[int, list[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._ids = 0
        self.errors: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes: without this, each answer waits out the
            # peer's delayed acknowledgement (tens of milliseconds a model call).
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                parts = self.path.strip("/").split("/")
                if len(parts) < 4 or parts[0] != "run" or parts[-1] != "completions":
                    self.send_error(404)
                    return
                status, payload = server.answer(int(parts[1]), body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    def load(self, index: int, traj: list[dict[str, Any]]) -> None:
        self._runs[index] = traj

    def base_url(self, index: int) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/run/{index}/v1"

    def start(self) -> RecordedModel:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    def answer(self, index: int, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        traj = self._runs.get(index)
        if traj is None:
            return 404, {"error": {"message": f"no run {index}"}}
        recorded = self.next_turn(traj, body.get("messages") or [])
        if isinstance(recorded, str):
            return self._refuse(index, recorded)
        if self.latency_s > 0:
            time.sleep(self.latency_s)
        return 200, self._completion(body, recorded)

    def next_turn(
        self, traj: list[dict[str, Any]], sent: list[dict[str, Any]]
    ) -> dict[str, Any] | str:
        """The recorded assistant message answering `sent`, or why none does."""
        turn = sum(1 for m in sent if m.get("role") == "assistant")
        positions = assistant_positions(traj)
        if turn >= len(positions):
            return f"asked for turn {turn}; the run has {len(positions)}"
        position = positions[turn]
        return first_difference(sent, traj[:position]) or traj[position]

    def _refuse(self, index: int, why: str) -> tuple[int, dict[str, Any]]:
        message = f"run {index}: the replay left the recording: {why}"
        with self._lock:
            self.errors.append(message)
        return 409, {"error": {"message": message, "type": "replay_mismatch"}}

    def _completion(self, body: dict[str, Any], recorded: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._ids += 1
            ident = f"chatcmpl-replay{self._ids:07d}"
        calls = recorded.get("tool_calls") or []
        message: dict[str, Any] = {
            "role": "assistant",
            "content": recorded.get("content")
            if isinstance(recorded.get("content"), str)
            else None,
        }
        if calls:
            message["tool_calls"] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {
                        "name": call["function"]["name"],
                        "arguments": call["function"].get("arguments") or "",
                    },
                }
                for call in calls
            ]
        prompt = 20 + len(json.dumps(body.get("messages") or [])) // 4
        completion = 1 + len(json.dumps(message)) // 4
        return {
            "id": ident,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }


class RecordedTeam(RecordedModel):
    """Serves a team run's recorded messages to its agents (a group chat's `history` of `name`
    and `content`): a request whose conversation holds k messages besides the instructions
    gets message k, which must be the requesting agent's; the conversation must be the
    recording up to it as that agent holds it (its own messages as the assistant's, the
    others' as the user's)."""

    def next_turn(
        self, traj: list[dict[str, Any]], sent: list[dict[str, Any]]
    ) -> dict[str, Any] | str:
        said = [m for m in sent if m.get("role") != "system"]
        turn = len(said)
        if turn >= len(traj):
            return f"asked for message {turn}; the run has {len(traj)}"
        speaker = traj[turn].get("name")
        seen = [
            {
                "role": "assistant" if m.get("name") == speaker else "user",
                "content": m.get("content"),
            }
            for m in traj[:turn]
        ]
        differs = first_difference(said, seen)
        if differs:
            return differs
        names = [m.get("name") for m in said]
        recorded = [m.get("name") for m in traj[:turn]]
        if names != recorded:
            return f"message {turn}: sent names {names}, recorded {recorded}"
        return {"role": "assistant", "content": traj[turn].get("content") or ""}
