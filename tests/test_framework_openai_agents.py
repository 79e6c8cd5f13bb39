"""The OpenAI Agents SDK (Responses API) with `openinference-instrumentation-openai-agents`,
over OTLP/gRPC to a running `mast-otel serve`: one SRE agent, and a triage agent handing off
to a fixer. OpenInference names the agent on the agent span only; the hand-off is a span
`handoff to fixer`."""

from __future__ import annotations

import pytest

from tests.frameworks.harness import check_scenario, collect
from tests.frameworks.scenarios import SINGLE_AGENT, handoff

HANDOFF = handoff("transfer_to_fixer")


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    return collect(tmp_path_factory.mktemp("openai-agents"), "openai_agents", "grpc")


@pytest.mark.parametrize("scenario", SINGLE_AGENT, ids=lambda s: s.name)
def test_each_scenario_is_read_right(collected, scenario):
    runs, stored = collected
    check_scenario(stored, runs[scenario.name], scenario, ("sre-agent",))
    steps = stored.steps_of(runs[scenario.name][0])
    llm = [s for s in steps if s["kind"] == "llm"]
    # The tools each model call was offered, from the framework's own tool definitions.
    assert all({t.tool for t in scenario.tools} <= set(s["tools_offered"]) for s in llm)
    assert len(llm) == len(scenario.turns) and all(s["model"] == "gpt-4o-mini" for s in llm)
    assert all(s["agent"] == "sre-agent" for s in llm)


def test_handoff_names_sender_and_receiver_and_the_dropped_logs(collected):
    runs, stored = collected
    (trace_id,) = runs[HANDOFF.name]
    findings = check_scenario(stored, [trace_id], HANDOFF, ("triage", "fixer"))
    steps = stored.steps_of(trace_id)
    handoffs = [s for s in steps if s["kind"] == "handoff"]
    assert [(s["agent"], s["target_agent"]) for s in handoffs] == [("triage", "fixer")]
    (finding,) = findings
    assert "get_logs" in finding["message"] and "triage" in finding["message"]
    assert {s["agent"] for s in steps if s["kind"] == "llm"} == {"triage", "fixer"}
