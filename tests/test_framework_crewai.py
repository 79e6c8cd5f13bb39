"""CrewAI (`crewai`, its native OpenAI provider) instrumented by
`openinference-instrumentation-crewai` and `openinference-instrumentation-openai`, over
OTLP/gRPC to a running `mast-otel serve`: a sequential Crew of a planner, a fixer and a
verifier, one task per turn that ends in an answer, each agent running its own tool calls.
crewai pins pydantic and openai older than the collector's, so its agent side runs in
.venv-crewai (made by scripts/setup.sh, without the dependencies crewai declares and a Crew
run never imports).

The same team scenarios as AG2's: a clean run raises nothing; a verifier approving an
unchecked change, a planner re-issuing an instruction no one acts on (a task of its own each
time), and a hand-off (the verifier's task given the fixer's report only, `Task(context=...)`)
that leaves out a failed change are found. CrewAI names the agent on its task's AGENT span
only (`graph.node.id`, the agent's role): its model and tool spans are that agent's."""

from __future__ import annotations

import pytest

from tests.frameworks import team_checks
from tests.frameworks.harness import ROOT, collect
from tests.frameworks.team_scenarios import TEAM_SCENARIOS

PYTHON = ROOT / ".venv-crewai" / "bin" / "python"


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    assert PYTHON.exists(), f"{PYTHON} is missing: run scripts/setup.sh"
    return collect(tmp_path_factory.mktemp("crewai"), "crewai_agent", "grpc", python=str(PYTHON))


@pytest.mark.parametrize("scenario", TEAM_SCENARIOS, ids=lambda s: s.name)
def test_each_team_run_raises_what_happened_in_it(collected, scenario):
    team_checks.check_findings(collected, scenario)


def test_each_agent_runs_its_own_calls(collected):
    team_checks.check_calls_are_the_askers(collected)


def test_each_finding_names_the_agents_and_the_call(collected):
    team_checks.check_messages(collected)
