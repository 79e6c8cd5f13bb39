"""AutoGen AgentChat (`autogen-agentchat`, the `autogen-ext` OpenAI client) instrumented by
`openinference-instrumentation-autogen-agentchat`, over OTLP/gRPC to a running `mast-otel
serve`: a SelectorGroupChat of a planner, a fixer and a verifier, each running its own tool
calls, the speaker order scripted. autogen-core pins a protobuf older than the collector's, so
its agent side runs in .venv-autogen (made by scripts/setup.sh).

The same team scenarios as AG2's: a clean run raises nothing; a verifier approving an
unchecked change, a planner re-issuing an instruction no one acts on, and a hand-off (the
verifier run on the team's last message only) that leaves out a failed change are found.
OpenInference sets a tool span Ok before it reads the result, so a failure shows in the result
only ("Error: ...")."""

from __future__ import annotations

import pytest

from tests.frameworks import team_checks
from tests.frameworks.harness import ROOT, collect
from tests.frameworks.team_scenarios import TEAM_SCENARIOS

PYTHON = ROOT / ".venv-autogen" / "bin" / "python"


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    assert PYTHON.exists(), f"{PYTHON} is missing: run scripts/setup.sh"
    return collect(tmp_path_factory.mktemp("autogen"), "autogen_agent", "grpc", python=str(PYTHON))


@pytest.mark.parametrize("scenario", TEAM_SCENARIOS, ids=lambda s: s.name)
def test_each_team_run_raises_what_happened_in_it(collected, scenario):
    team_checks.check_findings(collected, scenario)


def test_each_agent_runs_its_own_calls(collected):
    team_checks.check_calls_are_the_askers(collected)


def test_each_finding_names_the_agents_and_the_call(collected):
    team_checks.check_messages(collected)
