"""The agent side of a replay: recorded runs played again through a real OpenAI client and a
real instrumentation (or a real agent framework and its own), exported over OTLP to a
collector.

`python -m tests.replay.agent` with, in the environment:
- MAST_REPLAY_DOOR: which instrumentation (`tests.replay.doors.DOORS`);
- MAST_TEST_TRANSPORT / MAST_TEST_ENDPOINT: where the collector listens (grpc or http);
- MAST_REPLAY_DATA: the file of recorded runs (tau-bench's: run objects with `traj`, `reward`);
- MAST_REPLAY_TOOLS: the tool definitions offered on every model call ("" for none);
- MAST_REPLAY_RUNS: which runs, by position in the file ("0,3,17"; all when unset);
- MAST_REPLAY_OUT: where to write what the replay knows of each run (below);
- MAST_REPLAY_LATENCY_S: how long each model answer takes (0 when unset), to replay runs at
  the pace of a real model.

Each run is one trace, played as a tool-calling harness with a simulated user plays it: an
`invoke_agent airline-agent` span around the loop; the messages sent start with the recorded
system prompt and first user turn; every model call is a real Chat Completions request to a
loopback server answering with the run's next recorded assistant message (text and tool
calls); every requested call gets its recorded result as the tool's return; the recorded user
turns that follow an answer are appended to the messages the next call sends. The run ends
where the recording does (a final user turn no model call follows is appended and never sent,
as a harness that stops on it does). The reward goes on the root span as a
`gen_ai.evaluation.result` event. With the door's `tool_spans`, each call runs inside the
agent's own `execute_tool <tool>` span (GenAI conventions; a result starting with `Error` is
the tool's failure, as tau-bench's environment turns exceptions into such results, so the
span's status is an error). The `pydantic-ai` door plays the same run with a pydantic-ai
`Agent` instead of the loop (`replay_pydantic_ai_run`): its model calls, tool calls and spans
are the framework's.

What it writes (JSON): per run its position, trace id, and for every span it started the
message index of the recording the span stands for: a model call's span the assistant message
that call returned, a tool span the assistant message that requested the call, the root 0 (the
importer's `mast.import.message_index` for the same spans). This bookkeeping stays in the
replay: nothing of it is put on the spans.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
import sys
from pathlib import Path
from typing import Any

DOOR = os.environ.get("MAST_REPLAY_DOOR", "openai-v2-span")
os.environ.pop("OTEL_SEMCONV_STABILITY_OPT_IN", None)
os.environ.pop("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", None)
if DOOR.startswith("openai-v2") and not DOOR.startswith("openai-v2-events"):
    os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "span_only"
elif DOOR.startswith("openai-v2-events"):
    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"
os.environ["TRACELOOP_TELEMETRY"] = "false"
os.environ["TRACELOOP_TRACE_CONTENT"] = "true"

from tests.frameworks import agent_side  # noqa: E402
from tests.replay.model import RecordedModel  # noqa: E402

SERVICE = "airline-agent"
AGENT = "airline-agent"
MODEL = "gpt-4o"
# The recording's message index the span being started stands for (see the docstring).
POSITION: contextvars.ContextVar[int] = contextvars.ContextVar("replay_position", default=0)
BATCH = {"max_export_batch_size": 32, "max_queue_size": 1 << 17, "schedule_delay_millis": 200}


class Bookkeeper:
    """A span processor noting, for every span started, its trace and the recording's message
    index it stands for (POSITION when it started)."""

    def __init__(self) -> None:
        self.spans: dict[str, dict[str, int]] = {}

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        context = span.get_span_context()
        trace_id = format(context.trace_id, "032x")
        self.spans.setdefault(trace_id, {})[format(context.span_id, "016x")] = POSITION.get()

    def on_end(self, span: Any) -> None:
        pass

    def _on_ending(self, span: Any) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def door_setup(door: str, book: Bookkeeper) -> tuple[Any, Any, bool]:
    """Instrument the OpenAI client (or pydantic-ai) for `door`: (tracer provider, logger
    provider or None, whether the agent wraps its tool calls in spans of its own)."""
    if door == "openllmetry":
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from traceloop.sdk import Traceloop
        from traceloop.sdk.instruments import Instruments

        Traceloop.init(
            app_name=SERVICE,
            telemetry_enabled=False,
            processor=[book, BatchSpanProcessor(agent_side.span_exporter(), **BATCH)],  # type: ignore[list-item]
            instruments={Instruments.OPENAI},
        )
        from opentelemetry import trace

        return trace.get_tracer_provider(), None, False

    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(book)  # type: ignore[arg-type]
    provider.add_span_processor(BatchSpanProcessor(agent_side.span_exporter(), **BATCH))
    trace.set_tracer_provider(provider)
    if door == "pydantic-ai":
        # The framework's own instrumentation (GenAI conventions, content on the spans).
        from pydantic_ai import Agent
        from pydantic_ai.models.instrumented import InstrumentationSettings

        settings = InstrumentationSettings(tracer_provider=provider, include_content=True)
        Agent.instrument_all(settings)
        return provider, None, False
    if door == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor as OIInstrumentor

        OIInstrumentor().instrument(tracer_provider=provider)
        return provider, None, False
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    logger_provider = None
    if door == "openai-v2-events":
        from opentelemetry._logs import set_logger_provider
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

        logger_provider = LoggerProvider(resource=Resource.create({"service.name": SERVICE}))
        logger_provider.add_log_record_processor(
            BatchLogRecordProcessor(agent_side.log_exporter(), **BATCH)
        )
        set_logger_provider(logger_provider)
    OpenAIInstrumentor().instrument(tracer_provider=provider, logger_provider=logger_provider)
    return provider, logger_provider, door == "openai-v2-tools"


def sent_form(message: dict[str, Any]) -> dict[str, Any]:
    """A recorded system or user message as a harness sends it."""
    return {"role": message["role"], "content": message.get("content") or ""}


def replay_run(
    client: Any, tracer: Any, traj: list[dict[str, Any]], reward: Any, tools: list[Any], spans: bool
) -> None:
    """One recorded run through the client, as one trace (see the module's docstring)."""
    from opentelemetry.trace import Status, StatusCode

    messages: list[dict[str, Any]] = []
    i = 0
    while i < len(traj) and traj[i]["role"] != "assistant":
        messages.append(sent_form(traj[i]))
        i += 1
    offered = {"tools": tools} if tools else {}
    POSITION.set(0)
    with tracer.start_as_current_span(
        f"invoke_agent {AGENT}",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT},
    ) as root:
        while i < len(traj):
            asked = i
            POSITION.set(asked)
            reply = client.chat.completions.create(model=MODEL, messages=messages, **offered)
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            i += 1
            # The results recorded right after this answer (call ids recur within a run).
            answers = []
            while i < len(traj) and traj[i]["role"] == "tool":
                answers.append(traj[i])
                i += 1
            for call in message.tool_calls or []:
                recorded = next((a for a in answers if a.get("tool_call_id") == call.id), None)
                if recorded is None:
                    break  # the recording ends before the call's result
                answers.remove(recorded)
                result = str(recorded.get("content") or "")
                if spans:
                    with tracer.start_as_current_span(
                        f"execute_tool {call.function.name}",
                        attributes={
                            "gen_ai.operation.name": "execute_tool",
                            "gen_ai.tool.name": call.function.name,
                            "gen_ai.tool.call.id": call.id,
                            "gen_ai.tool.type": "function",
                            "gen_ai.tool.call.arguments": call.function.arguments,
                        },
                    ) as tool_span:
                        tool_span.set_attribute("gen_ai.tool.call.result", result)
                        if result.lstrip().startswith("Error"):
                            tool_span.set_status(Status(StatusCode.ERROR, result.strip()[:500]))
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call.id,
                        "name": call.function.name,
                        "content": result,
                    }
                )
            while i < len(traj) and traj[i]["role"] in ("user", "system", "developer"):
                messages.append(sent_form(traj[i]))
                i += 1
        POSITION.set(0)
        add_reward(root, reward)


