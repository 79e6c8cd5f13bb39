"""Strands Agents with its own OpenTelemetry tracing (GenAI conventions, message content as
span events in content blocks: `{"text"}`, `{"toolUse"}`, `{"toolResult"}`), over OTLP/gRPC
to a running `mast-otel serve`. strands-agents pins an older OpenTelemetry SDK and openai than
the other frameworks, so its agent side runs in .venv-strands (made by scripts/setup.sh)."""

from __future__ import annotations

import pytest

from tests.frameworks.harness import ROOT, check_scenario, collect
from tests.frameworks.scenarios import SINGLE_AGENT

PYTHON = ROOT / ".venv-strands" / "bin" / "python"


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    assert PYTHON.exists(), f"{PYTHON} is missing: run scripts/setup.sh"
    return collect(tmp_path_factory.mktemp("strands"), "strands_agent", "grpc", python=str(PYTHON))


@pytest.mark.parametrize("scenario", SINGLE_AGENT, ids=lambda s: s.name)
def test_each_scenario_is_read_right(collected, scenario):
    runs, stored = collected
    check_scenario(stored, runs[scenario.name], scenario, ("sre-agent",))
    steps = stored.steps_of(runs[scenario.name][0])
    llm = [s for s in steps if s["kind"] == "llm"]
    assert len(llm) == len(scenario.turns) and all(s["model"] == "gpt-4o-mini" for s in llm)
    assert [c["name"] for s in llm for c in s["tool_calls"]] == [t.tool for t in scenario.tools]
    assert llm[-1]["output"].strip() == scenario.answer
