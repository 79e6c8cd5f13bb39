"""The OpenAI Agents SDK (`openai-agents`, Responses API) instrumented by
`openinference-instrumentation-openai-agents`: one SRE agent for the single-agent scenarios,
and a triage agent handing off to a fixer."""

from __future__ import annotations

from tests.frameworks import agent_side
from tests.frameworks.scenarios import SINGLE_AGENT, TASK, Cluster, handoff

SERVICE = "sre-crew"


def main() -> None:
    from agents import (
        Agent,
        Runner,
        function_tool,
        set_default_openai_api,
        set_default_openai_client,
    )
    from openai import AsyncOpenAI
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    provider, recorder = agent_side.tracer_provider(SERVICE)
    OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
    server = agent_side.model_server()
    set_default_openai_client(AsyncOpenAI(base_url=server.base_url, api_key="sk-scripted"))
    set_default_openai_api("responses")

    cluster = Cluster()

    @function_tool
    def get_pod_status(deployment: str, namespace: str) -> str:
        """Readiness and state of a deployment's pods."""
        return cluster.get_pod_status(deployment, namespace)

    @function_tool
    def get_logs(deployment: str, namespace: str) -> str:
        """Recent logs of a deployment's pods."""
        return cluster.get_logs(deployment, namespace)

    @function_tool
    def apply_manifest(manifest: str) -> str:
        """Apply a Kubernetes manifest (YAML) to the cluster."""
        return cluster.apply_manifest(manifest)

    @function_tool
    def restart_deployment(deployment: str, namespace: str) -> str:
        """Restart a deployment's pods."""
        return cluster.restart_deployment(deployment, namespace)

    tools = [get_pod_status, get_logs, apply_manifest, restart_deployment]
    sre = Agent(
        name="sre-agent",
        instructions="You fix the shop namespace.",
        tools=tools,
        model="gpt-4o-mini",
    )
    fixer = Agent(
        name="fixer", instructions="You fix what triage found.", tools=tools, model="gpt-4o-mini"
    )
    triage = Agent(
        name="triage",
        instructions="Find the cause, then hand off to the fixer.",
        tools=[get_logs, get_pod_status],
        handoffs=[fixer],
        model="gpt-4o-mini",
    )
    runs: dict[str, list[str]] = {}
    plan = [*((s, sre) for s in SINGLE_AGENT), (handoff("transfer_to_fixer"), triage)]
    for scenario, agent in plan:
        server.play(list(scenario.turns))
        cluster.__init__()  # type: ignore[misc]
        with recorder.scenario(runs, scenario.name):
            result = Runner.run_sync(agent, TASK, max_turns=12)
        assert result.final_output == scenario.answer, result.final_output
    server.stop()
    agent_side.finish(provider, runs)


if __name__ == "__main__":
    main()
