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
that leaves out a failed change are found, each at the step where it happened. CrewAI names
the agent on its task's AGENT span only (`graph.node.id`, the agent's role): its model and
tool spans are that agent's."""

from __future__ import annotations

import pytest

from tests.frameworks import team_checks
from tests.frameworks.crewai_scenarios import DELEGATE, REDELEGATED
from tests.frameworks.harness import ROOT, collect
from tests.frameworks.scenarios import TASK
from tests.frameworks.team_scenarios import (
    APPROVED,
    DROPPED_ERROR,
    FIXER,
    INSTRUCTION,
    PLANNER,
    REISSUED,
    RUBBER_STAMP,
    TEAM_SCENARIOS,
    VERIFIER,
)

PYTHON = ROOT / ".venv-crewai" / "bin" / "python"
# The fixer's report in the hand-off scenario, all the verifier's task is handed.
REPORT = DROPPED_ERROR.turns[FIXER][-1].answer


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


def test_each_finding_is_at_the_step_where_it_happened(collected):
    # The fixer's restart; the planner's third instruction (each in a task of its own); the
    # verifier's first model call, the hand-off (its task's context, the fixer's report).
    at = dict(_steps(collected, RUBBER_STAMP))[_found_at(collected, RUBBER_STAMP, "FM-3.2")]
    assert (at["kind"], at["agent"], at["tool"]) == ("tool", FIXER, "restart_deployment")
    assert _found_at(collected, REISSUED, "FM-2.5") == _model_calls(collected, REISSUED, PLANNER)[2]
    handoff = _model_calls(collected, DROPPED_ERROR, VERIFIER)[0]
    assert _found_at(collected, DROPPED_ERROR, "FM-2.4") == handoff


def test_each_task_reads_as_what_its_agent_was_handed_and_answered(collected):
    # Its description, then the context it was handed; its answer. Not the agent's settings
    # and the whole TaskOutput that CrewAI's JSON carries.
    tasks = [s for _, s in _steps(collected, DROPPED_ERROR) if s["kind"] == "agent"]
    assert [(s["agent"], s["input"].rpartition("\n\n")[2], s["output"]) for s in tasks] == [
        (PLANNER, TASK, INSTRUCTION),
        (FIXER, INSTRUCTION, REPORT),
        (VERIFIER, REPORT, APPROVED),
    ]
    assert not any(s["input"].startswith("{") for s in tasks)
    crew = [s for _, s in _steps(collected, DROPPED_ERROR) if s["kind"] == "other"]
    assert [s["output"] for s in crew] == [APPROVED]


def test_a_manager_delegating_the_same_work_again_is_found_at_its_third_delegation(collected):
    # A hierarchical crew: the manager's delegations are its tool calls (named as the model
    # called them), the coworker's model calls under them the coworker's.
    team_checks.check_findings(collected, REDELEGATED)
    steps = _steps(collected, REDELEGATED)
    assert [s["agent"] for _, s in steps if s["kind"] == "llm"] == [PLANNER, FIXER] * 3 + [PLANNER]
    delegations = [(span, s) for span, s in steps if s["tool"] == DELEGATE]
    assert [(s["agent"], s["target_agent"]) for _, s in delegations] == [(PLANNER, FIXER)] * 3
    runs, stored = collected
    (finding,) = stored.findings_of(runs[REDELEGATED.name][0])
    assert finding["span_id"] == delegations[2][0] and finding["agent"] == PLANNER
    assert finding["message"].startswith(f'{DELEGATE}({{"task": "{INSTRUCTION}"')


def _steps(collected, scenario) -> list[tuple[str, dict]]:
    """The run's (span id, step) in order."""
    runs, stored = collected
    (trace_id,) = runs[scenario.name]
    return [(s["span_id"], s["step"]) for s in stored.timelines[trace_id]["spans"] if s["step"]]


def _found_at(collected, scenario, mode: str) -> str:
    """The span of the run's finding of `mode`."""
    runs, stored = collected
    (trace_id,) = runs[scenario.name]
    (span_id,) = [f["span_id"] for f in stored.findings_of(trace_id) if f["mode"] == mode]
    return span_id


def _model_calls(collected, scenario, agent: str) -> list[str]:
    """The spans of the agent's model calls, in order."""
    steps = _steps(collected, scenario)
    return [span for span, s in steps if (s["kind"], s["agent"]) == ("llm", agent)]
