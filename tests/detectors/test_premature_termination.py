"""FM-3.1 premature termination.

The detector's rules on plain step sequences: each where it should fire, and its near
misses, which must stay silent."""

from __future__ import annotations

from processors.detectors.config import DetectorsConfig
from tests.steps import GET_PODS, RunBuilder, rules


def test_fm31_required_deliverable():
    config = DetectorsConfig()
    config.premature_termination.required_final_pattern = r"root cause"
    run = RunBuilder()
    run.tool("kubectl", GET_PODS, "ok")
    run.final("checkout pods listed.")
    assert rules(run.steps, config, "FM-3.1") == [("FM-3.1", "no_deliverable")]
    good = RunBuilder()
    good.tool("kubectl", GET_PODS, "ok")
    good.final("The root cause is a 64Mi memory limit.")
    assert rules(good.steps, config, "FM-3.1") == []
