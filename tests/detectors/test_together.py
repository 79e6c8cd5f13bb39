"""All the detectors together: a run that only reads raises nothing, and each detector can be
turned off."""

from __future__ import annotations

from mast_otel.processors.detectors.config import DetectorsConfig
from tests.steps import FIX, RunBuilder, analyse, rules


def test_read_only_runs_raise_nothing():
    run = RunBuilder()
    for i in range(5):
        run.llm(input_tokens=1000 + 300 * i)
        run.tool("kubectl", {"command": f"kubectl logs checkout-{i} -n shop"}, f"log {i}")
    findings, signatures = analyse([*run.steps, run.root()])
    assert findings == []
    assert signatures[0].steps == 11
    assert signatures[0].llm_calls == 5 and signatures[0].tool_calls == 5


def test_every_detector_can_be_turned_off():
    config = DetectorsConfig()
    for name in vars(config):
        if name != "signals":
            getattr(config, name).enabled = False
    run = RunBuilder()
    for _ in range(4):
        run.tool("kubectl", FIX, "updated")
    assert rules(run.steps, config) == []
