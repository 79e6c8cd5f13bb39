"""What every team framework's test checks of its stored runs (tests/test_framework_ag2.py,
tests/test_framework_autogen.py): each scenario's findings, and who ran which call."""

from __future__ import annotations

from typing import Any

from tests.frameworks.scenarios import CRASHING, LOGS
from tests.frameworks.team_scenarios import (
    CLEAN,
    DROPPED_ERROR,
    FIXER,
    INSTRUCTION,
    PLANNER,
    REISSUED,
    RUBBER_STAMP,
    VERIFIER,
    TeamScenario,
)


def run_of(collected: Any, scenario: TeamScenario) -> tuple[list[dict], dict]:  # type: ignore[type-arg]
    """The scenario's stored steps, and its findings by (mode, rule)."""
    runs, stored = collected
    (trace_id,) = runs[scenario.name]
    found = {(f["mode"], f["rule"]): f for f in stored.findings_of(trace_id)}
    return stored.steps_of(trace_id), found


def check_findings(collected: Any, scenario: TeamScenario) -> None:
    """The run raises what happened in it, one finding per mode, and nothing else."""
    runs, stored = collected
    (trace_id,) = runs[scenario.name]
    found = [(f["mode"], f["rule"]) for f in stored.findings_of(trace_id)]
    assert sorted(found) == sorted(scenario.expected.items()), [
        (f["mode"], f["rule"], f["message"]) for f in stored.findings_of(trace_id)
    ]


def check_calls_are_the_askers(collected: Any) -> None:
    """Each model call is its agent's; each tool call is the agent's whose model asked for it."""
    steps, _ = run_of(collected, CLEAN)
    llm = [s["agent"] for s in steps if s["kind"] == "llm"]
    assert llm == [PLANNER, *[FIXER] * 5, VERIFIER, VERIFIER]
    tools = [(s["agent"], s["tool"], s["result"]) for s in steps if s["kind"] == "tool"]
    assert tools == [
        (FIXER, "get_pod_status", CRASHING),
        (FIXER, "get_logs", LOGS),
        (FIXER, "apply_manifest", "deployment.apps/checkout configured"),
        (FIXER, "get_pod_status", "checkout: 3/3 pods ready, Running"),
        (VERIFIER, "get_pod_status", "checkout: 3/3 pods ready, Running"),
    ]


def check_messages(collected: Any) -> None:
    """Each finding names the agents and the call of its run."""
    _, found = run_of(collected, RUBBER_STAMP)
    unchecked = found[("FM-3.2", "unverified_change")]
    assert "restart_deployment" in unchecked["message"] and unchecked["agent"] == FIXER
    _, found = run_of(collected, REISSUED)
    message = found[("FM-2.5", "instruction_reissued")]["message"]
    assert message.startswith(f"{PLANNER} gave the same instruction 3 times")
    assert INSTRUCTION in message and f"; {FIXER} answered" in message
    _, found = run_of(collected, DROPPED_ERROR)
    message = found[("FM-2.4", "error_not_passed_on")]["message"]
    assert message.startswith(f"{FIXER} handed off to {VERIFIER} without mentioning that")
    assert "apply_manifest failed ('Error: admission webhook denied" in message
