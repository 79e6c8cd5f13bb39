"""FM-3.1 premature termination.

The detector's rules on plain step sequences: each where it should fire, and its near
misses, which must stay silent."""

from __future__ import annotations

import pytest

from mast_otel.processors.detectors.config import DetectorsConfig
from tests.imported import tau_file, tau_findings
from tests.steps import GET_PODS, RunBuilder, analyse, only, rules

needs_tau = pytest.mark.skipif(tau_file() is None, reason="../shared/data is absent")


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


# --- empty answers, bare announcements, re-prompts, nothing ever looked up ---------------------


def _coder() -> RunBuilder:
    run = RunBuilder(agent="codex")
    run.human("Fix the failing total() in src/cart.py and keep the tests green.")
    run.llm(calls=("shell",))
    run.tool("shell", {"command": ["bash", "-lc", "python -m pytest -q"]}, "1 failed")
    return run


def _empty(run: RunBuilder) -> None:
    """A model response with no text, no call and no output tokens."""
    run.llm(output="").output_tokens = 0


def test_fm31_coding_agent_ends_on_an_empty_answer():
    run = _coder()
    _empty(run)
    assert rules(run.steps, mode="FM-3.1") == [("FM-3.1", "empty_answer")]


def test_fm31_no_recorded_content_is_not_an_empty_answer():
    # An instrumentation that records no message content leaves every response blank.
    run = RunBuilder(agent="codex")
    run.llm(output="").output_tokens = 0
    run.tool("shell", {"command": ["bash", "-lc", "python -m pytest -q"]}, "2 passed")
    run.llm(output="").output_tokens = 0
    assert rules(run.steps, mode="FM-3.1") == []


def test_fm31_harness_reprompts_after_an_empty_answer():
    run = _coder()
    _empty(run)
    run.human("continue")
    run.tool("apply_patch", {"input": "*** Begin Patch\n*** Update File: src/cart.py\n"}, "ok")
    run.tool("shell", {"command": ["bash", "-lc", "python -m pytest -q"]}, "3 passed")
    run.final("total() now sums the line items; the tests pass.")
    assert rules(run.steps, mode="FM-3.1") == [("FM-3.1", "reprompted")]


def test_fm31_a_real_follow_up_after_an_answer_is_no_reprompt():
    run = _coder()
    run.final("The failure is in total(): it ignores discounts.")
    run.human("Also add a test for an unknown code.")
    run.tool("apply_patch", {"input": "*** Begin Patch\n*** Add File: tests/test_codes.py\n"}, "ok")
    run.tool("shell", {"command": ["bash", "-lc", "python -m pytest -q"]}, "4 passed")
    run.final("Added tests/test_codes.py; 4 tests pass.")
    assert rules(run.steps, mode="FM-3.1") == []


def test_fm31_ends_on_a_bare_announcement():
    run = RunBuilder(agent="crm-agent")
    run.human("Why was invoice INV-7 charged twice?")
    run.tool("get_invoice", {"invoice_id": "INV-7"}, '{"id": "INV-7", "charges": 2}')
    run.final("I see two charges on INV-7. Let me check the payment log for the second one.")
    assert rules(run.steps, mode="FM-3.1") == [("FM-3.1", "announced_only")]


def test_fm31_an_announcement_followed_by_its_call_or_a_sign_off_is_fine():
    run = RunBuilder(agent="crm-agent")
    run.human("Why was invoice INV-7 charged twice?")
    run.tool("get_invoice", {"invoice_id": "INV-7"}, '{"id": "INV-7", "charges": 2}')
    run.llm(output="Let me check the payment log.", calls=("get_payment_log",))
    run.tool("get_payment_log", {"invoice_id": "INV-7"}, "retry after timeout")
    run.final("The second charge was a retry after a timeout. Let me know if you want a refund.")
    assert rules(run.steps, mode="FM-3.1") == []


def test_fm31_never_looked_anything_up():
    run = RunBuilder(agent="crm-agent")
    run.human("What is the balance on my gift cards?")
    first = run.final("I'm unable to provide gift card balances. Please check your profile.")
    run.human("ok thanks")
    run.final("You're welcome!")
    findings = only(analyse(run.steps)[0], "FM-3.1")
    assert [(f.rule, f.span_id) for f in findings] == [("no_tool_call", first.span_id)]
    assert "unable to provide gift card balances" in findings[0].message
    config = DetectorsConfig()
    config.premature_termination.min_answers_without_tools = 0
    assert rules(run.steps, config, mode="FM-3.1") == []


@needs_tau
def test_fm31_tau_bench_stops_without_looking_up_the_reservation():
    # Run 54: asks for a reservation id the user lacks and never looks the user up (labelled
    # FM-3.1 at message 4); run 0 books and stays silent.
    findings = tau_findings(54, "FM-3.1")
    assert [f.rule for f in findings] == ["no_tool_call"]
    assert tau_findings(0, "FM-3.1") == []


def test_fm31_a_failure_the_user_was_told_of_before_ending_is_not_premature():
    run = RunBuilder(agent="crm-agent")
    run.tool("get_ticket", {"ticket_id": "T-1"}, '{"id": "T-1"}')
    run.tool("close_ticket", {"ticket_id": "T-1"}, error="Error: T-1 is locked by billing")
    run.final("T-1 is locked by billing, so I cannot close it. Shall I ask billing?")
    run.human("No, leave it, thanks.")
    assert rules(run.steps, mode="FM-3.1") == []
    # Without the user's turn the agent stopped on its own after the failure.
    run.steps.pop()
    assert rules(run.steps, mode="FM-3.1") == [("FM-3.1", "after_failed_call")]


@needs_tau
def test_fm31_tau_bench_user_ends_after_a_failed_write():
    # Run 165: the downgrade fails (not enough seats), the agent says so, the user ends.
    assert tau_findings(165, "FM-3.1") == []
