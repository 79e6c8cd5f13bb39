"""The agent side of a team replay: Who&When's AG2 group chats (`Algorithm-Generated/N.json`,
written by CaptainAgent's experts and its `Computer_terminal`) played again through real AG2
with its own OpenTelemetry tracing, exported over OTLP to a collector. Runs in .venv-ag2.

`python -m tests.replay.team_agent` with, in the environment:
- MAST_REPLAY_DATA: the folder of the recorded runs (`N.json`: `history` of `name`/`content`
  messages, `system_prompt` per agent, `is_correct`);
- MAST_REPLAY_RUNS: which runs, by file number ("4,8,12");
- MAST_TEST_TRANSPORT / MAST_TEST_ENDPOINT, MAST_REPLAY_OUT, MAST_REPLAY_LATENCY_S: as for
  `tests.replay.agent`.

Each run is one trace: a harness `invoke_agent team` span, the run's outcome on it as a
`gen_ai.evaluation.result` event (every Who&When run failed its task), and under it AG2's own
spans (`instrument_agent` on every agent and the manager, `instrument_llm_wrapper` with
messages captured). The team is built as CaptainAgent builds it: one `ConversableAgent` per
recorded agent, its recorded system prompt as its own, its model the loopback server answering
each agent's recorded message in turn (`tests.replay.model.RecordedTeam`); the
`Computer_terminal` a `UserProxyAgent` that looks for code in the last message only and whose
default reply is CaptainAgent's; a `GroupChat` whose speaker selection is a callable naming
the recorded speakers in order. A `user` agent opens the chat with the file's `question`, and
the first recorded message is its expert's first answer: the run the team importer reads from
the file (the task the user message the team's first call received, every expert's message a
model's answer). CaptainAgent itself has its first expert open the chat with that message
(`initiate_chat`), which no model wrote; its tracing names that expert only on the spans that
end with the chat.

The terminal's code executor is AG2's executor path (the reply function
`_generate_code_execution_reply_using_executor`, which AG2 traces as an `execute_code` span with
the exit code and the output) with an executor that runs nothing: it answers the code blocks
with the exit code and output the terminal's recorded message holds. No code of a recorded run
is ever executed.

What it writes is what `tests.replay.agent` writes, each span mapped to the recorded message it
stands for: a speaker's spans to its message, the terminal's spans while it runs code to the
message whose code it runs (the importer's tool spans carry that message's index), the harness
root to 0.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from tests.frameworks import agent_side
from tests.replay.agent import BATCH, MODEL, POSITION, Bookkeeper, add_reward
from tests.replay.model import RecordedTeam

SERVICE = "ag2-team"
TEAM = "team"
USER = "user"
EXECUTOR = "Computer_terminal"
# AG2's reply format for code it ran (`_generate_code_execution_reply_using_executor`).
EXECUTED = re.compile(
    r"exitcode: (?P<code>-?\d+) \(execution (?:succeeded|failed)\)\nCode output: (?P<output>.*)",
    re.DOTALL,
)
# CaptainAgent's terminal when the last message holds no code (AgentBuilder's default reply).
NO_CODE = (
    "There is no code from the last 1 message for me to execute. Group chat manager should let "
    "other participants to continue the conversation. If the group chat manager want to end the "
    'conversation, you should let other participant reply me only with "TERMINATE"'
)


def recorded_executor(history: list[dict[str, Any]]) -> Any:
    """An AG2 code executor that runs nothing: asked to run the code blocks of the message
    before the terminal's recorded turn, it answers with the exit code and output that turn
    recorded."""
    from autogen.coding import CodeBlock, CodeExtractor, CodeResult, MarkdownCodeExtractor

    class RecordedExecutor:
        @property
        def code_extractor(self) -> CodeExtractor:
            return MarkdownCodeExtractor()

        def execute_code_blocks(self, code_blocks: list[CodeBlock]) -> CodeResult:
            recorded = str(history[POSITION.get() + 1].get("content") or "")
            found = EXECUTED.match(recorded)
            if found is None:
                raise LookupError(f"message {POSITION.get() + 1} records no code execution")
            return CodeResult(exit_code=int(found["code"]), output=found["output"])

        def restart(self) -> None:
            pass

    return RecordedExecutor()


def replay_team_run(doc: dict[str, Any], base_url: str, tracer: Any, provider: Any) -> None:
    """One recorded group chat through AG2, as one trace (see the module's docstring)."""
    from autogen import ConversableAgent, GroupChat, GroupChatManager, UserProxyAgent
    from autogen.opentelemetry import instrument_agent

    history: list[dict[str, Any]] = doc["history"]
    prompts: dict[str, str] = doc.get("system_prompt") or {}
    llm_config = {
        "config_list": [{"model": MODEL, "api_key": "sk-replay", "base_url": base_url}],
        "cache_seed": None,
    }

    def never(message: dict[str, Any]) -> bool:
        return False  # the recording says where the chat ends

    agents: dict[str, Any] = {}
    for message in history:
        name = message["name"]
        if name in agents:
            continue
        if name == EXECUTOR:
            agents[name] = UserProxyAgent(
                name,
                llm_config=False,
                human_input_mode="NEVER",
                code_execution_config={
                    "executor": recorded_executor(history),
                    "last_n_messages": 1,
                },
                default_auto_reply=NO_CODE,
                is_termination_msg=never,
            )
        else:
            agents[name] = ConversableAgent(
                name,
                system_message=prompts.get(name) or f"You are {name}.",
                llm_config=llm_config,
                human_input_mode="NEVER",
                is_termination_msg=never,
            )
    user = ConversableAgent(USER, llm_config=False, human_input_mode="NEVER")
    spoken = iter(range(len(history)))

    def next_speaker(last_speaker: Any, groupchat: Any) -> Any:
        index = next(spoken, None)
        if index is None:
            return None
        name = history[index]["name"]
        running = name == EXECUTOR and EXECUTED.match(str(history[index]["content"] or ""))
        POSITION.set(index - 1 if running else index)
        return groupchat.agent_by_name(name)

    chat = GroupChat(
        agents=[user, *agents.values()],
        messages=[],
        max_round=len(history) + 1,
        speaker_selection_method=next_speaker,
        allow_repeat_speaker=True,
    )
    manager = GroupChatManager(chat, llm_config=False, is_termination_msg=never)
    for agent in (user, *agents.values(), manager):
        instrument_agent(agent, tracer_provider=provider)
    POSITION.set(0)
    with tracer.start_as_current_span(
        f"invoke_agent {TEAM}",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": TEAM},
    ) as root:
        user.initiate_chat(manager, message=task_of(doc), silent=True)
        POSITION.set(0)
        add_reward(root, 1.0 if doc.get("is_correct") else 0.0)


def task_of(doc: dict[str, Any]) -> str:
    """The task the user gives the team: the file's `question`."""
    return str(doc.get("question") or "")


def recorded(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The chat as the model server checks it: the user's task, then the recorded messages."""
    return [{"name": USER, "content": task_of(doc)}, *doc["history"]]


def main() -> None:
    from autogen.opentelemetry import instrument_llm_wrapper
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    folder = Path(os.environ["MAST_REPLAY_DATA"])
    numbers = [int(x) for x in os.environ.get("MAST_REPLAY_RUNS", "").split(",") if x]
    if not numbers:
        numbers = sorted(int(path.stem) for path in folder.glob("*.json"))
    book = Bookkeeper()
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(book)  # type: ignore[arg-type]
    provider.add_span_processor(BatchSpanProcessor(agent_side.span_exporter(), **BATCH))
    trace.set_tracer_provider(provider)
    instrument_llm_wrapper(tracer_provider=provider, capture_messages=True)
    tracer = trace.get_tracer("team_replay")
    model = RecordedTeam(float(os.environ.get("MAST_REPLAY_LATENCY_S") or 0)).start()
    out: list[dict[str, Any]] = []
    try:
        for number in numbers:
            doc = json.loads((folder / f"{number}.json").read_text("utf-8"))
            model.load(number, recorded(doc))
            before = set(book.spans)
            replay_team_run(doc, model.base_url(number), tracer, provider)
            (trace_id,) = set(book.spans) - before
            out.append({"index": number, "trace_id": trace_id, "spans": book.spans[trace_id]})
    finally:
        model.stop()
        flushed = provider.force_flush(120_000)
        provider.shutdown()
    if model.errors or flushed is False:
        print("\n".join(model.errors[:5]) or "spans were not all exported", file=sys.stderr)
        sys.exit(3)
    Path(os.environ["MAST_REPLAY_OUT"]).write_text(json.dumps(out), "utf-8")
    print(f"REPLAYED {len(out)}", flush=True)


if __name__ == "__main__":
    main()
