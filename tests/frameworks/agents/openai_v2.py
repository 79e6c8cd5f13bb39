"""A hand-written SRE agent on the OpenAI client, instrumented by the official
`opentelemetry-instrumentation-openai-v2`; the agent adds its own agent and tool spans (GenAI
conventions). `MAST_TEST_CONTENT=span` records messages on the spans (latest conventions),
`events` sends them as log records (the instrumentation's default conventions)."""

from __future__ import annotations

import json
import os

CONTENT = os.environ.get("MAST_TEST_CONTENT", "span")
if CONTENT == "span":
    os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "span_only"
else:
    os.environ.pop("OTEL_SEMCONV_STABILITY_OPT_IN", None)
    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"

from tests.frameworks import agent_side  # noqa: E402
from tests.frameworks.scenarios import SINGLE_AGENT, TASK, TOOL_DOCS, Cluster  # noqa: E402

AGENT = "sre-agent"
TOOLS = ("get_pod_status", "get_logs", "apply_manifest", "restart_deployment")


def tool_schema(name: str) -> dict:
    if name == "apply_manifest":
        properties = {"manifest": {"type": "string"}}
    else:
        properties = {"deployment": {"type": "string"}, "namespace": {"type": "string"}}
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": TOOL_DOCS[name],
            "parameters": {"type": "object", "properties": properties},
        },
    }


def main() -> None:
    from openai import OpenAI
    from opentelemetry import trace
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    provider, recorder = agent_side.tracer_provider(AGENT)
    logger_provider = None
    if CONTENT == "events":
        from opentelemetry._logs import set_logger_provider
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
        from opentelemetry.sdk.resources import Resource

        logger_provider = LoggerProvider(resource=Resource.create({"service.name": AGENT}))
        logger_provider.add_log_record_processor(
            BatchLogRecordProcessor(agent_side.log_exporter(), schedule_delay_millis=200)
        )
        set_logger_provider(logger_provider)
    OpenAIInstrumentor().instrument(tracer_provider=provider, logger_provider=logger_provider)
    server = agent_side.model_server()
    client = OpenAI(base_url=server.base_url, api_key="sk-scripted", max_retries=0)
    tracer = trace.get_tracer("sre_agent")
    runs: dict[str, list[str]] = {}
    for scenario in SINGLE_AGENT:
        server.play(list(scenario.turns))
        cluster = Cluster()
        with (
            recorder.scenario(runs, scenario.name),
            tracer.start_as_current_span("sre_agent.run"),
            tracer.start_as_current_span(
                f"invoke_agent {AGENT}",
                attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT},
            ) as agent_span,
        ):
            messages: list[dict] = [
                {"role": "system", "content": "You are an SRE agent for the shop namespace."},
                {"role": "user", "content": TASK},
            ]
            for _ in range(10):
                reply = client.chat.completions.create(
                    model="gpt-4o-mini", messages=messages, tools=[tool_schema(t) for t in TOOLS]
                )
                message = reply.choices[0].message
                if not message.tool_calls:
                    agent_span.set_attribute(
                        "gen_ai.output.messages",
                        json.dumps(
                            [
                                {
                                    "role": "assistant",
                                    "parts": [{"type": "text", "content": message.content}],
                                }
                            ]
                        ),
                    )
                    break
                messages.append(message.model_dump(exclude_none=True))
                for call in message.tool_calls:
                    name, arguments = call.function.name, call.function.arguments
                    with tracer.start_as_current_span(
                        f"execute_tool {name}",
                        attributes={
                            "gen_ai.operation.name": "execute_tool",
                            "gen_ai.tool.name": name,
                            "gen_ai.tool.call.id": call.id,
                            "gen_ai.tool.call.arguments": arguments,
                        },
                    ) as tool_span:
                        result = getattr(cluster, name)(**json.loads(arguments))
                        tool_span.set_attribute("gen_ai.tool.call.result", result)
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    server.stop()
    if logger_provider is not None:
        logger_provider.force_flush()
        logger_provider.shutdown()
    agent_side.finish(provider, runs)


if __name__ == "__main__":
    main()
