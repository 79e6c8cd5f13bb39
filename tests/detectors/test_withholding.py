"""FM-2.4 information withholding.

The detector's rules on plain step sequences: each where it should fire, and its near
misses, which must stay silent."""

from __future__ import annotations

from tests.steps import FIX, GET_PODS, RunBuilder, rules


def test_fm24_rereading_after_a_change_is_not_withholding():
    run = RunBuilder(agent="triage")
    run.tool("kubectl", GET_PODS, "checkout 0/1")
    run.handoff("fixer", "checkout in shop is OOMKilled (logs); fix deployment/checkout")
    run.tool("kubectl", FIX, "updated", agent="fixer")
    run.tool("kubectl", GET_PODS, "checkout 1/1 Running", agent="fixer")
    assert rules(run.steps, mode="FM-2.4") == []
    lazy = RunBuilder(agent="triage")
    lazy.tool("kubectl", GET_PODS, "checkout 0/1")
    lazy.handoff("fixer", "please fix it")
    lazy.tool("kubectl", GET_PODS, "checkout 0/1", agent="fixer")
    assert rules(lazy.steps, mode="FM-2.4") == [("FM-2.4", "redone_after_handoff")]
