"""FM-2.4 information withholding.

The detector's rules on plain step sequences: each where it should fire, and its near
misses, which must stay silent."""

from __future__ import annotations

import pytest

from mast_otel.processors.detectors.config import DetectorsConfig
from mast_otel.processors.detectors.withholding.config import WithholdingConfig
from tests.detectors.real_runs import tau_findings
from tests.steps import FIX, GET_PODS, RunBuilder, analyse, rules


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


# --- a yes asked for a paid change without its price ----------------------------------------

_PLAN = '{"account": "ACME-9", "plan": "starter", "lines": [{"item": "starter", "amount": 20}]}'
_UPGRADED = (
    '{"account": "ACME-9", "plan": "team", "lines": [{"item": "starter", "amount": 20}, '
    '{"item": "team upgrade", "card": "card_77", "amount": 180}]}'
)


def _upgrade(consent: str, answer: str = "Yes, go ahead.", result: str = _UPGRADED) -> RunBuilder:
    """A CRM billing agent: reads the account, asks for a yes, upgrades the plan on a card."""
    run = RunBuilder(agent="billing")
    run.llm(input_text="Move ACME-9 to the team plan.", calls=("get_account",))
    run.tool("get_account", {"account_id": "ACME-9"}, _PLAN)
    run.llm(input_text="Move ACME-9 to the team plan.", output=consent)
    run.human(answer)
    run.llm(input_text=answer, calls=("upgrade_subscription",))
    run.tool(
        "upgrade_subscription",
        {"account_id": "ACME-9", "plan": "team", "payment_card": "card_77"},
        result,
    )
    return run


def test_fm24_a_yes_to_a_paid_change_without_its_price():
    run = _upgrade("I will move ACME-9 to the team plan on card_77. Please confirm to proceed.")
    findings = [f for f in analyse(run.steps)[0] if f.mode == "FM-2.4"]
    assert [f.rule for f in findings] == ["unpriced_consent"]
    assert "upgrade_subscription" in findings[0].message and "payment_card" in findings[0].message


_OPAQUE = '{"status": "ok"}'


def test_fm24_a_priced_free_refunded_or_uncharged_change_is_silent():
    told = _upgrade("The team plan costs $180 more on card_77. Please confirm to proceed.")
    answer = _upgrade("Please confirm the move.", answer="Yes, charge the $180 to card_77.")
    nothing = _upgrade("Please confirm the move to the team plan.", result=_PLAN)
    bare = _upgrade("The team plan costs 180 more per year. Shall I go ahead?")
    # Free or a refund, and a result that does not show what was charged: taken at its word.
    free = _upgrade("The move is at no additional cost. Would you like to proceed?", result=_OPAQUE)
    refund = _upgrade("I will refund the difference to card_77. Please confirm.", result=_OPAQUE)
    for run in (told, free, answer, refund, nothing, bare):
        assert rules(run.steps, mode="FM-2.4") == []


def test_fm24_a_result_showing_a_charge_outweighs_words_of_free_or_refund():
    # The result adds a 180 line on card_77: "free" and "refund" spoke of something else.
    for consent in (
        "The seat licences are free of charge. Would you like to proceed?",
        "I will refund the unused month to card_77 and move you to the team plan. Confirm?",
    ):
        found = [f for f in analyse(_upgrade(consent).steps)[0] if f.mode == "FM-2.4"]
        assert [f.rule for f in found] == ["unpriced_consent"]
        assert "shows 180 charged" in found[0].message


def _ticket_desk(between: str, consent: str = "") -> RunBuilder:
    """An event-ticketing agent: a yes to two changes, made one after the other with `between`
    (a read, or words to the user) before them; the second one charges the card."""
    tickets = (
        '{"order_id": "ORD-5", "lines": [{"item": "2 seats", "card": "visa_1", "amount": 90}]}'
    )
    after_names = (
        '{"order_id": "ORD-5", "holder": "Kim Lee", "lines": [{"item": "2 seats", "card": '
        '"visa_1", "amount": 90}]}'
    )
    upgraded = (
        '{"order_id": "ORD-5", "holder": "Kim Lee", "lines": [{"item": "2 seats", "card": '
        '"visa_1", "amount": 90}, {"item": "front row", "card": "visa_1", "amount": 60}]}'
    )
    run = RunBuilder(agent="tickets")
    run.llm(
        input_text="Put the order in Kim's name and move us to the front row.", calls=("get_order",)
    )
    run.tool("get_order", {"order_id": "ORD-5"}, tickets)
    run.llm(output=consent or "1. Holder: Kim Lee (no charge). 2. Seats: front row. Go ahead?")
    run.human("Yes please.")
    if between == "read":
        run.llm(input_text="Yes please.", calls=("get_venue",))
        run.tool("get_venue", {"venue_id": "V-1"}, '{"venue_id": "V-1", "rows": 30}')
    run.llm(input_text="Yes please.", calls=("update_order_holder",))
    run.tool("update_order_holder", {"order_id": "ORD-5", "holder": "Kim Lee"}, after_names)
    if between == "words":
        run.llm(output="The holder is now Kim Lee.")
    run.llm(input_text="", calls=("update_order_seats",))
    run.tool(
        "update_order_seats",
        {"order_id": "ORD-5", "row": "front", "payment_id": "visa_1"},
        upgraded,
    )
    return run


