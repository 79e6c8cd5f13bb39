"""FM-2.2 fail to ask for clarification.

The detector's rules on plain step sequences: each where it should fire, and its near
misses, which must stay silent."""

from __future__ import annotations

from mast_otel.processors import conventions
from mast_otel.processors.detectors.config import DetectorsConfig
from mast_otel.processors.model import Step
from tests.detectors.real_runs import tau_findings
from tests.steps import TASK, RunBuilder, analyse, rules


def test_fm22_unnamed_target_and_its_near_miss():
    run = RunBuilder()
    run.llm(input_text=TASK)
    run.tool("kubectl", {"command": "kubectl rollout restart deployment/payments -n billing"})
    assert rules(run.steps, mode="FM-2.2") == [("FM-2.2", "unnamed_target")]
    named = RunBuilder()
    named.llm(input_text=TASK)
    named.tool("kubectl", {"command": "kubectl rollout restart deployment/checkout -n shop"})
    assert rules(named.steps, mode="FM-2.2") == []


# --- a choice among several made without asking ----------------------------------------------

WALLET = (
    '{"customer": "c_118", "payment_methods": ['
    '{"id": "card_40021", "brand": "visa", "last4": "4242"}, '
    '{"id": "card_77310", "brand": "amex", "last4": "0005"}]}'
)


def _refund(user_turn: str, wallet: str = WALLET, agent_said: str = "") -> RunBuilder:
    run = RunBuilder(agent="support")
    run.llm(input_text="Refund order 5512 please.", calls=("get_customer",))
    run.tool("get_customer", {"customer": "c_118"}, wallet)
    run.llm(input_text="Refund order 5512 please.", output=agent_said or "Which card?")
    run.llm(input_text=user_turn, calls=("create_refund",))
    run.tool("create_refund", {"order": "5512", "payment_method": "card_77310"}, "refunded")
    return run


def test_fm22_a_card_picked_among_several_without_asking():
    run = _refund("Just refund it, thanks.", agent_said="I can refund order 5512 now.")
    findings = [f for f in analyse(run.steps)[0] if f.mode == "FM-2.2"]
    assert [f.rule for f in findings] == ["unasked_choice"]
    assert "payment_method=card_77310" in findings[0].message
    assert "card_40021" in findings[0].message


def test_fm22_a_named_or_only_choice_is_silent():
    # the user names the card by its last four digits, a value of the object that holds it
    assert rules(_refund("The amex ending 0005, please.").steps, mode="FM-2.2") == []
    # the agent put the card to the user before using it
    asked = _refund("Yes.", agent_said="Shall I refund to card_77310?")
    assert rules(asked.steps, mode="FM-2.2") == []
    # one card only: nothing to choose among
    one = '{"payment_methods": [{"id": "card_77310", "last4": "0005"}]}'
    assert rules(_refund("Just refund it.", wallet=one).steps, mode="FM-2.2") == []


def test_fm22_a_set_of_items_of_one_kind_is_no_choice():
    run = RunBuilder(agent="planner")
    run.llm(input_text="Move my trip to Friday.", calls=("get_trip",))
    run.tool("get_trip", {"trip": "T-1"}, '{"legs": ["LEG1001", "LEG1002", "LEG1003"]}')
    run.llm(input_text="Move my trip to Friday.", calls=("update_trip",))
    run.tool("update_trip", {"trip": "T-1", "legs": ["LEG1001", "LEG1002"], "day": "fri"}, "ok")
    assert rules(run.steps, mode="FM-2.2") == []


def test_fm22_on_real_runs():
    # run 69: the user asks to add a bag; the agent charges credit_card_8003957, one of three
    # cards in the profile, without asking which
    found = [f for f in tau_findings(69, "FM-2.2") if f.evidence["value"] == "credit_card_8003957"]
    assert {f.rule for f in found} == {"unasked_choice"}
    assert "credit_card_" in found[0].evidence["others"][0]
    assert tau_findings(6, "FM-2.2") == []


