"""smolagents' `ToolCallingAgent` with `openinference-instrumentation-smolagents`, over
OTLP/gRPC to a running `mast-otel serve`. Its tools' arguments come wrapped as
`{"args": [], "kwargs": {...}}`, and it answers by calling its `final_answer` tool."""

from __future__ import annotations

import pytest

from tests.frameworks.harness import check_scenario, collect
from tests.frameworks.scenarios import SINGLE_AGENT

SERVICE = "sre-smol"


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    return collect(tmp_path_factory.mktemp("smolagents"), "smolagents_agent", "grpc")


@pytest.mark.parametrize("scenario", SINGLE_AGENT, ids=lambda s: s.name)
def test_each_scenario_is_read_right(collected, scenario):
    runs, stored = collected
    check_scenario(stored, runs[scenario.name], scenario, (SERVICE,))
    steps = stored.steps_of(runs[scenario.name][0])
    llm = [s for s in steps if s["kind"] == "llm"]
    # The tools each model call was offered, from the framework's own tool definitions.
    assert all({t.tool for t in scenario.tools} <= set(s["tools_offered"]) for s in llm)
    assert len(llm) == len(scenario.turns) and all(s["model"] == "gpt-4o-mini" for s in llm)
    # The final answer is the last model call's answer, not a call of a tool.
    assert llm[-1]["output"] == scenario.answer and llm[-1]["tool_calls"] == []
    assert all(s["tool"] != "final_answer" for s in steps)
