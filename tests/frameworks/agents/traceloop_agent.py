"""OpenLLMetry (`traceloop-sdk`): a hand-written SRE agent on the OpenAI client, its workflow,
agent and tools marked with Traceloop's decorators, exported by `Traceloop.init` to the
collector. Runs in its own environment (.venv-traceloop): traceloop-sdk pins an older
OpenTelemetry SDK."""

from __future__ import annotations

import json
import os

os.environ["TRACELOOP_TELEMETRY"] = "false"
os.environ["TRACELOOP_TRACE_CONTENT"] = "true"

from tests.frameworks import agent_side
from tests.frameworks.scenarios import SINGLE_AGENT, TASK, TOOL_DOCS, Cluster

SERVICE = "sre-traceloop"
AGENT = "sre-agent"


def schema(name: str) -> dict:
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
    from traceloop.sdk import Traceloop
    from traceloop.sdk.decorators import agent, tool, workflow

    transport, where = agent_side.endpoint()
    Traceloop.init(
        app_name=SERVICE,
        exporter=agent_side.span_exporter(),
        telemetry_enabled=False,
        disable_batch=False,
    )
    del transport, where
    server = agent_side.model_server()
    client = OpenAI(base_url=server.base_url, api_key="sk-scripted", max_retries=0)
    cluster = Cluster()

    @tool(name="get_pod_status")
    def get_pod_status(deployment: str, namespace: str) -> str:
        return cluster.get_pod_status(deployment, namespace)

    @tool(name="get_logs")
    def get_logs(deployment: str, namespace: str) -> str:
        return cluster.get_logs(deployment, namespace)

    @tool(name="apply_manifest")
    def apply_manifest(manifest: str) -> str:
        return cluster.apply_manifest(manifest)

    @tool(name="restart_deployment")
    def restart_deployment(deployment: str, namespace: str) -> str:
        return cluster.restart_deployment(deployment, namespace)

    tools = {f.__name__: f for f in (get_pod_status, get_logs, apply_manifest, restart_deployment)}

    @agent(name=AGENT)
    def sre_agent(task: str) -> str:
        messages: list[dict] = [
            {"role": "system", "content": "You are an SRE agent for the shop namespace."},
            {"role": "user", "content": task},
        ]
        for _ in range(10):
            reply = client.chat.completions.create(
                model="gpt-4o-mini", messages=messages, tools=[schema(t) for t in tools]
            )
            message = reply.choices[0].message
            if not message.tool_calls:
                return message.content or ""
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                result = tools[call.function.name](**json.loads(call.function.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        return ""

    @workflow(name="sre_incident")
    def incident(task: str) -> tuple[str, str]:
        trace_id = format(trace.get_current_span().get_span_context().trace_id, "032x")
        return trace_id, sre_agent(task)

    runs: dict[str, list[str]] = {}
    for scenario in SINGLE_AGENT:
        server.play(list(scenario.turns))
        cluster.__init__()  # type: ignore[misc]
        trace_id, answer = incident(TASK)
        assert answer == scenario.answer, answer
        runs[scenario.name] = [trace_id]
    server.stop()
    provider = trace.get_tracer_provider()
    provider.force_flush()  # type: ignore[attr-defined]
    from tests.frameworks.scenarios import emit

    emit(runs)


if __name__ == "__main__":
    main()
