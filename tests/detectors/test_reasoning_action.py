"""FM-2.6 reasoning-action mismatch.

The detector's rules on plain step sequences: each where it should fire, and its near
misses, which must stay silent."""

from __future__ import annotations

import pytest

from mast_otel.processors import conventions
from mast_otel.processors.detectors.config import DetectorsConfig
from mast_otel.processors.detectors.reasoning_action.config import ReasoningActionConfig
from mast_otel.processors.detectors.reasoning_common import (
    list_totals,
    numbers,
)
from tests.detectors.real_runs import tau_findings
from tests.steps import GET_PODS, RunBuilder, analyse, rules


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


# --- statements of fact no tool result supports -----------------------------------------------


def test_fm26_an_amount_no_result_holds_is_unsupported():
    run = RunBuilder(agent="billing")
    run.llm(input_text="How much do I owe on invoice INV-7?", calls=("get_invoice",))
    run.tool(
        "get_invoice",
        {"invoice": "INV-7"},
        '{"invoice": "INV-7", "lines": [{"item": "seats", "amount": 1200.5}, '
        '{"item": "support", "amount": 34}], "credit": 100}',
    )
    run.llm(
        input_text="How much do I owe on invoice INV-7?",
        output="INV-7 comes to $1,234.50 (seats $1,200.50 and support $34); after your $100 "
        "credit you owe $1,134.50. With the late fee the balance is $1,310.",
    )
    findings = [f for f in analyse([*run.steps, run.root()])[0] if f.mode == "FM-2.6"]
    # the list total, a value as written in the result, and a difference of two are supported
    assert [(f.rule, f.evidence["value"]) for f in findings] == [("unsupported_value", "$1,310")]
    assert "late fee" in findings[0].message


def _clinic(said: str) -> list[str]:
    """A clinic booking agent: a visit's fee from one call, the patient's wallet from another."""
    run = RunBuilder(agent="clinic")
    run.llm(input_text="Book Dr. Okafor for me and my son.", calls=("get_slot",))
    run.tool(
        "get_slot",
        {"slot_id": "S-4"},
        '{"slot_id": "S-4", "fee": 85, "deposit": 20, '
        '"patients": [{"name": "Ada"}, {"name": "Tom"}]}',
    )
    run.tool("get_wallet", {"patient_id": "P-1"}, '{"patient_id": "P-1", "voucher": 40}')
    run.llm(input_text="Book Dr. Okafor for me and my son.", output=said)
    return [f.evidence["value"] for f in analyse([*run.steps, run.root()])[0] if f.mode == "FM-2.6"]


def test_fm26_an_amount_derived_within_one_source_a_told_figure_or_a_count_is_supported():
    # 105 = fee + deposit (one result); 170 = fee x 2 patients; 130 = 170 told, less the
    # voucher; working shown in the model's own message ("$85 + $40 = $125") derives its sum.
    assert _clinic("The visit is $105 with the deposit.") == []
    assert _clinic("For both of you the fees come to $170. With your voucher you pay $130.") == []
    assert _clinic("Fee $85 + top-up $40 = $125.") == []


def test_fm26_a_sum_across_two_unrelated_sources_supports_no_amount():
    # 125 = fee 85 + voucher 40: two values of two different results, no figure the model
    # told: nearly any amount is such a sum, so it supports nothing.
    assert _clinic("You owe $125 today.") == ["$125"]


def test_fm26_an_amount_from_the_user_or_the_instructions_is_supported():
    run = RunBuilder(agent="billing")
    run.llm(input_text="My budget is 450 EUR.", output="Understood: up to €450, plus the €15 fee.")
    root = run.root(**{conventions.TASK_DESCRIPTION: "Every order carries a €15 handling fee."})
    assert rules([*run.steps, root], mode="FM-2.6") == []


def test_fm26_a_claimed_change_no_successful_call_made():
    run = RunBuilder(agent="helpdesk")
    run.llm(input_text="Close T-9 and refund me.", calls=("update_ticket",))
    run.tool("update_ticket", {"ticket_id": "T-9", "status": "closed"}, '{"status": "closed"}')
    run.llm(
        input_text="Close T-9 and refund me.",
        output="Ticket T-9 has been closed. Your refund has been issued to the card on file.",
    )
    findings = [f for f in analyse([*run.steps, run.root()])[0] if f.mode == "FM-2.6"]
    assert [f.rule for f in findings] == ["claimed_unperformed_action"]
    assert "refund has been issued" in findings[0].message
    assert "ticket" in findings[0].message  # the successful change it did make


