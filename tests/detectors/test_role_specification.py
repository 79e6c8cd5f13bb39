"""FM-1.2 disobey role specification.

The detector's rules on plain step sequences: each where it should fire, and its near
misses, which must stay silent."""

from __future__ import annotations

from mast_otel.processors.detectors.config import DetectorsConfig
from tests.steps import FIX, RunBuilder, rules


def test_fm12_role_tools_from_configuration_and_read_only_pattern():
    config = DetectorsConfig()
    config.role_specification.agent_tools = {"triage": ["kubectl", "get_alerts"]}
    config.role_specification.read_only_agents = ["^triage$"]
    run = RunBuilder(agent="triage")
    run.tool("get_alerts", {}, "HighErrorRate firing")
    run.tool("run_shell", {"command": "curl checkout"}, "ok")
    run.tool("kubectl", FIX, "updated")
    assert rules(run.steps, config, "FM-1.2") == [
        ("FM-1.2", "read_only_role_mutates"),
        ("FM-1.2", "tool_outside_role"),
    ]
    fixer = RunBuilder(agent="fixer")
    fixer.tool("kubectl", FIX, "updated")
    assert rules(fixer.steps, config, "FM-1.2") == []
