"""OpenLLMetry (`traceloop-sdk`): a hand-written agent marked with Traceloop's decorators and
its OpenAI instrumentation, exported by `Traceloop.init` over OTLP/HTTP to a running
`mast-otel serve`. traceloop-sdk pins an older OpenTelemetry SDK than the collector's, so its
agent side runs in .venv-traceloop (made by scripts/setup.sh)."""

from __future__ import annotations

import pytest

from tests.frameworks.harness import ROOT, check_scenario, collect
from tests.frameworks.scenarios import SINGLE_AGENT

PYTHON = ROOT / ".venv-traceloop" / "bin" / "python"


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    assert PYTHON.exists(), f"{PYTHON} is missing: run scripts/setup.sh"
    return collect(
        tmp_path_factory.mktemp("traceloop"), "traceloop_agent", "http", python=str(PYTHON)
    )


@pytest.mark.parametrize("scenario", SINGLE_AGENT, ids=lambda s: s.name)
def test_each_scenario_is_read_right(collected, scenario):
    runs, stored = collected
    check_scenario(stored, runs[scenario.name], scenario, ("sre-agent",))
    steps = stored.steps_of(runs[scenario.name][0])
    llm = [s for s in steps if s["kind"] == "llm"]
    assert len(llm) == len(scenario.turns) and all(s["model"] == "gpt-4o-mini" for s in llm)
    assert [c["name"] for s in llm for c in s["tool_calls"]] == [t.tool for t in scenario.tools]
    # The functions offered on each model call (`llm.request.functions.<i>.*`).
    offered = ["get_pod_status", "get_logs", "apply_manifest", "restart_deployment"]
    assert all(s["tools_offered"] == offered for s in llm)
    # The workflow root names no agent: it stands for the service.
    assert steps[0]["agent"] == "sre-traceloop"