def test_hostile_arguments_and_results_are_read_without_a_crash():
    deep = "[" * 50_000 + "]" * 50_000
    run = RunBuilder(agent="support")
    run.llm(input_text="Refund order 9 to card_1234.", calls=("get_customer",))
    run.tool("get_customer", {"customer": "c_1"}, deep)
    run.tool("get_customer", {"customer": "c_1"}, '{"a": [{"x": 1e400}, {"x": 1e400}]}')
    run.llm(
        input_text="Refund order 9.", output="You owe $" + "9" * 500 + ". Done: it has been sent"
    )
    run.tool("update_refund", deep, "ok")
    run.tool("calculate", {"expression": "1e400 * " + "9" * 400}, "inf")
    run.tool("update_refund", {"card": "card_9999", "nested": [[[["card_8888"]]]]}, deep)
    findings, signatures = analyse([*run.steps, run.root()])
    assert len(signatures) == 1
    assert all(f.message for f in findings)


# --- offers listed side by side, of different kinds ------------------------------------------

KEYED_WALLET = (
    '{"customer": "c_118", "wallet": {"card_77310": {"brand": "amex", "last4": "0005"}, '
    '"voucher_20411": {"balance": 30}}}'
)


def _keyed_refund(user_turn: str) -> RunBuilder:
    """A shop's support agent reads a wallet keyed by method (one card, one voucher) and
    refunds to the card."""
    run = RunBuilder(agent="support")
    run.human("Refund order 5512 please.")
    run.llm(input_text="Refund order 5512 please.", calls=("get_customer",))
    run.tool("get_customer", {"customer": "c_118"}, KEYED_WALLET)
    run.llm(input_text="Refund order 5512 please.", output="I can refund order 5512 now.")
    run.human(user_turn)
    run.llm(input_text=user_turn, calls=("create_refund",))
    run.tool("create_refund", {"order": "5512", "payment_method": "card_77310"}, "refunded")
    return run


def test_fm22_one_of_several_methods_of_different_kinds_picked_unasked():
    findings = [f for f in analyse(_keyed_refund("Sure, go ahead.").steps)[0] if f.mode == "FM-2.2"]
    assert [f.rule for f in findings] == ["unasked_choice"]
    assert findings[0].evidence["others"] == ["voucher_20411"]


def test_fm22_the_user_naming_the_only_one_of_its_kind_or_the_rule_off_is_silent():
    # "my card": the wallet holds one card.
    assert rules(_keyed_refund("Put it on my card.").steps, mode="FM-2.2") == []
    config = DetectorsConfig()
    config.clarification.siblings_are_offers = False
    found = analyse(_keyed_refund("Sure, go ahead.").steps, config)[0]
    assert [f for f in found if f.mode == "FM-2.2"] == []


def test_fm22_real_run_charges_the_only_credit_card_among_certificates_and_a_gift_card():
    # Run 183 charges credit_card_4196779 for an upgrade; the profile also holds two
    # certificates and a gift card, and nobody asked which (labelled FM-2.2 at message 38).
    found = tau_findings(183, "FM-2.2")
    assert [f.evidence["value"] for f in found] == ["credit_card_4196779"]
    assert "gift_card_5094406" in found[0].evidence["others"]
    # Run 70: the user says "use the gift card", the profile's only one: silent.
    assert tau_findings(70, "FM-2.2") == []


# --- offers the instructions rule out, and a kind the agent names --------------------------

CLINIC_POLICY = (
    "You book and move appointments for the clinic. If the appointment slot is moved, the "
    "patient must give one insurance plan for payment; vouchers cannot pay for a move."
)
PATIENT = (
    '{"patient": "p_77", "payment": {"insurance_40210": {"carrier": "acme"}, '
    '"voucher_55120": {"balance": 20}}}'
)


def _move(policy: str, wallet: str = PATIENT, tool: str = "update_appointment_slot") -> list[Step]:
    """A clinic's booking agent moves an appointment and pays with the insurance plan, the
    patient's one plan beside a voucher."""
    run = RunBuilder(agent="clinic")
    run.human("Please move my appointment A-19 to Friday.")
    run.llm(input_text="Please move my appointment A-19 to Friday.", calls=("get_patient",))
    run.tool("get_patient", {"patient": "p_77"}, wallet)
    run.llm(input_text="Please move my appointment A-19 to Friday.", output="Friday 10:00 is free.")
    run.human("Great, go ahead.")
    run.llm(input_text="Great, go ahead.", calls=(tool,))
    run.tool(tool, {"appointment": "A-19", "day": "fri", "payment_id": "insurance_40210"}, "ok")
    return [*run.steps, run.root(**{conventions.TASK_DESCRIPTION: policy})]


def test_fm22_an_offer_the_instructions_rule_out_leaves_a_forced_choice():
    # The policy allows only an insurance plan to pay for a moved slot: the voucher is no
    # option, and the one plan left was not a choice made unasked.
    assert rules(_move(CLINIC_POLICY), mode="FM-2.2") == []


