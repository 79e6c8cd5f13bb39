"""FM-1.5 unaware of termination conditions.

The detector's rules on plain step sequences: each where it should fire, and its near
misses, which must stay silent."""

from __future__ import annotations

from tests.steps import GET_PODS, RunBuilder, rules


def test_fm15_limit_error_and_loop_at_the_end():
    run = RunBuilder()
    for _ in range(3):
        run.tool("kubectl", GET_PODS, "checkout-1 0/1 CrashLoopBackOff")
    run.failed_agent("GraphRecursionError: Recursion limit of 25 reached")
    assert rules(run.steps, mode="FM-1.5") == [("FM-1.5", "ended_in_loop"), ("FM-1.5", "limit_hit")]


def test_fm15_a_question_is_not_a_final_answer():
    run = RunBuilder()
    run.llm(output="Which namespace do you mean: shop or staging?")
    run.tool("kubectl", GET_PODS, "ok")
    assert rules(run.steps, mode="FM-1.5") == []
