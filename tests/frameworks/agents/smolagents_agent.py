"""smolagents' `ToolCallingAgent` on `OpenAIServerModel` (Chat Completions), instrumented by
`openinference-instrumentation-smolagents`. The run ends with the `final_answer` tool."""

from __future__ import annotations

import json

from tests.frameworks import agent_side
from tests.frameworks.model_server import Call, Turn
from tests.frameworks.scenarios import SINGLE_AGENT, TASK, Cluster

SERVICE = "sre-smol"


def main() -> None:
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor
    from smolagents import OpenAIServerModel, ToolCallingAgent, tool

    provider, recorder = agent_side.tracer_provider(SERVICE)
    SmolagentsInstrumentor().instrument(tracer_provider=provider)
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

    model = OpenAIServerModel(
        model_id="gpt-4o-mini", api_base=server.base_url, api_key="sk-scripted"
    )
    agent = ToolCallingAgent(
        tools=[get_pod_status, get_logs, apply_manifest, restart_deployment],
        model=model,
        name="sre_agent",
        max_steps=10,
        verbosity_level=0,
    )
    runs: dict[str, list[str]] = {}
    for scenario in SINGLE_AGENT:
        # smolagents answers through its `final_answer` tool.
        turns = [
            t if t.calls else Turn((Call("final_answer", {"answer": t.answer}),))
            for t in scenario.turns
        ]
        server.play(turns)
        cluster.__init__()  # type: ignore[misc]
        with recorder.scenario(runs, scenario.name):
            answer = agent.run(TASK)
        assert answer == scenario.answer, json.dumps(str(answer))
    server.stop()
    agent_side.finish(provider, runs)


if __name__ == "__main__":
    main()
