"""AG2 (the `autogen` package) with its own OpenTelemetry tracing (`autogen.opentelemetry`:
`instrument_agent`, `instrument_llm_wrapper` with messages captured), over OTLP/gRPC to a
running `mast-otel serve`: a group chat of a planner, a fixer and a verifier, whose tool calls
an executor agent runs, the speaker order scripted. ag2 pins an openai client older than the
other frameworks', so its agent side runs in .venv-ag2 (made by scripts/setup.sh).

A clean team run raises nothing; a verifier that approves a change without running anything,
a planner re-issuing an instruction no one acts on, and a hand-off (AG2's sequential chats
with carryover) that leaves out the failure of a change are found, where they happened."""

from __future__ import annotations

import pytest

from tests.frameworks import team_checks
from tests.frameworks.harness import ROOT, collect
from tests.frameworks.team_scenarios import TEAM_SCENARIOS

PYTHON = ROOT / ".venv-ag2" / "bin" / "python"


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    assert PYTHON.exists(), f"{PYTHON} is missing: run scripts/setup.sh"
    return collect(tmp_path_factory.mktemp("ag2"), "ag2_agent", "grpc", python=str(PYTHON))


@pytest.mark.parametrize("scenario", TEAM_SCENARIOS, ids=lambda s: s.name)
def test_each_team_run_raises_what_happened_in_it(collected, scenario):
    team_checks.check_findings(collected, scenario)


def test_the_executor_runs_the_calls_the_fixer_and_the_verifier_asked_for(collected):
    # AG2's executor agent runs them: each call is the agent's whose model asked for it.
    team_checks.check_calls_are_the_askers(collected)


def test_each_finding_names_the_agents_and_the_call(collected):
    team_checks.check_messages(collected)
