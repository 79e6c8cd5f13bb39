"""CrewAI (`crewai`, its native OpenAI provider) instrumented by
`openinference-instrumentation-crewai` (the crew, each task's AGENT span, each tool's run) and
`openinference-instrumentation-openai` (the model calls): a sequential Crew of a planner, a
fixer and a verifier, one task per turn that ends in an answer, each agent running its own
tool calls; and a hierarchical one, the planner its manager delegating to the others
(crewai_scenarios.py). Runs in .venv-crewai (crewai pins pydantic and openai older than the
collector's; scripts/crewai-requirements.txt)."""

from __future__ import annotations

import os
import tempfile

from tests.frameworks import agent_side
from tests.frameworks.crewai_scenarios import CREWAI_SCENARIOS
from tests.frameworks.scenarios import TASK, TOOL_DOCS, Cluster
from tests.frameworks.team_scenarios import (
    FIXER,
    PLANNER,
    TEAM,
    TEAM_SCENARIOS,
    VERIFIER,
    TeamScenario,
)

SERVICE = "sre-team"
# What each agent's task asks, after the planner's (the team's task itself).
ASKED = {FIXER: "Carry out the planner's instruction.", VERIFIER: "Check the fix."}
EXPECTED = {
    PLANNER: "An instruction for the fixer.",
    FIXER: "A report of what you did.",
    VERIFIER: "Your verdict on the fix.",
}


def main() -> None:
    from openinference.instrumentation.crewai import CrewAIInstrumentor
    from openinference.instrumentation.openai import OpenAIInstrumentor

    provider, recorder = agent_side.tracer_provider(SERVICE)
    CrewAIInstrumentor().instrument(tracer_provider=provider)
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    server = agent_side.model_server()
    cluster = Cluster()
    failing: dict[str, str] = {}
    tools = _tools(cluster, failing)
    runs: dict[str, list[str]] = {}
    for scenario in TEAM_SCENARIOS:
        cluster.__init__()  # type: ignore[misc]
        failing.clear()
        if scenario.failing[0]:
            failing[scenario.failing[0]] = scenario.failing[1]
        with recorder.scenario(runs, scenario.name):
            team_run(scenario, server, tools)
    for scenario in CREWAI_SCENARIOS:
        with recorder.scenario(runs, scenario.name):
            managed_run(scenario, server, tools)
    server.stop()
    agent_side.finish(provider, runs)


def _tools(cluster: Cluster, failing: dict[str, str]) -> list:  # type: ignore[type-arg]
    """The SRE tools as CrewAI tools (`@tool`), a failing one answering "Error: ..."."""
    from crewai.tools import tool

    def run(name: str, **kwargs: str) -> str:
        if name in failing:
            return f"Error: {failing[name]}"
        return str(getattr(cluster, name)(**kwargs))

    def get_pod_status(deployment: str, namespace: str) -> str:
        return run("get_pod_status", deployment=deployment, namespace=namespace)

    def get_logs(deployment: str, namespace: str) -> str:
        return run("get_logs", deployment=deployment, namespace=namespace)

    def apply_manifest(manifest: str) -> str:
        return run("apply_manifest", manifest=manifest)

    def restart_deployment(deployment: str, namespace: str) -> str:
        return run("restart_deployment", deployment=deployment, namespace=namespace)

    functions = (get_pod_status, get_logs, apply_manifest, restart_deployment)
    for function in functions:
        function.__doc__ = TOOL_DOCS[function.__name__]
    return [tool(f.__name__)(f) for f in functions]


def _tasks(scenario: TeamScenario) -> list[tuple[str, dict[str, int]]]:
    """The crew's tasks in order: each agent's turns up to its next answer are one task
    (its tool calls are its own), with where every agent's turns stand when it starts. A
    verifier the scenario hands on to speaks after the others (outside their order)."""
    taken = dict.fromkeys(TEAM, 0)
    tasks = []
    start: dict[str, int] | None = None
    handed = [VERIFIER] * len(scenario.turns[VERIFIER]) if scenario.handed_on else []
    for name in (*scenario.order, *handed):
        if name not in taken:
            continue  # an executor's turn: CrewAI's agents run their own calls
        start = start or dict(taken)
        turn = scenario.turns[name][taken[name]]
        taken[name] += 1
        if not turn.calls:
            tasks.append((name, start))
            start = None
    return tasks


def _agents(server, tools) -> dict:  # type: ignore[no-untyped-def, type-arg]
    """The team, each agent named by its role; the planner has no tools."""
    from crewai import LLM, Agent

    llm = LLM(model="gpt-4o-mini", base_url=server.base_url, api_key="sk-scripted")
    return {
        name: Agent(
            role=name,
            goal="Fix the shop namespace.",
            backstory="You fix the shop namespace as a team.",
            llm=llm,
            tools=tools if name != PLANNER else [],
            allow_delegation=False,
        )
        for name in TEAM
    }


def team_run(scenario: TeamScenario, server, tools) -> None:  # type: ignore[no-untyped-def]
    """One crew kickoff: a task per agent's turn, the verifier's task given the fixer's last
    report only when the scenario hands it on (`Task(context=[...])`), else every earlier
    task's output (a sequential crew's default)."""
    from crewai import Crew, Process, Task

    agents = _agents(server, tools)
    plan = _tasks(scenario)

    def play(index: int) -> None:
        """The script from task `index` on: every agent's turns from where they stand (a
        task's conversation starts afresh, so the server counts its turns from zero)."""
        if index < len(plan):
            start = plan[index][1]
            server.play_team({n: list(scenario.turns[n][start[n] :]) for n in TEAM})

    tasks: list[Task] = []
    for index, (name, _) in enumerate(plan):
        handed = {"context": [tasks[-1]]} if scenario.handed_on and name == VERIFIER else {}
        tasks.append(
            Task(
                description=TASK if name == PLANNER else ASKED[name],
                expected_output=EXPECTED[name],
                agent=agents[name],
                callback=lambda _output, following=index + 1: play(following),
                **handed,
            )
        )
    play(0)
    Crew(
        name=SERVICE, agents=list(agents.values()), tasks=tasks, process=Process.sequential
    ).kickoff()


def managed_run(scenario: TeamScenario, server, tools) -> None:  # type: ignore[no-untyped-def]
    """A hierarchical crew's kickoff: the team's task given to the planner as its manager
    (`manager_agent`, which crewai lets delegate), the fixer and the verifier its coworkers."""
    from crewai import Crew, Process, Task

    agents = _agents(server, tools)
    server.play_team({name: list(turns) for name, turns in scenario.turns.items()})
    Crew(
        name=SERVICE,
        agents=[agents[FIXER], agents[VERIFIER]],
        tasks=[Task(description=TASK, expected_output="The team's report on the fix.")],
        process=Process.hierarchical,
        manager_agent=agents[PLANNER],
    ).kickoff()


if __name__ == "__main__":
    # CrewAI keeps a credentials key (under ~/.local/share) and its task outputs (under the
    # user's data directory) in a home of the run's own (its telemetry and tracing back end
    # are off: agent_side.OFFLINE_ENV).
    with tempfile.TemporaryDirectory() as home:
        os.environ["HOME"] = os.environ["XDG_DATA_HOME"] = home
        main()