def test_fm22_instructions_that_restrict_nothing_here_leave_the_choice_unasked():
    # Near misses: a policy that names no kind of payment for a moved slot, a tool that
    # changes another thing, two allowed plans, and the rule turned off: all still report.
    silent_policy = "You book and move appointments for the clinic. Be kind."
    assert rules(_move(silent_policy), mode="FM-2.2") == [("FM-2.2", "unasked_choice")]
    other_tool = _move(CLINIC_POLICY, tool="update_appointment_reminder")
    assert rules(other_tool, mode="FM-2.2") == [("FM-2.2", "unasked_choice")]
    two_plans = PATIENT.replace('"voucher_55120"', '"insurance_55120"')
    assert rules(_move(CLINIC_POLICY, wallet=two_plans), mode="FM-2.2") == [
        ("FM-2.2", "unasked_choice")
    ]
    config = DetectorsConfig()
    config.clarification.instructions_restrict_offers = False
    assert rules(_move(CLINIC_POLICY), config, mode="FM-2.2") == [("FM-2.2", "unasked_choice")]


def test_fm22_the_agent_naming_the_only_one_of_its_kind_puts_it_to_the_user():
    # "I will refund it to your card" with one card in the wallet: the user's yes chose it.
    said = _keyed_refund_told("I can refund order 5512 to your card. Shall I?", "Yes.")
    assert rules(said.steps, mode="FM-2.2") == []
    # Near miss: two cards; "your card" names neither.
    two = KEYED_WALLET.replace('"voucher_20411"', '"card_20411"')
    vague = _keyed_refund_told("I can refund order 5512 to your card. Shall I?", "Yes.", two)
    assert rules(vague.steps, mode="FM-2.2") == [("FM-2.2", "unasked_choice")]


def _keyed_refund_told(agent_said: str, user_turn: str, wallet: str = KEYED_WALLET) -> RunBuilder:
    run = RunBuilder(agent="support")
    run.human("Refund order 5512 please.")
    run.llm(input_text="Refund order 5512 please.", calls=("get_customer",))
    run.tool("get_customer", {"customer": "c_118"}, wallet)
    run.llm(input_text="Refund order 5512 please.", output=agent_said)
    run.human(user_turn)
    run.llm(input_text=user_turn, calls=("create_refund",))
    run.tool("create_refund", {"order": "5512", "payment_method": "card_77310"}, "refunded")
    return run


def test_fm22_real_run_paying_a_flight_change_with_the_only_allowed_kind_is_silent():
    # Run 56 pays a flight change with gift_card_8887175; the profile's other method is a
    # certificate, which the policy's "if the flights are changed, the user needs to provide
    # one gift card or credit card" rules out: no choice was made.
    assert tau_findings(56, "FM-2.2") == []


# --- a count nobody spoke of ----------------------------------------------------------------


def _hotel(turns: list[str], args: dict[str, object]) -> list[Step]:
    """A hotel's booking agent talks with a guest, then books a room."""
    run = RunBuilder(agent="hotel")
    for turn in turns:
        run.human(turn)
        run.llm(input_text=turn, output="Certainly. Which dates?")
    run.llm(input_text=turns[-1], calls=("book_room",))
    run.tool("book_room", args, '{"booking": "BK-5521"}')
    return run.steps


def test_fm22_a_count_no_turn_spoke_of_was_assumed():
    turns = ["I need a room in Lisbon from 4 June.", "A double room, please."]
    found = [f for f in analyse(_hotel(turns, {"city": "lisbon", "nights": 3}))[0]]
    found = [f for f in found if f.mode == "FM-2.2"]
    assert [f.rule for f in found] == ["unmentioned_count"]
    assert "nights=3" in found[0].message and found[0].evidence["argument"] == "nights"


def test_fm22_a_count_spoken_of_or_in_a_one_shot_task_is_silent():
    # the guest said how many nights; "night" and "nights" are one subject
    said = ["I need a room in Lisbon for three nights.", "A double room, please."]
    assert rules(_hotel(said, {"city": "lisbon", "nights": 3}), mode="FM-2.2") == []
    # a count word only ("total_guests"): the guests were spoken of
    guests = ["A room in Lisbon for me and one guest.", "From 4 June."]
    assert rules(_hotel(guests, {"city": "lisbon", "total_guests": 2}), mode="FM-2.2") == []
    # zero is no assumption, and a one-shot task is no conversation
    turns = ["I need a room in Lisbon from 4 June.", "A double room, please."]
    assert rules(_hotel(turns, {"city": "lisbon", "extra_beds": 0}), mode="FM-2.2") == []
    one = _hotel(["Book a room in Lisbon from 4 June."], {"city": "lisbon", "nights": 3})
    assert rules(one, mode="FM-2.2") == []