def add_reward(root: Any, reward: Any) -> None:
    """The run's reward on its root span as a `gen_ai.evaluation.result` event."""
    if isinstance(reward, int | float) and not isinstance(reward, bool):
        root.add_event(
            "gen_ai.evaluation.result",
            {
                "gen_ai.evaluation.name": "task_reward",
                "gen_ai.evaluation.score.value": float(reward),
                "gen_ai.evaluation.score.label": "pass" if reward >= 1.0 else "fail",
            },
        )


def recorded_tools(traj: list[dict[str, Any]], tools: list[Any]) -> list[Any]:
    """pydantic-ai tools from the JSON schemas offered, each returning the result the run
    recorded for the call (found after the assistant message that requested it)."""
    from pydantic_ai import RunContext, Tool

    def make(name: str) -> Any:
        def call(ctx: RunContext[None], **arguments: Any) -> str:
            i = POSITION.get() + 1
            while i < len(traj) and traj[i]["role"] == "tool":
                if traj[i].get("tool_call_id") == ctx.tool_call_id:
                    return str(traj[i].get("content") or "")
                i += 1
            raise LookupError(f"no recorded result for {name} call {ctx.tool_call_id}")

        return call

    made = []
    for tool in tools:
        function = tool.get("function") or tool
        made.append(
            Tool.from_schema(
                make(function["name"]),
                function["name"],
                function.get("description"),
                function.get("parameters") or {"type": "object", "properties": {}},
                takes_ctx=True,
            )
        )
    return made


