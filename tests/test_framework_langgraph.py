"""LangGraph: a ReAct-style graph (model node, tool node) on `langchain-openai` with
`openinference-instrumentation-langchain`, over OTLP/HTTP to a running `mast-otel serve`. Its
tool spans carry the whole ToolMessage as JSON, with a per-call id inside; its graph root names
no agent."""

from __future__ import annotations

import pytest

from tests.frameworks.harness import check_scenario, collect
from tests.frameworks.scenarios import SINGLE_AGENT

SERVICE = "sre-graph"


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    return collect(tmp_path_factory.mktemp("langgraph"), "langgraph_agent", "http")


@pytest.mark.parametrize("scenario", SINGLE_AGENT, ids=lambda s: s.name)
def test_each_scenario_is_read_right(collected, scenario):
    runs, stored = collected
    # No span names an agent: every step is the graph's, named after its service.
    check_scenario(stored, runs[scenario.name], scenario, (SERVICE,))
    steps = stored.steps_of(runs[scenario.name][0])
    llm = [s for s in steps if s["kind"] == "llm"]
    # The tools each model call was offered, from the framework's own tool definitions.
    assert all({t.tool for t in scenario.tools} <= set(s["tools_offered"]) for s in llm)
    assert len(llm) == len(scenario.turns) and all(s["model"] == "gpt-4o-mini" for s in llm)
    assert [c["name"] for s in llm for c in s["tool_calls"]] == [t.tool for t in scenario.tools]
    # The ToolMessage's content is the result, not the message around it.
    assert all(not s["result"].startswith("{") for s in steps if s["kind"] == "tool")