def test_fm22_a_count_guessed_in_a_refused_change_is_still_a_guess():
    # the clinic refuses the booking over the deposit, not the count: the guess was made
    turns = ["I'd like to book physiotherapy with Dr Okafor.", "Mornings suit me best."]
    run = RunBuilder(agent="clinic")
    for turn in turns:
        run.human(turn)
        run.llm(input_text=turn, output="Certainly. Let me check the calendar.")
    for _ in range(2):
        run.llm(input_text=turns[-1], calls=("book_appointment",))
        run.tool(
            "book_appointment",
            {"clinician": "okafor", "sessions": 6, "deposit": "card_4410"},
            error="deposit does not cover the fee",
        )
    found = [f for f in analyse(run.steps)[0] if f.mode == "FM-2.2"]
    # one finding: the retry repeats the same guess
    assert [f.rule for f in found] == ["unmentioned_count"]
    assert "sessions=6" in found[0].message


def test_fm22_a_refused_change_with_a_count_spoken_of_is_silent():
    turns = ["I'd like six physiotherapy sessions with Dr Okafor.", "Mornings suit me best."]
    run = RunBuilder(agent="clinic")
    for turn in turns:
        run.human(turn)
        run.llm(input_text=turn, output="Certainly. Let me check the calendar.")
    run.llm(input_text=turns[-1], calls=("book_appointment",))
    run.tool(
        "book_appointment",
        {"clinician": "okafor", "sessions": 6},
        error="deposit does not cover the fee",
    )
    assert rules(run.steps, mode="FM-2.2") == []


def test_fm22_real_run_guesses_bags_in_bookings_that_fail():
    # Run 196 books total_baggages=3 three times, each refused because the payment does not
    # add up; nobody spoke of bags (labelled FM-2.2: "later books total_baggages=3 without
    # asking about bags"). One finding: the retries repeat the guess.
    found = [f for f in tau_findings(196, "FM-2.2") if f.rule == "unmentioned_count"]
    assert len(found) == 1 and "total_baggages=3" in found[0].message


def test_fm22_real_run_books_bags_nobody_spoke_of():
    # Run 0 books total_baggages=3 although neither the agent nor the user ever spoke of bags
    # (labelled FM-2.2 at message 20).
    found = [f for f in tau_findings(0, "FM-2.2") if f.rule == "unmentioned_count"]
    assert found and "total_baggages=3" in found[0].message


# --- a value the changed record already held --------------------------------------------------

ORDER = '{"order": "5512", "status": "delivered", "payments": [{"method": "card_77310"}]}'


def _shop_change(user_turn: str, tool: str, method: str, result: str) -> list[Step]:
    """A shop's support agent reads the customer's two cards and the order (paid with one of
    them), the customer answers, and the agent makes a change passing a card."""
    run = RunBuilder(agent="shop")
    run.human("I'd like to change order 5512.")
    run.llm(input_text="I'd like to change order 5512.", calls=("get_customer", "get_order"))
    run.tool("get_customer", {"customer": "c_118"}, WALLET)
    run.tool("get_order", {"order": "5512"}, ORDER)
    run.llm(input_text="I'd like to change order 5512.", output="I can change order 5512.")
    run.human(user_turn)
    run.llm(input_text=user_turn, calls=(tool,))
    run.tool(tool, {"order": "5512", "payment_method": method}, result)
    return run.steps


REFUNDED = ORDER.replace('"card_77310"}', '"card_77310"}, {"method": "card_77310", "amount": -40}')