def test_fm24_reads_and_other_changes_between_the_yes_and_the_charge():
    for between in ("", "read"):
        found = [f for f in analyse(_ticket_desk(between).steps)[0] if f.mode == "FM-2.4"]
        assert [f.rule for f in found] == ["unpriced_consent"], between
        assert "update_order_seats" in found[0].message and "60" in found[0].message
    # Words to the user after the first change: the second is no longer the yes's deal.
    assert rules(_ticket_desk("words").steps, mode="FM-2.4") == []


def test_fm24_a_change_without_payment_or_not_right_after_the_yes_is_silent():
    clinic = RunBuilder(agent="clinic")
    clinic.llm(output="Shall I move your appointment to Tuesday 10:00? Please confirm.")
    clinic.human("Yes please.")
    clinic.llm(input_text="Yes please.", calls=("reschedule",))
    clinic.tool("reschedule", {"appointment": "A-17", "slot": "tue-10"}, '{"ok": true}')
    assert rules(clinic.steps, mode="FM-2.4") == []
    # A statement with no question, then the user speaks of something else, then a change.
    later = _upgrade("ACME-9 is on the starter plan.")
    assert rules(later.steps, mode="FM-2.4") == []


def test_fm24_unpriced_consent_settings_are_checked():
    with pytest.raises(ValueError, match=r"detectors\.withholding\.consent_pattern"):
        WithholdingConfig(consent_pattern="(").validate()
    with pytest.raises(ValueError, match=r"detectors\.withholding\.amount_pattern"):
        WithholdingConfig(amount_pattern="").validate()
    off = DetectorsConfig()
    off.withholding.consent_pattern = ""
    run = _upgrade("Please confirm to proceed.")
    assert [f for f in analyse(run.steps, off)[0] if f.mode == "FM-2.4"] == []


def test_fm24_real_run_asks_a_yes_to_an_upgrade_without_its_cost():
    # Run 84: "The payment for the upgrade will be made using your credit card ending in
    # 2135. Please confirm", and update_reservation_flights charges 288 to that card.
    found = tau_findings(84, "FM-2.4")
    assert [f.rule for f in found] == ["unpriced_consent"]
    assert "update_reservation_flights" in found[0].message
    # Run 126 told the $597 before the same kind of change: silent.
    assert tau_findings(126, "FM-2.4") == []


def test_fm24_real_runs_charge_after_reads_or_a_first_change_past_the_yes():
    # Run 34: the yes (13) to "upgrade XEHM4B ... then cancel both", six reads, then
    # update_reservation_flights charges 288 to the card; no amount was ever told ("refund"
    # was said of the cancellations).
    found = tau_findings(34, "FM-2.4")
    assert [f.rule for f in found] == ["unpriced_consent"]
    assert "XEHM4B" in found[0].message and "288 charged" in found[0].message
    # Run 55: the yes (17) to three changes; the passenger change first, then the cabin
    # change charges 209 to the gift card ("no additional charges" was said of the bags).
    found = tau_findings(55, "FM-2.4")
    assert [f.rule for f in found] == ["unpriced_consent"]
    assert "gift_card_8190333" in found[0].message and "209 charged" in found[0].message


def _two_charges(consent: str) -> RunBuilder:
    """A telecom agent: one yes, then two changes on the account, each charging the card."""
    plan = '{"account_id": "AC-3", "lines": [{"item": "plan", "card": "mc_9", "amount": 30}]}'
    roaming = plan.replace("}]}", '}, {"item": "roaming", "card": "mc_9", "amount": 15}]}')
    data = roaming.replace("}]}", '}, {"item": "data pack", "card": "mc_9", "amount": 20}]}')
    run = RunBuilder(agent="telecom")
    run.llm(input_text="Add roaming and a data pack to AC-3.", calls=("get_account",))
    run.tool("get_account", {"account_id": "AC-3"}, plan)
    run.llm(output=consent)
    run.human("Yes.")
    run.llm(input_text="Yes.", calls=("add_roaming",))
    run.tool("add_roaming", {"account_id": "AC-3", "payment_card": "mc_9"}, roaming)
    run.llm(input_text="Yes.", calls=("add_data_pack",))
    run.tool("add_data_pack", {"account_id": "AC-3", "payment_card": "mc_9"}, data)
    return run


def test_fm24_a_price_told_for_one_part_of_the_deal_does_not_price_the_next():
    # Roaming was priced ($15), the data pack was not, and it charges 20.
    run = _two_charges("Roaming costs $15 a month; I will also add the data pack. Proceed?")
    found = [f for f in analyse(run.steps)[0] if f.mode == "FM-2.4"]
    assert [f.rule for f in found] == ["unpriced_consent"]
    assert "add_data_pack" in found[0].message and "no message told 20" in found[0].message
    # Each part priced, or the total of both told: silent.
    for told in (
        "Roaming costs $15 and the data pack $20. Proceed?",
        "Roaming and the data pack come to $35 in all. Proceed?",
    ):
        assert rules(_two_charges(told).steps, mode="FM-2.4") == [], told


def test_fm24_real_run_prices_the_flights_not_the_bag_added_with_them():
    # Run 103: the yes (27) to new return flights ("Total Price: $242") and one checked bag;
    # the flight change refunds 11, the bag change charges 50, which no message told.
    found = tau_findings(103, "FM-2.4")
    assert [f.rule for f in found] == ["unpriced_consent"]
    assert "update_reservation_baggages" in found[0].message and "50" in found[0].message
