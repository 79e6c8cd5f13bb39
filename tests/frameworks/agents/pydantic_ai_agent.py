"""pydantic-ai: an `Agent` on `OpenAIChatModel` (Chat Completions) with its own OpenTelemetry
instrumentation (`InstrumentationSettings`, GenAI conventions)."""

from __future__ import annotations

from tests.frameworks import agent_side
from tests.frameworks.scenarios import SINGLE_AGENT, TASK, Cluster

SERVICE = "sre-pydantic"
AGENT = "sre-agent"


def main() -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    provider, recorder = agent_side.tracer_provider(SERVICE)
    server = agent_side.model_server()
    cluster = Cluster()
    model = OpenAIChatModel(
        "gpt-4o-mini", provider=OpenAIProvider(base_url=server.base_url, api_key="sk-scripted")
    )
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider, include_content=True))
    agent = Agent(model, name=AGENT, instructions="You are an SRE agent for the shop namespace.")

    @agent.tool_plain
    def get_pod_status(deployment: str, namespace: str) -> str:
        """Readiness and state of a deployment's pods."""
        return cluster.get_pod_status(deployment, namespace)

    @agent.tool_plain
    def get_logs(deployment: str, namespace: str) -> str:
        """Recent logs of a deployment's pods."""
        return cluster.get_logs(deployment, namespace)

    @agent.tool_plain
    def apply_manifest(manifest: str) -> str:
        """Apply a Kubernetes manifest (YAML) to the cluster."""
        return cluster.apply_manifest(manifest)

    @agent.tool_plain
    def restart_deployment(deployment: str, namespace: str) -> str:
        """Restart a deployment's pods."""
        return cluster.restart_deployment(deployment, namespace)

    runs: dict[str, list[str]] = {}
    for scenario in SINGLE_AGENT:
        server.play(list(scenario.turns))
        cluster.__init__()  # type: ignore[misc]
        with recorder.scenario(runs, scenario.name):
            result = agent.run_sync(TASK)
        assert result.output == scenario.answer, result.output
    server.stop()
    agent_side.finish(provider, runs)


if __name__ == "__main__":
    main()
