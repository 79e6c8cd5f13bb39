"""Strands Agents on its OpenAI model provider (Chat Completions, streamed), with its own
OpenTelemetry tracing (GenAI conventions; message content as span events). Runs in its own
environment (.venv-strands): strands-agents pins an older OpenTelemetry SDK and openai."""

from __future__ import annotations

from tests.frameworks import agent_side
from tests.frameworks.scenarios import SINGLE_AGENT, TASK, Cluster

SERVICE = "sre-strands"
AGENT = "sre-agent"


def main() -> None:
    from strands import Agent, tool
    from strands.models.openai import OpenAIModel
    from strands.telemetry import StrandsTelemetry

    provider, recorder = agent_side.tracer_provider(SERVICE)
    StrandsTelemetry(tracer_provider=provider)
    server = agent_side.model_server()
    cluster = Cluster()

    @tool
    def get_pod_status(deployment: str, namespace: str) -> str:
        """Readiness and state of a deployment's pods.

        Args:
            deployment: the deployment's name
            namespace: its namespace
        """
        return cluster.get_pod_status(deployment, namespace)

    @tool
    def get_logs(deployment: str, namespace: str) -> str:
        """Recent logs of a deployment's pods.

        Args:
            deployment: the deployment's name
            namespace: its namespace
        """
        return cluster.get_logs(deployment, namespace)

    @tool
    def apply_manifest(manifest: str) -> str:
        """Apply a Kubernetes manifest (YAML) to the cluster.

        Args:
            manifest: the manifest, YAML
        """
        return cluster.apply_manifest(manifest)

    @tool
    def restart_deployment(deployment: str, namespace: str) -> str:
        """Restart a deployment's pods.

        Args:
            deployment: the deployment's name
            namespace: its namespace
        """
        return cluster.restart_deployment(deployment, namespace)

    model = OpenAIModel(
        client_args={"api_key": "sk-scripted", "base_url": server.base_url},
        model_id="gpt-4o-mini",
    )
    runs: dict[str, list[str]] = {}
    for scenario in SINGLE_AGENT:
        server.play(list(scenario.turns))
        cluster.__init__()  # type: ignore[misc]
        agent = Agent(
            model=model,
            name=AGENT,
            system_prompt="You are an SRE agent for the shop namespace.",
            tools=[get_pod_status, get_logs, apply_manifest, restart_deployment],
            callback_handler=None,
        )
        with recorder.scenario(runs, scenario.name):
            result = agent(TASK)
        assert str(result).strip() == scenario.answer, str(result)
    server.stop()
    agent_side.finish(provider, runs)


if __name__ == "__main__":
    main()
