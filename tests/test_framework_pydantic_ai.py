"""pydantic-ai's own OpenTelemetry instrumentation (GenAI conventions: `invoke_agent`, `chat`,
`execute_tool` spans), over OTLP/HTTP to a running `mast-otel serve`."""

from __future__ import annotations

import pytest

from tests.frameworks.harness import check_scenario, collect
from tests.frameworks.scenarios import SINGLE_AGENT


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    return collect(tmp_path_factory.mktemp("pydantic-ai"), "pydantic_ai_agent", "http")


@pytest.mark.parametrize("scenario", SINGLE_AGENT, ids=lambda s: s.name)
def test_each_scenario_is_read_right(collected, scenario):
    runs, stored = collected
    check_scenario(stored, runs[scenario.name], scenario, ("sre-agent",))
    steps = stored.steps_of(runs[scenario.name][0])
    llm = [s for s in steps if s["kind"] == "llm"]
    # The tools each model call was offered, from the framework's own tool definitions.
    assert all({t.tool for t in scenario.tools} <= set(s["tools_offered"]) for s in llm)
    assert len(llm) == len(scenario.turns) and all(s["model"] == "gpt-4o-mini" for s in llm)
    assert [c["name"] for s in llm for c in s["tool_calls"]] == [t.tool for t in scenario.tools]
    assert steps[0]["kind"] == "agent" and steps[0]["agent"] == "sre-agent"
