"""AutoGen AgentChat (`autogen-agentchat`, the `autogen-ext` OpenAI client) instrumented by
`openinference-instrumentation-autogen-agentchat`: a SelectorGroupChat of a planner, a fixer
and a verifier, each running its own tool calls, the speaker order scripted. autogen-core's
own spans (its runtime's, and GenAI `invoke_agent` / `execute_tool` spans without the calls'
arguments or results, on the global provider) stay off: the provider is given to the
instrumentation only. Runs in .venv-autogen (autogen-core pins a protobuf older than the
collector's)."""

from __future__ import annotations

import asyncio
import os

from tests.frameworks import agent_side
from tests.frameworks.scenarios import TASK, TOOL_DOCS, Cluster
from tests.frameworks.team_scenarios import TEAM, TEAM_SCENARIOS, VERIFIER, TeamScenario

SERVICE = "sre-team"


def main() -> None:
    from openinference.instrumentation.autogen_agentchat import AutogenAgentChatInstrumentor

    os.environ.setdefault("AUTOGEN_DISABLE_RUNTIME_TRACING", "true")
    provider, recorder = agent_side.tracer_provider(SERVICE, set_global=False)
    AutogenAgentChatInstrumentor().instrument(tracer_provider=provider)
    server = agent_side.model_server()
    runs: dict[str, list[str]] = {}
    asyncio.run(all_runs(server, provider, recorder, runs))
    server.stop()
    agent_side.finish(provider, runs)


async def all_runs(server, provider, recorder, runs: dict[str, list[str]]) -> None:  # type: ignore[no-untyped-def]
    """Every scenario, one event loop (the model client's connections live in it)."""
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    client = OpenAIChatCompletionClient(
        model="gpt-4o-mini", base_url=server.base_url, api_key="sk-scripted"
    )
    cluster = Cluster()
    failing: dict[str, str] = {}

    def run(name: str, **kwargs: str) -> str:
        if name in failing:
            return f"Error: {failing[name]}"
        return str(getattr(cluster, name)(**kwargs))

    async def get_pod_status(deployment: str, namespace: str) -> str:
        return run("get_pod_status", deployment=deployment, namespace=namespace)

    async def get_logs(deployment: str, namespace: str) -> str:
        return run("get_logs", deployment=deployment, namespace=namespace)

    async def apply_manifest(manifest: str) -> str:
        return run("apply_manifest", manifest=manifest)

    async def restart_deployment(deployment: str, namespace: str) -> str:
        return run("restart_deployment", deployment=deployment, namespace=namespace)

    functions = (get_pod_status, get_logs, apply_manifest, restart_deployment)
    tracer = provider.get_tracer("sre-team")
    for scenario in TEAM_SCENARIOS:
        server.play_team({name: list(turns) for name, turns in scenario.turns.items()})
        cluster.__init__()  # type: ignore[misc]
        failing.clear()
        if scenario.failing[0]:
            failing[scenario.failing[0]] = scenario.failing[1]
        with (
            recorder.scenario(runs, scenario.name),
            tracer.start_as_current_span("invoke_agent sre-team"),
        ):
            await team_run(scenario, client, functions)
    await client.close()


def _order(scenario: TeamScenario) -> list[str]:
    """Who speaks, in turn: each agent's turn ends on its answer (its tool calls are its own)."""
    taken = dict.fromkeys(TEAM, 0)
    order = []
    for name in scenario.order:
        if name not in taken:
            continue  # an executor's turn: AgentChat's agents run their own calls
        turn = scenario.turns[name][taken[name]]
        taken[name] += 1
        if not turn.calls:
            order.append(name)
    return order


async def team_run(scenario: TeamScenario, client, functions) -> None:  # type: ignore[no-untyped-def]
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.conditions import MaxMessageTermination, TextMentionTermination
    from autogen_agentchat.teams import SelectorGroupChat
    from autogen_core.tools import FunctionTool

    tools = [FunctionTool(f, description=TOOL_DOCS[f.__name__]) for f in functions]
    agents = {
        name: AssistantAgent(
            name,
            model_client=client,
            tools=tools if name != TEAM[0] else None,
            system_message=f"You are {name}. You fix the shop namespace as a team.",
            max_tool_iterations=10,
        )
        for name in TEAM
    }
    order = _order(scenario)

    def next_speaker(messages):  # type: ignore[no-untyped-def]
        return order.pop(0) if order else None

    members = [a for name, a in agents.items() if name != VERIFIER or not scenario.handed_on]
    # The task and each speaker's answer; or the last word.
    done = TextMentionTermination("TERMINATE") | MaxMessageTermination(len(order) + 1)
    team = SelectorGroupChat(
        members,
        model_client=client,
        selector_func=next_speaker,
        termination_condition=done,
        allow_repeated_speaker=True,
    )
    result = await team.run(task=TASK)
    if scenario.handed_on:
        # The verifier is handed the team's last message only.
        last = result.messages[-1]
        await agents[VERIFIER].run(task=f"Check the fix.\nContext:\n{last.to_text()}")


if __name__ == "__main__":
    main()
