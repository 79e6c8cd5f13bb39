"""AG2 (`ag2`, the `autogen` package) with its own OpenTelemetry tracing
(`autogen.opentelemetry`: `instrument_agent`, `instrument_llm_wrapper`): a group chat of a
planner, a fixer and a verifier, the fixer's and the verifier's tool calls run by an executor
agent, the speaker order scripted. Runs in .venv-ag2 (ag2's openai pin is older)."""

from __future__ import annotations

from tests.frameworks import agent_side
from tests.frameworks.scenarios import TASK, TOOL_DOCS, Cluster
from tests.frameworks.team_scenarios import (
    RUNNER,
    TEAM,
    TEAM_SCENARIOS,
    VERIFIER,
    TeamScenario,
)

SERVICE = "sre-team"


def main() -> None:
    from autogen.opentelemetry import instrument_llm_wrapper

    provider, recorder = agent_side.tracer_provider(SERVICE)
    instrument_llm_wrapper(tracer_provider=provider, capture_messages=True)
    server = agent_side.model_server()
    llm_config = {
        "config_list": [
            {"model": "gpt-4o-mini", "api_key": "sk-scripted", "base_url": server.base_url}
        ],
        "cache_seed": None,
    }
    cluster = Cluster()
    failing: dict[str, str] = {}

    def tool(name: str):  # type: ignore[no-untyped-def]
        method = getattr(cluster, name)

        def run(**kwargs: str) -> str:
            if name in failing:
                return f"Error: {failing[name]}"
            return str(method(**kwargs))

        return run

    def get_pod_status(deployment: str, namespace: str) -> str:
        return tool("get_pod_status")(deployment=deployment, namespace=namespace)

    def get_logs(deployment: str, namespace: str) -> str:
        return tool("get_logs")(deployment=deployment, namespace=namespace)

    def apply_manifest(manifest: str) -> str:
        return tool("apply_manifest")(manifest=manifest)

    def restart_deployment(deployment: str, namespace: str) -> str:
        return tool("restart_deployment")(deployment=deployment, namespace=namespace)

    functions = (get_pod_status, get_logs, apply_manifest, restart_deployment)
    runs: dict[str, list[str]] = {}
    for scenario in TEAM_SCENARIOS:
        server.play_team({name: list(turns) for name, turns in scenario.turns.items()})
        cluster.__init__()  # type: ignore[misc]
        failing.clear()
        if scenario.failing[0]:
            failing[scenario.failing[0]] = scenario.failing[1]
        with recorder.scenario(runs, scenario.name):
            team_run(scenario, llm_config, functions, provider)
    server.stop()
    agent_side.finish(provider, runs)


def team_run(scenario: TeamScenario, llm_config, functions, provider) -> None:  # type: ignore[no-untyped-def]
    """One group chat: the user gives the task, then the scripted speakers take turns."""
    from autogen import ConversableAgent, GroupChat, GroupChatManager, register_function
    from autogen.opentelemetry import instrument_agent

    def done(message: dict) -> bool:  # type: ignore[type-arg]
        return "TERMINATE" in str(message.get("content") or "")

    agents = {
        name: ConversableAgent(
            name,
            system_message=f"You are {name}. You fix the shop namespace as a team.",
            llm_config=llm_config,
            human_input_mode="NEVER",
            is_termination_msg=done,
        )
        for name in TEAM
    }
    runner = ConversableAgent(RUNNER, llm_config=False, human_input_mode="NEVER")
    user = ConversableAgent("user", llm_config=False, human_input_mode="NEVER")
    for function in functions:
        for caller in ("fixer", "verifier"):
            register_function(
                function,
                caller=agents[caller],
                executor=runner,
                description=TOOL_DOCS[function.__name__],
            )
    order = list(scenario.order)

    def next_speaker(last_speaker, groupchat):  # type: ignore[no-untyped-def]
        if not order:
            return None
        return groupchat.agent_by_name(order.pop(0))

    members = [a for name, a in agents.items() if name != VERIFIER or not scenario.handed_on]
    chat = GroupChat(
        agents=[user, *members, runner],
        messages=[],
        max_round=len(scenario.order) + 2,
        speaker_selection_method=next_speaker,
    )
    manager = GroupChatManager(chat, llm_config=False, is_termination_msg=done)
    for agent in (user, *agents.values(), runner, manager):
        instrument_agent(agent, tracer_provider=provider)
    if not scenario.handed_on:
        user.initiate_chat(manager, message=TASK)
        return
    # Sequential chats: the verifier is handed the team's last message only.
    user.initiate_chats(
        [
            {"recipient": manager, "message": TASK, "summary_method": "last_msg"},
            {
                "recipient": agents[VERIFIER],
                "message": "Check the fix.",
                "max_turns": 1,
                "summary_method": "last_msg",
            },
        ]
    )


if __name__ == "__main__":
    main()
