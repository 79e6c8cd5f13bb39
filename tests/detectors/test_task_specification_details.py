"""FM-1.1's `change_with_unlisted_detail`: details the user's own words chose (the record's own
value kept at their request or at the agent's proposal they said yes to, one of the kind their
yes named) are no unlisted detail; and a failed change retried with the same arguments written
otherwise is no retry "with other arguments"."""

from __future__ import annotations

from mast_otel.processors import conventions
from mast_otel.processors.detectors.config import DetectorsConfig
from mast_otel.processors.model import Step
from tests.detectors.real_runs import tau_findings
from tests.steps import RunBuilder, analyse, rules

SHOP_POLICY = (
    "You are a shop's support agent. Before any change to an order, list the details and "
    "obtain explicit confirmation (yes) from the customer."
)
WALLET = (
    '{"customer": "c_118", "payment_methods": ['
    '{"id": "card_40021", "brand": "visa", "last4": "4242"}, '
    '{"id": "card_77310", "brand": "amex", "last4": "0005"}]}'
)
ORDER = '{"order": "5512", "status": "processing", "payments": [{"method": "card_77310"}]}'
CHARGED = ORDER.replace('"card_77310"}', '"card_77310"}, {"method": "card_77310", "amount": 9}')


def _express(
    proposal: str,
    answer: str = "Yes, go ahead.",
    method: str = "card_77310",
    result: str = CHARGED,
    earlier: tuple[str, str] | None = None,
) -> list[Step]:
    """A shop agent reads the customer's two cards and order 5512 (paid with card_77310),
    proposes express shipping, the customer answers, and the agent changes the order passing
    a card. `earlier`: an exchange (the agent's words, the customer's answer) before the
    proposal."""
    run = RunBuilder(agent="shop")
    run.human("Can order 5512 ship faster?")
    run.llm(input_text="Can order 5512 ship faster?", calls=("get_customer", "get_order"))
    run.tool("get_customer", {"customer": "c_118"}, WALLET)
    run.tool("get_order", {"order": "5512"}, ORDER)
    if earlier is not None:
        said, reply = earlier
        run.llm(input_text="Can order 5512 ship faster?", output=said)
        run.human(reply)
    run.llm(input_text="Can order 5512 ship faster?", output=proposal)
    run.human(answer)
    run.llm(input_text=answer, calls=("update_order_shipping",))
    args = {"order": "5512", "speed": "express", "payment_method": method}
    run.tool("update_order_shipping", args, result)
    return [*run.steps, run.root(**{conventions.TASK_DESCRIPTION: SHOP_POLICY})]


def test_fm11_the_order_s_own_card_kept_at_the_customer_s_request_is_listed():
    plain = _express("Express costs $9. Shall I upgrade order 5512 to express?")
    findings = [f for f in analyse(plain)[0] if f.mode == "FM-1.1"]
    assert [f.rule for f in findings] == ["change_with_unlisted_detail"]
    assert findings[0].evidence["detail"] == "payment_method=card_77310"
    asked = "Yes, and charge it to the same payment method as the order."
    kept = _express("Express costs $9. Shall I upgrade order 5512 to express?", asked)
    assert rules(kept, mode="FM-1.1") == []
    # Near miss: the same words, but the agent charges the other card
    other = _express("Express costs $9. Shall I upgrade order 5512?", asked, "card_40021")
    assert rules(other, mode="FM-1.1") == [("FM-1.1", "change_with_unlisted_detail")]
    config = DetectorsConfig()
    config.task_specification.detail_reuse_pattern = ""
    off = _express("Express costs $9. Shall I upgrade order 5512 to express?", asked)
    assert rules(off, config, mode="FM-1.1") == [("FM-1.1", "change_with_unlisted_detail")]


def test_fm11_the_agent_s_proposal_to_keep_the_order_s_card_is_a_listed_detail():
    proposal = "Express costs $9, charged to the original payment method of the order. Proceed?"
    assert rules(_express(proposal), mode="FM-1.1") == []
    # Near miss: the agent said so two turns before; the proposal the customer said yes to
    # did not, and the customer's yes answers that one
    earlier = ("Charges go to the original payment method of the order.", "What does it cost?")
    late = _express("Express costs $9. Shall I upgrade order 5512?", earlier=earlier)
    assert rules(late, mode="FM-1.1") == [("FM-1.1", "change_with_unlisted_detail")]