async def replay_pydantic_ai_run(
    base_url: str, tracer: Any, traj: list[dict[str, Any]], reward: Any, tools: list[Any]
) -> None:
    """One recorded run through a pydantic-ai `Agent`, as one trace: the recorded system prompt
    as the agent's, one agent run per recorded user turn continuing the message history (the
    model calls and tool calls of that turn are the framework's), all under an `invoke_agent`
    span of the harness's own (each agent run would otherwise start a trace of its own). A run
    stops before a model call the recording has no answer for (a run ending on a tool result
    or a user turn), as the other doors' loop does."""
    from openai import AsyncOpenAI
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.usage import UsageLimits

    client = AsyncOpenAI(base_url=base_url, api_key="sk-replay", max_retries=0)
    model = OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client))
    leading = next((i for i, m in enumerate(traj) if m["role"] not in ("system", "developer")), 0)
    system = "\n".join(str(m.get("content") or "") for m in traj[:leading])
    agent = Agent(
        model, name=AGENT, system_prompt=system, tools=recorded_tools(traj, tools), output_type=str
    )
    answers = [i for i, m in enumerate(traj) if m["role"] == "assistant"]
    turns = [i for i, m in enumerate(traj) if m["role"] == "user"]
    history: list[ModelMessage] = []
    asked = 0
    POSITION.set(0)
    with tracer.start_as_current_span(
        f"invoke_agent {AGENT}",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT},
    ) as root:
        for turn in turns:
            if asked >= len(answers) or answers[asked] < turn:
                break  # a user turn the recording ends on, or one already past
            POSITION.set(0)
            async with agent.iter(
                str(traj[turn].get("content") or ""),
                message_history=history or None,
                usage_limits=UsageLimits(request_limit=None),
            ) as run:
                node = run.next_node
                while not Agent.is_end_node(node):
                    if Agent.is_model_request_node(node):
                        if asked >= len(answers):
                            break
                        POSITION.set(answers[asked])
                        asked += 1
                    node = await run.next(node)
                history = run.all_messages()
        POSITION.set(0)
        add_reward(root, reward)
    await client.close()


def main() -> None:
    from openai import OpenAI
    from opentelemetry import trace

    runs = json.loads(Path(os.environ["MAST_REPLAY_DATA"]).read_text("utf-8"))
    tools_path = os.environ.get("MAST_REPLAY_TOOLS", "")
    tools = json.loads(Path(tools_path).read_text("utf-8")) if tools_path else []
    chosen = os.environ.get("MAST_REPLAY_RUNS", "")
    indices = [int(x) for x in chosen.split(",") if x] if chosen else list(range(len(runs)))
    book = Bookkeeper()
    provider, logger_provider, spans = door_setup(DOOR, book)
    tracer = trace.get_tracer("airline_agent")
    model = RecordedModel(float(os.environ.get("MAST_REPLAY_LATENCY_S") or 0)).start()
    out: list[dict[str, Any]] = []
    try:
        for index in indices:
            run = runs[index]
            model.load(index, run["traj"])
            before = set(book.spans)
            if DOOR == "pydantic-ai":
                asyncio.run(
                    replay_pydantic_ai_run(
                        model.base_url(index), tracer, run["traj"], run.get("reward"), tools
                    )
                )
            else:
                client = OpenAI(base_url=model.base_url(index), api_key="sk-replay", max_retries=0)
                replay_run(client, tracer, run["traj"], run.get("reward"), tools, spans)
            (trace_id,) = set(book.spans) - before
            out.append({"index": index, "trace_id": trace_id, "spans": book.spans[trace_id]})
    finally:
        model.stop()
        if logger_provider is not None:
            logger_provider.force_flush()
        flushed = provider.force_flush(120_000)
        if logger_provider is not None:
            logger_provider.shutdown()
        provider.shutdown()
    if model.errors or flushed is False:
        print("\n".join(model.errors[:5]) or "spans were not all exported", file=sys.stderr)
        sys.exit(3)
    Path(os.environ["MAST_REPLAY_OUT"]).write_text(json.dumps(out), "utf-8")
    print(f"REPLAYED {len(out)}", flush=True)


if __name__ == "__main__":
    main()
