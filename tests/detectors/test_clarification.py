"""FM-2.2 fail to ask for clarification.

The detector's rules on plain step sequences: each where it should fire, and its near
misses, which must stay silent."""

from __future__ import annotations

from tests.steps import TASK, RunBuilder, rules


def test_fm22_unnamed_target_and_its_near_miss():
    run = RunBuilder()
    run.llm(input_text=TASK)
    run.tool("kubectl", {"command": "kubectl rollout restart deployment/payments -n billing"})
    assert rules(run.steps, mode="FM-2.2") == [("FM-2.2", "unnamed_target")]
    named = RunBuilder()
    named.llm(input_text=TASK)
    named.tool("kubectl", {"command": "kubectl rollout restart deployment/checkout -n shop"})
    assert rules(named.steps, mode="FM-2.2") == []
