"""FM-3.3 incorrect verification.

The detector's rules on plain step sequences: each where it should fire, and its near
misses, which must stay silent."""

from __future__ import annotations

from tests.steps import FIX, GET_PODS, RunBuilder, rules


def test_fm33_late_unhealthy_check_and_no_claim_near_miss():
    run = RunBuilder()
    run.tool("kubectl", FIX, "updated")
    run.t += 30_000_000_000  # half a minute later: the change had time to take effect
    run.tool("kubectl", GET_PODS, "checkout-2 0/1 CrashLoopBackOff")
    run.final("The issue is resolved.")
    assert rules(run.steps, mode="FM-3.3") == [("FM-3.3", "claimed_despite_unhealthy")]
    honest = RunBuilder()
    honest.tool("kubectl", FIX, "updated")
    honest.tool("kubectl", GET_PODS, "checkout-2 0/1 CrashLoopBackOff")
    honest.final("The pods still crash; the fix did not work.")
    assert rules(honest.steps, mode="FM-3.3") == []