def test_fm22_keeping_the_record_s_own_value_at_the_user_s_request_is_no_pick():
    asked = "Cancel it and send the money back to the original payment method."
    assert rules(_shop_change(asked, "cancel_order", "card_77310", REFUNDED), mode="FM-2.2") == []
    # Near misses: the user said nothing of the payment, or the agent took the other card
    plain = _shop_change("Cancel it, please.", "cancel_order", "card_77310", REFUNDED)
    assert rules(plain, mode="FM-2.2") == [("FM-2.2", "unasked_choice")]
    other = _shop_change(asked, "cancel_order", "card_40021", REFUNDED)
    assert rules(other, mode="FM-2.2") == [("FM-2.2", "unasked_choice")]
    config = DetectorsConfig()
    config.clarification.reuse_pattern = ""
    off = _shop_change(asked, "cancel_order", "card_77310", REFUNDED)
    assert rules(off, config, mode="FM-2.2") == [("FM-2.2", "unasked_choice")]


def test_fm22_a_record_s_own_value_the_change_left_as_it_was_is_no_pick():
    # Free express shipping: the order's payments are the same after the change.
    free = _shop_change("Ship it express.", "update_order_shipping", "card_77310", ORDER)
    assert rules(free, mode="FM-2.2") == []
    # Near miss: express was charged to the card: a payment was chosen unasked
    charged = ORDER.replace('"card_77310"}', '"card_77310"}, {"method": "card_77310", "amount": 9}')
    paid = _shop_change("Ship it express.", "update_order_shipping", "card_77310", charged)
    assert rules(paid, mode="FM-2.2") == [("FM-2.2", "unasked_choice")]
    config = DetectorsConfig()
    config.clarification.unchanged_choice_is_no_choice = False
    free = _shop_change("Ship it express.", "update_order_shipping", "card_77310", ORDER)
    assert rules(free, config, mode="FM-2.2") == [("FM-2.2", "unasked_choice")]


def test_fm22_real_runs_keeping_the_reservation_s_own_payment():
    # Run 73: the user says "I'll use the original form of payment"; the agent pays with
    # gift_card_6941833, the one reservation HXDUBJ was paid with: silent.
    assert tau_findings(73, "FM-2.2") == []
    # Run 64: update_reservation_baggages passes credit_card_4938634, YAX4DR's own card, for
    # bags that cost nothing (the result's payment history is as before): silent.
    assert tau_findings(64, "FM-2.2") == []
    # Near miss, run 102: each reservation's own payment, but the user never asked for it and
    # the refunds land on it (labelled FM-2.2 at message 20).
    found = tau_findings(102, "FM-2.2")
    assert found and found[0].evidence["value"] == "credit_card_2929732"


# --- a choice made before looking at the options ---------------------------------------------


def _refund_before_looking(wallet: str, user_turn: str = "Refund it, please.") -> list[Step]:
    """A shop's support agent refunds to the card the order shows, and only afterwards reads
    the customer's wallet."""
    run = RunBuilder(agent="shop")
    run.human("Order 5512 arrived broken.")
    run.llm(input_text="Order 5512 arrived broken.", calls=("get_order",))
    run.tool("get_order", {"order": "5512"}, ORDER)
    run.llm(input_text="Order 5512 arrived broken.", output="Sorry to hear that.")
    run.human(user_turn)
    run.llm(input_text=user_turn, calls=("create_refund", "get_customer"))
    run.tool("create_refund", {"order": "5512", "payment_method": "card_77310"}, REFUNDED)
    run.tool("get_customer", {"customer": "c_118"}, wallet)
    return run.steps


def test_fm22_a_choice_made_before_the_other_options_were_read_is_unasked():
    found = analyse(_refund_before_looking(WALLET))[0]
    found = [f for f in found if f.mode == "FM-2.2"]
    assert [f.rule for f in found] == ["unasked_choice"]
    assert found[0].evidence["others"] == ["card_40021"] and found[0].evidence["offered_later"]
    assert "results read after it offered card_40021" in found[0].message


def test_fm22_a_choice_the_later_results_show_was_the_only_one_is_silent():
    one = '{"payment_methods": [{"id": "card_77310", "last4": "0005"}]}'
    assert rules(_refund_before_looking(one), mode="FM-2.2") == []
    # the user named the card before the change
    named = _refund_before_looking(WALLET, "Refund it to card 77310.")
    assert rules(named, mode="FM-2.2") == []


def test_fm22_real_run_pays_before_reading_the_profile():
    # Run 184 charges credit_card_2408938 for an upgrade at message 14 and reads the profile,
    # which holds a second credit card, only at message 20 (labelled FM-2.2 at message 14).
    found = tau_findings(184, "FM-2.2")
    assert [f.evidence["value"] for f in found] == ["credit_card_2408938"]
    assert found[0].evidence["others"] == ["credit_card_4303738"]
