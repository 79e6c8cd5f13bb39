"""FM-3.2 no or incomplete verification.

The detector's rules on plain step sequences: each where it should fire, and its near
misses, which must stay silent."""

from __future__ import annotations

import json
from pathlib import Path

from tests.imported import codex_findings, tau_findings
from tests.steps import GET_PODS, PODS_BAD, RESTART, RunBuilder, analyse, modes, only, rules


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


# --- record ids read before the change; a change that reports its new state --------------------

PATCH = "*** Begin Patch\n*** Update File: src/cart.py\n@@\n-a\n+b\n*** End Patch"


def test_fm32_crm_change_reporting_its_new_state_is_checked():
    run = RunBuilder(agent="crm-agent")
    run.human("Close ticket T-42, the customer confirmed the fix.")
    run.tool("get_ticket", {"ticket_id": "T-42"}, '{"id": "T-42", "status": "open"}')
    run.tool("close_ticket", {"ticket_id": "T-42"}, '{"id": "T-42", "status": "closed"}')
    run.final("Ticket T-42 is closed.")
    assert rules(run.steps, mode="FM-3.2") == []


def test_fm32_crm_change_answering_ok_is_unverified():
    run = RunBuilder(agent="crm-agent")
    run.tool("get_ticket", {"ticket_id": "T-42"}, '{"id": "T-42", "status": "open"}')
    run.tool("close_ticket", {"ticket_id": "T-42"}, "ok")
    run.final("Ticket T-42 is closed.")
    findings = only(analyse(run.steps)[0], "FM-3.2")
    assert [f.rule for f in findings] == ["unverified_change"]
    assert "close_ticket changed t-42" in findings[0].message


def test_fm32_crm_change_on_an_id_no_tool_showed():
    run = RunBuilder(agent="crm-agent")
    run.human("Refund order 7781 to my card card_0042.")
    run.tool("get_order", {"order_id": "7781"}, '{"order_id": "7781", "total": 40}')
    run.tool(
        "issue_refund",
        {"order_id": "7781", "payment": {"payment_id": "card_0042"}},
        '{"refund_id": "r1", "order_id": "7781", "payment_id": "card_0042"}',
    )
    findings = only(analyse(run.steps)[0], "FM-3.2")
    assert [f.rule for f in findings] == ["unchecked_record"]
    assert "card_0042" in findings[0].message and "7781" not in findings[0].message


def test_fm32_coding_agent_patch_checked_by_tests_or_read_back():
    for check in (
        ("shell", {"command": ["bash", "-lc", "python -m pytest -q tests/test_cart.py"]}),
        ("shell", {"command": ["bash", "-lc", "sed -n 1,40p src/cart.py"]}),
    ):
        run = RunBuilder(agent="codex")
        run.tool("shell", {"command": ["bash", "-lc", "cat src/cart.py"]}, "def total(): ...")
        run.tool("apply_patch", {"input": PATCH}, "Success. Updated the following files:")
        run.tool(*check, "1 passed")
        run.final("Fixed the total in src/cart.py.")
        assert rules(run.steps, mode="FM-3.2") == [], check


def test_fm32_coding_agent_patch_never_checked():
    run = RunBuilder(agent="codex")
    run.tool("shell", {"command": ["bash", "-lc", "cat src/cart.py"]}, "def total(): ...")
    run.tool("update_plan", {"plan": [{"step": "run tests", "status": "pending"}]}, "ok")
    run.tool("apply_patch", {"input": PATCH}, "Success. Updated the following files:")
    run.tool("shell", {"command": ["bash", "-lc", "echo 'pytest passes'"]}, "pytest passes")
    run.final("I changed the total in src/cart.py.")
    findings = only(analyse(run.steps)[0], "FM-3.2")
    assert [f.rule for f in findings] == ["unverified_change"]
    assert "apply_patch changed src/cart.py" in findings[0].message


def test_fm32_tau_bench_cancel_on_an_id_from_the_user_only():
    # Run 141 cancels 3RK2T9 on the user's word, never reading the reservation (labelled).
    # It also told the user the reservation was eligible before reading anything.
    findings = tau_findings(141, "FM-3.2")
    assert [(f.rule, "3rk2t9" in f.message) for f in findings] == [
        ("unchecked_record", True),
        ("verdict_without_read", False),
    ]


def test_fm32_tau_bench_booking_returns_its_record():
    # Run 0 books after reading the user and flights; the booking's result is the new
    # reservation record: no finding (labelled clean for FM-3.2).
    assert tau_findings(0, "FM-3.2") == []


def test_fm32_codex_session_patch_checked_by_its_test_run():
    # The Codex fixture: update_plan (planning), apply_patch on cart.py, then `pytest -q`.
    from mast_otel.collector.analyze import analyze_files
    from mast_otel.collector.config import Config

    fixture = (
        Path(__file__).resolve().parent.parent
        / "fixtures/codex/rollout-2025-11-22T21-45-35-019aad50-0000-7000-8000-00000000c0de.jsonl"
    )
    assert [f for f in analyze_files(Config(), [str(fixture)]) if f.mode == "FM-3.2"] == []
    # Without the test run, the patch is unverified; the plan is never a change.
    lines = [
        line
        for line in fixture.read_text().splitlines()
        if '"call_exec01"' not in line and "the cart tests pass" not in line
    ]
    findings = codex_findings([json.loads(line) for line in lines])
    unverified = [f for f in findings if f.mode == "FM-3.2"]
    assert [f.message for f in unverified] == [
        "apply_patch changed cart.py and the run ended without checking the result"
    ]
