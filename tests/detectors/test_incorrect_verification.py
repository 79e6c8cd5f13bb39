"""FM-3.3 incorrect verification.

The detector's rules on plain step sequences: each where it should fire, and its near
misses, which must stay silent."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mast_otel.collector.config import Config
from mast_otel.processors.detectors.incorrect_verification.config import IncorrectVerificationConfig
from tests.detectors.real_runs import tau_findings
from tests.imported import findings_of, tool_call
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


def test_fm33_on_real_runs():
    # run 24: the user gave yara_garcia_1905@gmail.com; the profile read back holds
    # yara.garcia6882@example.com and the agent says it found the user's profile
    found = tau_findings(24, "FM-3.3")
    assert [f.rule for f in found] == ["identity_mismatch"]
    assert "yara.garcia6882@example.com" in found[0].message
    assert tau_findings(6, "FM-3.3") == []


# --- a change on a record whose items are all in the past ---------------------------------


def _clinic(sessions: list[str], system: str = "The current date is 2025-03-10.") -> list[Any]:
    """A clinic scheduling agent reads a booking and cancels it."""
    booking = {
        "booking_id": "BK-7731",
        "patient_id": "P-220",
        "created_at": "2025-02-01T09:00:00",
        "sessions": [{"therapist": "Dr. Lee", "date": day} for day in sessions],
        "patients": [{"name": "Ana Ruiz", "birth_date": "1981-06-02"}],
    }
    return [
        {"role": "system", "content": f"You book physiotherapy sessions. {system}"},
        {"role": "user", "content": "Please cancel my booking BK-7731, patient P-220."},
        tool_call("c1", "get_booking", {"booking_id": "BK-7731"}),
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps(booking)},
        {"role": "assistant", "content": "Your sessions can be cancelled. Shall I go ahead?"},
        {"role": "user", "content": "yes"},
        tool_call("c2", "cancel_booking", {"booking_id": "BK-7731"}),
        {"role": "tool", "tool_call_id": "c2", "content": '{"booking_id": "BK-7731", "ok": 1}'},
        {"role": "assistant", "content": "Booking BK-7731 has been cancelled."},
    ]


def test_fm33_clinic_agent_cancels_a_booking_whose_sessions_are_all_over():
    found = [f for f in findings_of([_clinic(["2025-03-03", "2025-03-07"])]) if f.mode == "FM-3.3"]
    assert [f.rule for f in found] == ["change_on_past_record"]
    assert found[0].evidence["latest_item_date"] == "2025-03-07"
    assert found[0].evidence["current_date"] == "2025-03-10"
    # Two sessions: the patient's birth date is no session.
    assert found[0].evidence["items"] == 2
    assert "cancel_booking" in found[0].message and "get_booking" in found[0].message


def test_fm33_a_record_still_to_come_or_no_stated_date_is_silent():
    runs = [
        _clinic(["2025-03-07", "2025-03-12"]),  # one session still to come
        _clinic(["2025-03-10"]),  # today
        _clinic([]),  # only a birth date: nothing of the booking is dated
        _clinic(["2025-03-03"], system="Be kind."),  # the instructions give no date
    ]
    for run in runs:
        assert [f.rule for f in findings_of([run]) if f.mode == "FM-3.3"] == []


def test_fm33_past_record_rule_is_configured_and_checked():
    config = Config()
    config.detectors.incorrect_verification.current_date_pattern = ""
    assert [f for f in findings_of([_clinic(["2025-03-03"])], config) if f.mode == "FM-3.3"] == []
    with pytest.raises(ValueError, match="needs a group"):
        IncorrectVerificationConfig(current_date_pattern=r"today is \d+").validate()
    with pytest.raises(ValueError, match="past_window_days"):
        IncorrectVerificationConfig(past_window_days=0).validate()


def test_fm33_real_run_cancels_a_reservation_already_flown():
    # Run 27 reads NQNU5R (flights on 2024-05-13 and 14; the instructions say the current time
    # is 2024-05-15) and cancels it (labelled FM-3.3).
    found = [f for f in tau_findings(27, "FM-3.3") if f.rule == "change_on_past_record"]
    assert [f.evidence["record"] for f in found] == ["nqnu5r"]
    assert found[0].evidence["latest_item_date"] == "2024-05-14"
    # Run 2 changes JG7FMM and 2FBBAH, read before and still to come: silent.
    assert [f for f in tau_findings(2, "FM-3.3") if f.rule == "change_on_past_record"] == []
