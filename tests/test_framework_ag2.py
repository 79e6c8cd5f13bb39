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

from tests.frameworks.harness import ROOT, collect
from tests.frameworks.scenarios import CRASHING, LOGS
from tests.frameworks.team_scenarios import (
    CLEAN,
    DROPPED_ERROR,
    FIXER,
    INSTRUCTION,
    PLANNER,
    REISSUED,
    RUBBER_STAMP,
    TEAM_SCENARIOS,
    VERIFIER,
)

PYTHON = ROOT / ".venv-ag2" / "bin" / "python"


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    assert PYTHON.exists(), f"{PYTHON} is missing: run scripts/setup.sh"
    return collect(tmp_path_factory.mktemp("ag2"), "ag2_agent", "grpc", python=str(PYTHON))


def _run(collected, scenario):
    runs, stored = collected
    (trace_id,) = runs[scenario.name]
    steps = stored.steps_of(trace_id)
    found = {(f["mode"], f["rule"]): f for f in stored.findings_of(trace_id)}
    return steps, found


@pytest.mark.parametrize("scenario", TEAM_SCENARIOS, ids=lambda s: s.name)
def test_each_team_run_raises_what_happened_in_it(collected, scenario):
    _, found = _run(collected, scenario)
    assert sorted(found) == sorted(scenario.expected.items()), [
        (f["mode"], f["rule"], f["message"]) for f in found.values()
    ]


def test_the_executor_runs_the_calls_the_fixer_and_the_verifier_asked_for(collected):
    steps, _ = _run(collected, CLEAN)
    llm = [s for s in steps if s["kind"] == "llm"]
    assert [s["agent"] for s in llm] == [PLANNER, *[FIXER] * 5, VERIFIER, VERIFIER]
    tools = [(s["agent"], s["tool"], s["result"]) for s in steps if s["kind"] == "tool"]
    assert tools == [
        (FIXER, "get_pod_status", CRASHING),
        (FIXER, "get_logs", LOGS),
        (FIXER, "apply_manifest", "deployment.apps/checkout configured"),
        (FIXER, "get_pod_status", "checkout: 3/3 pods ready, Running"),
        (VERIFIER, "get_pod_status", "checkout: 3/3 pods ready, Running"),
    ]


def test_the_unchecked_change_is_the_fixers_restart(collected):
    _, found = _run(collected, RUBBER_STAMP)
    finding = found[("FM-3.2", "unverified_change")]
    assert "restart_deployment" in finding["message"] and "checkout" in finding["message"]
    assert finding["agent"] == FIXER


def test_the_reissued_instruction_names_the_planner_and_who_ignored_it(collected):
    _, found = _run(collected, REISSUED)
    message = found[("FM-2.5", "instruction_reissued")]["message"]
    assert message.startswith(f"{PLANNER} gave the same instruction 3 times")
    assert INSTRUCTION in message and f"; {FIXER} answered" in message


def test_the_dropped_failure_is_the_fixers_hand_off_to_the_verifier(collected):
    _, found = _run(collected, DROPPED_ERROR)
    message = found[("FM-2.4", "error_not_passed_on")]["message"]
    assert message.startswith(f"{FIXER} handed off to {VERIFIER} without mentioning that")
    assert "apply_manifest failed" in message
