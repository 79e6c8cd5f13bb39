"""FM-2.2's `unasked_choice` and the record's own value: kept when the user said yes to the
agent's proposal to keep it, as when the user asked for it."""

from __future__ import annotations

from mast_otel.processors.model import Step
from tests.detectors.real_runs import tau_findings
from tests.steps import RunBuilder, rules

WALLET = (
    '{"customer": "c_118", "payment_methods": ['
    '{"id": "card_40021", "brand": "visa", "last4": "4242"}, '
    '{"id": "card_77310", "brand": "amex", "last4": "0005"}]}'
)
TICKET = '{"booking": "EV-88", "event": "concert", "payments": [{"method": "card_77310"}]}'
MOVED = TICKET.replace('"card_77310"}', '"card_77310"}, {"method": "card_77310", "amount": 15}')


def _seat_upgrade(proposal: str, earlier: tuple[str, str] | None = None) -> list[Step]:
    """A ticketing agent reads the customer's two cards and booking EV-88 (paid with
    card_77310), proposes a seat upgrade, the customer says yes, and the agent upgrades
    passing card_77310. `earlier`: an exchange before the proposal."""
    run = RunBuilder(agent="tickets")
    ask = "Can I get a better seat for booking EV-88?"
    run.human(ask)
    run.llm(input_text=ask, calls=("get_customer", "get_booking"))
    run.tool("get_customer", {"customer": "c_118"}, WALLET)
    run.tool("get_booking", {"booking": "EV-88"}, TICKET)
    if earlier is not None:
        run.llm(input_text=ask, output=earlier[0])
        run.human(earlier[1])
    run.llm(input_text=ask, output=proposal)
    run.human("Yes, please.")
    run.llm(input_text="Yes, please.", calls=("upgrade_seat",))
    args = {"booking": "EV-88", "section": "A", "payment_method": "card_77310"}
    run.tool("upgrade_seat", args, MOVED)
    return run.steps


def test_fm22_a_yes_to_the_agent_s_proposal_to_keep_the_booking_s_card_is_no_pick():
    kept = "Section A is $15 more, charged to your existing payment method. Shall I?"
    assert rules(_seat_upgrade(kept), mode="FM-2.2") == []
    # Near misses: the proposal says nothing of the payment, or the agent said it earlier and
    # the yes answers a later proposal that did not
    plain = _seat_upgrade("Section A is $15 more. Shall I?")
    assert rules(plain, mode="FM-2.2") == [("FM-2.2", "unasked_choice")]
    earlier = ("Upgrades go on your existing payment method.", "How much is section A?")
    late = _seat_upgrade("Section A is $15 more. Shall I?", earlier)
    assert rules(late, mode="FM-2.2") == [("FM-2.2", "unasked_choice")]


def test_fm22_real_run_the_user_says_yes_to_the_original_payment_method():
    # Run 69: "Your original payment method will be used for any additional charges or
    # refunds. Please confirm..." and the user says yes: the flight change on VA5SGQ's own
    # card (16) is no unasked choice; the bag fee charged to it later (22), after a request
    # that said nothing of payment, is (labelled FM-2.2 at 22).
    found = tau_findings(69, "FM-2.2")
    assert [f.rule for f in found] == ["unasked_choice"]
    assert "update_reservation_baggages" in found[0].message
