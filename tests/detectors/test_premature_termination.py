"""FM-3.1 premature termination.

The detector's rules on plain step sequences: each where it should fire, and its near
misses, which must stay silent."""

from __future__ import annotations

import pytest

from mast_otel.processors.detectors.config import DetectorsConfig
from mast_otel.processors.detectors.premature_termination.config import PrematureTerminationConfig
from tests.imported import tau_findings
from tests.steps import GET_PODS, RunBuilder, analyse, only, rules


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


def test_fm31_tau_bench_user_ends_after_a_failed_write():
    # Run 165: the downgrade fails (not enough seats), the agent says so, the user ends.
    assert tau_findings(165, "FM-3.1") == []


# --- the run parks the request on the user --------------------------------------------------


def _helpdesk(closing: str, change: bool = False) -> RunBuilder:
    """An IT helpdesk agent: the user wants a laptop re-imaged, the agent looks the user up,
    lists their devices, reads one, and (if `change`) opens a work order before `closing`."""
    run = RunBuilder(agent="helpdesk")
    run.human("Please re-image my work laptop, it keeps crashing. I'm dana.k.")
    run.tool("get_employee", {"employee_id": "dana.k"}, '{"devices": ["LT-0412", "LT-0977"]}')
    run.tool("get_device", {"device_id": "LT-0412"}, '{"device_id": "LT-0412", "kind": "phone"}')
    if change:
        run.tool("create_work_order", {"device_id": "LT-0977", "task": "reimage"}, '{"id": "W-1"}')
    run.final(closing)
    run.human("Thanks, I'll look for it.")
    return run


def test_fm31_helpdesk_ends_waiting_for_an_identifier_it_could_read():
    run = _helpdesk(
        "LT-0412 is a phone. Once you have the asset tag of the laptop, send it and I will "
        "start the re-image."
    )
    findings = only(analyse(run.steps)[0], "FM-3.1")
    assert [f.rule for f in findings] == ["parked_on_user"]
    assert "Once you have the asset tag of the laptop" in findings[0].message
    config = DetectorsConfig()
    config.premature_termination.deferral_pattern = ""
    assert rules(run.steps, config, mode="FM-3.1") == []


def test_fm31_a_sign_off_or_a_change_made_is_not_parked():
    # A sign-off offering help "if you have any questions" waits for nothing.
    polite = _helpdesk("The re-image is scheduled. If you have any questions, let me know.")
    later = _helpdesk("Nothing is open yet. Reach out again when you have a moment.")
    more = _helpdesk("Nothing is open yet. Once you have more questions, write to me.")
    # The request was acted on (a work order opened); what is left waits on the user.
    acted = _helpdesk("Work order W-1 is open. Once you have a backup, tell me.", change=True)
    for run in (polite, later, more, acted):
        assert rules(run.steps, mode="FM-3.1") == []
    idle = _helpdesk("Nothing is open yet. Once you have a backup, tell me.")
    assert rules(idle.steps, mode="FM-3.1") == [("FM-3.1", "parked_on_user")]


def test_fm31_tau_bench_ends_waiting_for_a_reservation_id_it_had_listed():
    # Run 105: lists four reservation ids (6), reads only UM3OG5, and ends "Feel free to
    # reach out whenever you have the reservation ID" with nothing changed (labelled at 14).
    findings = tau_findings(105, "FM-3.1")
    assert [f.rule for f in findings] == ["parked_on_user"]
    assert "whenever you have the reservation ID" in findings[0].message
    # Run 55 made its three changes and signs off: silent.
    assert tau_findings(55, "FM-3.1") == []


# --- the agent refuses what its own tools return ---------------------------------------------

_ACCOUNT = (
    '{"customer_id": "c-88", "email": "li@shop.io", "store_credit": {"balance": 40}, '
    '"orders": ["O-17", "O-22"]}'
)


def _shop(refusal: str, result: str = _ACCOUNT) -> RunBuilder:
    """A shop assistant refuses the first question, then serves a second one with a read."""
    run = RunBuilder(agent="shop")
    run.human("How much store credit do I have left?")
    run.final(refusal)
    run.human("Fine. Then please return order O-17, I'm c-88.")
    run.llm(input_text="Fine. Then please return order O-17, I'm c-88.", calls=("get_customer",))
    run.tool("get_customer", {"customer_id": "c-88"}, result)
    run.tool("create_return", {"order_id": "O-17"}, '{"return_id": "R-5", "status": "open"}')
    run.final("Return R-5 is open for O-17.")
    return run


def test_fm31_shop_refuses_store_credit_that_a_later_read_returns():
    run = _shop("I'm unable to provide information about your store credit balance. Sorry!")
    findings = only(analyse(run.steps)[0], "FM-3.1")
    assert [(f.rule, f.span_id) for f in findings] == [
        ("refused_what_tools_return", run.steps[1].span_id)
    ]
    assert "unable to provide information about your store credit" in findings[0].message
    assert 'get_customer({"customer_id": "c-88"})' in findings[0].message
    config = DetectorsConfig()
    config.premature_termination.refusal_pattern = ""
    assert rules(run.steps, config, mode="FM-3.1") == []


def test_fm31_a_refused_way_of_looking_or_a_thing_no_result_holds_is_no_giving_up():
    # Refusing a way ("using just your email") asks for another identifier.
    way = _shop("I'm unable to look up store credit using just your email. Your customer id?")
    # No result of the run holds what was refused (a loyalty tier).
    other = _shop("I'm unable to provide information about your loyalty tier. Sorry!")
    # A refusal of an action is no refusal to look something up.
    action = _shop("I cannot provide a refund as store credit. Sorry!")
    for run in (way, other, action):
        assert rules(run.steps, mode="FM-3.1") == []


def test_fm31_refusal_pattern_is_checked():
    with pytest.raises(ValueError, match=r"premature_termination\.refusal_pattern"):
        PrematureTerminationConfig(refusal_pattern="(").validate()


def test_fm31_tau_bench_refuses_balances_its_profile_read_returns():
    # Run 109: "I'm unable to provide information about your gift card balances" (2) and the
    # certificate balances (4); get_user_details returns both at 9 (labelled FM-3.1 at 2).
    findings = tau_findings(109, "FM-3.1")
    assert [f.rule for f in findings] == ["refused_what_tools_return"] * 2
    assert "gift card balances" in findings[0].message
    assert "get_user_details" in findings[0].message
    # Run 33 refuses a way of looking ("using just the user ID"), then looks the user up:
    # FM-2.6's case, not giving up.
    assert tau_findings(33, "FM-3.1") == []