def test_fm26_a_claim_backed_by_its_call_or_a_conditional_one_is_silent():
    run = RunBuilder(agent="helpdesk")
    run.llm(input_text="Refund order 55.", calls=("create_refund",))
    run.tool("create_refund", {"order": "55", "amount": 20}, '{"refund": "R-1", "amount": 20}')
    run.llm(input_text="Refund order 55.", output="The refund R-1 has been issued.")
    run.llm(
        input_text="And the other order?",
        output="Once a refund has been issued it cannot be changed; no refund has been issued "
        "for order 56.",
    )
    failed = RunBuilder(agent="helpdesk")
    failed.llm(input_text="Refund order 55.", calls=("create_refund",))
    failed.tool("create_refund", {"order": "55"}, error="payment gateway timeout")
    failed.llm(input_text="Refund order 55.", output="Your refund has been issued.")
    assert rules([*run.steps, run.root()], mode="FM-2.6") == []
    assert rules([*failed.steps, failed.root()], mode="FM-2.6") == [
        ("FM-2.6", "claimed_unperformed_action")
    ]


def test_fm26_numbers_are_compared_as_numbers():
    assert numbers("paid $1,234.50 of 1234.5 and 7") == {1234.5, 7.0}
    assert list_totals('{"flights": [{"price": 537}, {"price": 996.5}], "n": 2}') == {1533.5}
    assert list_totals("not json [") == set()


def test_fm26_on_real_runs():
    # run 3 tells the user "one checked bag has been added"; only update_reservation_flights
    # succeeded, no baggage change was ever made. Run 6 says what it did.
    claimed = tau_findings(3, "FM-2.6")
    assert [f.rule for f in claimed] == ["claimed_unperformed_action"]
    assert "checked bag has been added" in claimed[0].message
    assert tau_findings(6, "FM-2.6") == []


def test_fm26_announcing_a_call_and_ending_names_what_was_announced():
    run = RunBuilder(agent="coder")
    run.llm(input_text="Fix the failing test in api.", calls=("apply_patch",))
    run.tool("apply_patch", {"input": "*** Update File: api/views.py"}, "Done")
    run.llm(
        input_text="Fix the failing test in api.",
        output="Patched. Now I will run apply_patch on the tests.",
    )
    findings = [f for f in analyse([*run.steps, run.root()])[0] if f.mode == "FM-2.6"]
    assert [f.rule for f in findings] == ["announced_then_stopped"]
    assert "apply_patch" in findings[0].message and "Now I will run" in findings[0].message


def test_fm26_let_me_know_or_a_user_turn_after_it_is_no_announcement():
    run = RunBuilder(agent="support")
    run.llm(input_text="Cancel R-1.", calls=("cancel_booking",))
    run.tool("cancel_booking", {"booking": "R-1"}, '{"status": "cancelled"}')
    run.llm(input_text="Cancel R-1.", output="R-1 is cancelled. Let me know about cancel_booking.")
    assert rules([*run.steps, run.root()], mode="FM-2.6") == []
    answered = RunBuilder(agent="support")
    answered.llm(input_text="Cancel R-1.", calls=("cancel_booking",))
    answered.tool("cancel_booking", {"booking": "R-1"}, '{"status": "cancelled"}')
    answered.llm(input_text="Cancel R-1.", output="I will also check cancel_booking's receipt.")
    answered.human("No need, thanks. Bye!")
    assert rules([*answered.steps, answered.root()], mode="FM-2.6") == []


def test_fm26_a_calculation_with_a_number_nothing_gave():
    run = RunBuilder(agent="finops")
    run.llm(input_text="What will m5.large cost us per month?", calls=("get_price",))
    run.tool("get_price", {"instance": "m5.large"}, '{"instance": "m5.large", "hourly": 0.096}')
    run.llm(input_text="What will m5.large cost us per month?", calls=("calculate",))
    run.tool("calculate", {"expression": "730 * 0.096 * 1.35"}, "94.608")
    run.llm(input_text="What will m5.large cost us per month?", output="About $94.61 a month.")
    root = run.root(**{conventions.TASK_DESCRIPTION: "A month counts as 730 hours."})
    findings = [f for f in analyse([*run.steps, root])[0] if f.mode == "FM-2.6"]
    assert [(f.rule, f.evidence["operand"]) for f in findings] == [("unsupported_operand", "1.35")]
    assert "730 * 0.096 * 1.35" in findings[0].message
    # every operand given (the hours by the instructions, the price by the tool, a count of 2
    # instances): the computed value needs no other support
    fine = RunBuilder(agent="finops")
    fine.llm(input_text="Two m5.large, per month?", calls=("get_price",))
    fine.tool("get_price", {"instance": "m5.large"}, '{"hourly": 0.096}')
    fine.llm(input_text="Two m5.large, per month?", calls=("calculate",))
    fine.tool("calculate", {"expression": "730 * 0.096 * 2"}, "140.16")
    fine.llm(input_text="Two m5.large, per month?", output="About $140.16 a month.")
    root = fine.root(**{conventions.TASK_DESCRIPTION: "A month counts as 730 hours."})
    assert rules([*fine.steps, root], mode="FM-2.6") == []


