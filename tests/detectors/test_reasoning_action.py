"""FM-2.6 reasoning-action mismatch.

The detector's rules on plain step sequences: each where it should fire, and its near
misses, which must stay silent."""

from __future__ import annotations

from tests.steps import GET_PODS, RunBuilder, rules


def test_fm26_other_tool_and_target_mismatch():
    run = RunBuilder()
    run.tool("kubectl", {"command": "kubectl describe deployment payments -n billing"}, "ok")
    run.llm(output="I will look at the payments deployment logs.", calls=("kubectl",))
    run.tool("kubectl", {"command": "kubectl logs deployment/cart -n shop"}, "ok")
    run.llm(output="Listing alerts.", calls=("get_alerts",))
    run.tool("kubectl", GET_PODS, "ok")
    assert rules(run.steps, mode="FM-2.6") == [
        ("FM-2.6", "other_tool_executed"),
        ("FM-2.6", "target_mismatch"),
    ]


def test_fm26_saying_and_doing_the_same_is_silent():
    run = RunBuilder()
    run.llm(output="I will list the checkout pods in shop.", calls=("kubectl",))
    run.tool("kubectl", GET_PODS, "checkout-1 1/1 Running")
    run.llm(output="Listing alerts.", calls=("get_alerts",))
    run.tool("get_alerts", {}, "no alerts firing")
    assert rules(run.steps, mode="FM-2.6") == []
