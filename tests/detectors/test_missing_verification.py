"""FM-3.2 no or incomplete verification.

The detector's rules on plain step sequences: each where it should fire, and its near
misses, which must stay silent."""

from __future__ import annotations

from tests.steps import GET_PODS, PODS_BAD, RESTART, RunBuilder, analyse, modes, only


def test_a_change_never_checked_is_missing_verification():
    run = RunBuilder()
    run.tool("kubectl", GET_PODS, PODS_BAD)
    change = run.tool("kubectl", RESTART, "deployment.apps/checkout restarted")
    run.llm()
    findings, signatures = analyse([*run.steps, run.root()])
    missing = only(findings, "FM-3.2")
    assert modes(missing) == [("FM-3.2", "unverified_change")]
    assert missing[0].span_id == change.span_id
    assert sorted(missing[0].evidence["targets"]) == ["checkout", "shop"]
    assert signatures[0].mode_counts == {"FM-3.2": 1}


def test_a_check_of_another_resource_does_not_verify():
    run = RunBuilder()
    run.tool("kubectl", RESTART, "deployment.apps/checkout restarted")
    run.tool("kubectl", {"command": "kubectl get deployment payments -n billing"}, "1/1")
    findings, _ = analyse(run.steps)
    missing = only(findings, "FM-3.2")
    assert len(missing) == 1
    assert missing[0].evidence["reads_after_on_other_resources"] == ["kubectl"]


def test_a_check_after_the_change_is_verification():
    run = RunBuilder()
    run.tool("kubectl", RESTART, "deployment.apps/checkout restarted")
    run.tool("kubectl", GET_PODS, "checkout-8f1 1/1 Running 0 30s")
    findings, _ = analyse(run.steps)
    assert only(findings, "FM-3.2") == []


def test_an_alert_check_verifies_and_a_failed_change_needs_none():
    run = RunBuilder()
    run.tool("restart_deployment", {"name": "checkout"}, "restarted")
    run.tool("get_alerts", {}, "no alerts firing")
    run.tool("scale_deployment", {"name": "cart", "replicas": 2}, "", error="forbidden")
    findings, _ = analyse(run.steps)
    assert only(findings, "FM-3.2") == []