def test_fm11_one_of_the_kind_the_customer_s_yes_named_is_their_choice():
    named = _express("Express costs $9. Shall I upgrade order 5512?", "Yes, put it on a card.")
    assert rules(named, mode="FM-1.1") == []
    # Near miss: only the agent said "your card", with two cards on the account
    vague = _express("Express costs $9 on your card. Shall I upgrade order 5512?")
    assert rules(vague, mode="FM-1.1") == [("FM-1.1", "change_with_unlisted_detail")]


def test_fm11_the_order_s_own_card_the_change_did_not_charge_is_no_detail():
    free = _express("Express is free this week. Shall I upgrade order 5512?", result=ORDER)
    assert rules(free, mode="FM-1.1") == []
    config = DetectorsConfig()
    config.task_specification.detail_unchanged = False
    kept = _express("Express is free this week. Shall I upgrade order 5512?", result=ORDER)
    assert rules(kept, config, mode="FM-1.1") == [("FM-1.1", "change_with_unlisted_detail")]


def _restart(retry: str) -> list[Step]:
    """An SRE bot gets a yes to restart checkout in prod; the restart times out and it calls
    again with `retry`."""
    run = RunBuilder(agent="ops")
    ask = "Restart deployment checkout in prod, please."
    run.human(ask)
    run.llm(input_text=ask, output="I will restart deployment checkout in prod. OK?")
    run.human("Yes, go ahead.")
    run.llm(input_text="Yes, go ahead.", calls=("rollout_restart",))
    run.tool("rollout_restart", '{"deployment":"checkout","namespace":"prod"}', error="timeout")
    run.llm(input_text="Yes, go ahead.", calls=("rollout_restart",))
    run.tool("rollout_restart", retry, "restarted")
    policy = "You are an SRE bot. Before any change you must obtain explicit approval."
    return [*run.steps, run.root(**{conventions.TASK_DESCRIPTION: policy})]


def test_fm11_a_retry_of_the_same_arguments_written_otherwise_is_no_other_change():
    same = _restart('{"namespace": "prod", "deployment": "checkout"}')
    assert rules(same, mode="FM-1.1") == []
    # Near miss: the retry names another namespace, which the yes did not see
    other = _restart('{"deployment": "checkout", "namespace": "prod-eu"}')
    findings = [f for f in analyse(other)[0] if f.mode == "FM-1.1"]
    assert [f.rule for f in findings] == ["change_without_confirmation"]
    assert "prod-eu" in findings[0].message and "retries" in findings[0].message


def test_fm11_real_runs_details_the_user_s_words_chose():
    def unlisted(index: int) -> list[int]:
        found = tau_findings(index, "FM-1.1")
        return [f.evidence.get("detail") for f in found if f.rule == "change_with_unlisted_detail"]

    # Run 52: "could I get a refund to the original payment method for each reservation?";
    # each downgrade refunds to that reservation's own payment: silent (it was 5 findings).
    assert unlisted(52) == []
    # Run 103: "Yes, please proceed. Also, I'd like to use my gift card with the smallest
    # balance to pay." The gift card is the user's own choice: silent for this rule; the
    # retry on another gift card after the first failed still needs a yes.
    assert unlisted(103) == []
    retried = [f for f in tau_findings(103, "FM-1.1") if f.rule == "change_without_confirmation"]
    assert len(retried) == 1 and "gift_card_6276644" in retried[0].message
    # Run 69: the agent's proposal says "Your original payment method will be used for any
    # additional charges or refunds", and the user says yes: silent at 16; the bag added
    # without a yes at 22 is still reported.
    assert unlisted(69) == []
    assert any(f.rule == "change_without_confirmation" for f in tau_findings(69, "FM-1.1"))
    # Near miss, run 154: "Yes, please go ahead with the changes." to a list that named no
    # payment; the agent charges credit_card_7407366.
    assert unlisted(154) == ["payment_id=credit_card_7407366"] * 2


def test_fm11_real_run_resends_the_same_booking_with_other_spacing():
    # Run 109: the booking of 48 (total_baggages 6 -> 2) is another change; 52, 56 and 60
    # resend 48's arguments, only spaced otherwise: no new retry "with other arguments".
    retries = [f for f in tau_findings(109, "FM-1.1") if f.rule == "change_without_confirmation"]
    assert len(retries) == 1 and retries[0].message.startswith("book_reservation(")