def test_fm26_a_made_up_multiplier_on_a_real_run():
    # run 114 quotes a business upgrade from calculate("498 * 1.5"): 1.5 comes from nowhere
    found = [f for f in tau_findings(114, "FM-2.6") if f.rule == "unsupported_operand"]
    assert len(found) == 1 and "1.5" in found[0].message and "498" in found[0].message


def test_fm26_a_summary_list_item_claiming_a_change_not_made():
    run = RunBuilder(agent="ops")
    run.llm(input_text="Scale web and open a ticket.", calls=("scale_deployment",))
    run.tool("scale_deployment", {"name": "web", "replicas": 4}, "deployment.apps/web scaled")
    run.llm(
        input_text="Scale web and open a ticket.",
        output="Summary:\n- **Scaling:** web scaled to 4 replicas\n- **Ticket:** OPS-12 created\n"
        "- A status page update can be sent later if you wish.",
    )
    findings = [f for f in analyse([*run.steps, run.root()])[0] if f.mode == "FM-2.6"]
    assert [f.rule for f in findings] == ["claimed_unperformed_action"]
    assert "OPS-12 created" in findings[0].message


def test_fm26_a_summary_claiming_a_bag_never_added_on_a_real_run():
    # run 153 ends "- **Checked Bag:** 1 checked bag added"; no baggage update was ever made
    found = [f for f in tau_findings(153, "FM-2.6") if f.rule == "claimed_unperformed_action"]
    assert len(found) == 1 and "1 checked bag added" in found[0].message


# --- a report of money moved that the change's result contradicts ---------------------------


def _billing(
    said: str, read_first: bool = True, config: DetectorsConfig | None = None
) -> list[tuple[str, object]]:
    """A subscription agent reads SUB-9, upgrades it (the result adds invoice I-2 for $85),
    then tells the user `said`."""
    run = RunBuilder(agent="billing")
    ask = "Upgrade my subscription SUB-9 to the pro plan."
    if read_first:
        run.llm(input_text=ask, calls=("get_subscription",))
        run.tool(
            "get_subscription",
            {"subscription_id": "SUB-9"},
            '{"subscription_id": "SUB-9", "plan": "basic", '
            '"invoices": [{"invoice_id": "I-1", "amount": 40}]}',
        )
    run.llm(input_text=ask, calls=("update_subscription",))
    run.tool(
        "update_subscription",
        {"subscription_id": "SUB-9", "plan": "pro"},
        '{"subscription_id": "SUB-9", "plan": "pro", "invoices": '
        '[{"invoice_id": "I-1", "amount": 40}, {"invoice_id": "I-2", "amount": 85}]}',
    )
    run.llm(input_text=ask, output=said)
    findings = analyse([*run.steps, run.root()], config)[0]
    return [(f.rule, f.evidence) for f in findings if f.mode == "FM-2.6"]


def test_fm26_billing_agent_reports_a_charge_the_result_contradicts():
    # $45 is the difference of the two plans (supported as a value), but the invoice the
    # upgrade added is $85.
    found = _billing("Done: SUB-9 is on pro. $45 has been charged to your card.")
    assert [rule for rule, _ in found] == ["report_contradicts_result"]
    evidence = found[0][1]
    assert isinstance(evidence, dict)
    assert evidence["told"] == 45 and evidence["result_values"] == [85.0]
    assert "update_subscription" in str(evidence["call"])


def test_fm26_a_matching_report_a_future_charge_or_no_earlier_read_is_silent():
    assert _billing("Done: SUB-9 is on pro. $85 has been charged to your card.") == []
    assert _billing("Done. $45 per month will be charged from now on.") == []
    assert _billing("Done: $45 has been charged to your card.", read_first=False) == []


def test_fm26_report_rule_is_configured_and_checked():
    config = DetectorsConfig()
    config.reasoning_action.charge_statement_pattern = ""
    assert _billing("Done: $45 has been charged to your card.", config=config) == []
    with pytest.raises(ValueError, match="max_tracked_records"):
        ReasoningActionConfig(max_tracked_records=0).validate()
    with pytest.raises(ValueError, match="charge_statement_pattern"):
        ReasoningActionConfig(charge_statement_pattern="(").validate()


def test_fm26_real_run_reports_the_planned_charge_not_the_one_made():
    # Run 117 tells the user $495 was charged; the update's result adds a payment of $1302
    # (labelled FM-2.6 at message 26).
    found = [f for f in tau_findings(117, "FM-2.6") if f.rule == "report_contradicts_result"]
    assert [f.evidence["told"] for f in found] == [495]
    assert 1302 in found[0].evidence["result_values"]
    # Run 20 reports the $146 its update charged: silent.
    assert [f for f in tau_findings(20, "FM-2.6") if f.rule == "report_contradicts_result"] == []
