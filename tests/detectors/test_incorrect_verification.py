"""FM-3.3 incorrect verification.

The detector's rules on plain step sequences: each where it should fire, and its near
misses, which must stay silent."""

from __future__ import annotations

from tests.detectors.real_runs import needs_tau, tau_findings
from tests.steps import FIX, GET_PODS, RunBuilder, analyse, rules


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


# --- conclusions drawn from results as the run goes ------------------------------------------


def _crm_lookup(answer: str) -> RunBuilder:
    run = RunBuilder(agent="crm")
    run.llm(
        input_text="Hi, I'm dana.k@acme.io and I want my plan upgraded.", calls=("get_customer",)
    )
    run.tool(
        "get_customer",
        {"customer_id": "dana_k"},
        '{"id": "dana_k", "email": "dana.k@globex.com", "plan": "basic"}',
    )
    run.llm(input_text="Hi, I'm dana.k@acme.io and I want my plan upgraded.", output=answer)
    return run


def test_fm33_a_record_whose_email_is_not_the_users_taken_for_theirs():
    run = _crm_lookup("Thanks Dana, I found your account. Your plan is basic; shall I upgrade it?")
    findings = [f for f in analyse([*run.steps, run.root()])[0] if f.mode == "FM-3.3"]
    assert [f.rule for f in findings] == ["identity_mismatch"]
    assert "dana.k@globex.com" in findings[0].message
    assert "dana.k@acme.io" in findings[0].message
    assert "get_customer" in findings[0].message


def test_fm33_noticing_the_mismatch_or_a_matching_record_is_silent():
    noticed = _crm_lookup("The email on account dana_k does not match the one you gave me.")
    assert rules([*noticed.steps, noticed.root()], mode="FM-3.3") == []
    run = RunBuilder(agent="crm")
    run.llm(input_text="I'm Dana.K@acme.io.", calls=("get_customer",))
    run.tool("get_customer", {"email": "dana.k@acme.io"}, '{"email": "dana.k@acme.io"}')
    run.llm(input_text="I'm Dana.K@acme.io.", output="Found your account.")
    assert rules([*run.steps, run.root()], mode="FM-3.3") == []


def test_fm33_success_told_after_the_change_failed():
    run = RunBuilder(agent="coder")
    run.llm(input_text="Deploy the fix to staging.", calls=("deploy_service",))
    run.tool(
        "deploy_service",
        {"service": "api", "env": "staging"},
        '{"status": "rejected", "reason": "insufficient quota in staging"}',
    )
    run.llm(
        input_text="Deploy the fix to staging.",
        output="The fix has been deployed to staging successfully.",
    )
    findings = [f for f in analyse([*run.steps, run.root()])[0] if f.mode == "FM-3.3"]
    assert [f.rule for f in findings] == ["success_after_failed_change"]
    assert "deploy_service" in findings[0].message and "insufficient quota" in findings[0].message


def test_fm33_success_after_a_retry_that_worked_or_an_honest_report_is_silent():
    run = RunBuilder(agent="coder")
    run.llm(input_text="Deploy the fix to staging.", calls=("deploy_service",))
    run.tool("deploy_service", {"service": "api"}, error="Error: registry timeout")
    run.llm(input_text="Deploy the fix to staging.", output="The deploy failed; retrying.")
    run.llm(input_text="Deploy the fix to staging.", calls=("deploy_service",))
    run.tool("deploy_service", {"service": "api"}, '{"status": "live"}')
    run.llm(input_text="Deploy the fix to staging.", output="The fix has been deployed.")
    assert rules([*run.steps, run.root()], mode="FM-3.3") == []


@needs_tau
def test_fm33_on_real_runs():
    # run 24: the user gave yara_garcia_1905@gmail.com; the profile read back holds
    # yara.garcia6882@example.com and the agent says it found the user's profile
    found = tau_findings(24, "FM-3.3")
    assert [f.rule for f in found] == ["identity_mismatch"]
    assert "yara.garcia6882@example.com" in found[0].message
    assert tau_findings(6, "FM-3.3") == []
