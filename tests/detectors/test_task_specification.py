"""FM-1.1 disobey task specification.

The detector's rules on plain step sequences: each where it should fire, and its near
misses, which must stay silent."""

from __future__ import annotations

from mast_otel.processors import conventions
from mast_otel.processors.detectors.config import DetectorsConfig
from mast_otel.processors.model import Step
from tests.detectors.real_runs import tau_findings
from tests.steps import FIX, GET_PODS, TASK, RunBuilder, analyse, rules


def test_fm11_policy_from_root_attributes_arriving_last():
    run = RunBuilder()
    run.llm(input_text=TASK)
    run.tool("kubectl", FIX, "updated")
    run.tool("kubectl", GET_PODS, "checkout-1 1/1 Running")
    root = run.root(**{conventions.TASK_READ_ONLY: True})
    assert rules([*run.steps, root], mode="FM-1.1") == [("FM-1.1", "mutation_in_read_only_task")]


def test_fm11_budgets_from_configuration():
    config = DetectorsConfig()
    config.task_specification.max_tokens = 2500
    run = RunBuilder()
    for _ in range(3):
        run.llm(input_tokens=1000)
    assert rules(run.steps, config, "FM-1.1") == [("FM-1.1", "token_budget")]
    config.task_specification.max_tokens = 0
    config.task_specification.max_seconds = 1.5
    assert rules(run.steps, config, "FM-1.1") == [("FM-1.1", "time_budget")]


def test_fm11_a_read_only_task_that_only_reads_is_silent():
    run = RunBuilder()
    run.llm(input_text=TASK)
    run.tool("kubectl", GET_PODS, "checkout-1 0/1 CrashLoopBackOff")
    run.tool("kubectl", {"command": "kubectl logs deployment/checkout -n shop"}, "OOMKilled")
    root = run.root(
        **{conventions.TASK_READ_ONLY: True, conventions.TASK_ALLOWED_TOOLS: ["kubectl"]}
    )
    assert rules([*run.steps, root], mode="FM-1.1") == []


def test_fm11_a_tool_outside_the_task_list_and_budgets_kept():
    run = RunBuilder()
    run.tool("kubectl", GET_PODS, "ok")
    run.tool("run_shell", {"command": "curl checkout"}, "ok")
    root = run.root(**{conventions.TASK_ALLOWED_TOOLS: ["kubectl"], conventions.TASK_MAX_STEPS: 10})
    assert rules([*run.steps, root], mode="FM-1.1") == [("FM-1.1", "tool_not_allowed")]
    config = DetectorsConfig()
    config.task_specification.max_tokens = 5000
    within = RunBuilder()
    for _ in range(3):
        within.llm(input_tokens=1000)
    assert rules(within.steps, config, "FM-1.1") == []


# --- a written policy: confirmation before changes, escalation only what cannot be handled ---

HELPDESK_POLICY = (
    "You are a helpdesk agent. Before you update or delete a ticket you must obtain explicit "
    "approval from the customer. Escalate to a human agent only if the request cannot be "
    "handled with your tools."
)


def _human(run: RunBuilder, text: str) -> None:
    """A user turn, as the model sees it: the next model call's input."""
    run.llm(input_text=text, calls=())


def _ticket_run(answer: str) -> RunBuilder:
    run = RunBuilder(agent="helpdesk")
    run.llm(
        input_text="Please close ticket T-1042, the printer works again.", calls=("get_ticket",)
    )
    run.tool("get_ticket", {"ticket_id": "T-1042"}, '{"id": "T-1042", "status": "open"}')
    run.llm(
        input_text="Please close ticket T-1042, the printer works again.",
        output="I will set T-1042 to closed. Shall I proceed?",
    )
    run.llm(input_text=answer, calls=("update_ticket",))
    run.tool("update_ticket", {"ticket_id": "T-1042", "status": "closed"}, '{"status": "closed"}')
    run.llm(input_text=answer, output="T-1042 is closed.")
    return run


def test_fm11_a_change_the_user_did_not_confirm_breaks_a_confirmation_policy():
    run = _ticket_run("Hmm, what about the scanner ticket?")
    root = run.root(**{conventions.TASK_DESCRIPTION: HELPDESK_POLICY})
    findings = [f for f in analyse([*run.steps, root])[0] if f.mode == "FM-1.1"]
    assert [f.rule for f in findings] == ["change_without_confirmation"]
    assert "update_ticket" in findings[0].message and "T-1042" in findings[0].message
    assert "scanner ticket" in findings[0].message
    assert "explicit approval" in findings[0].evidence["instruction"]


def test_fm11_a_confirmed_change_or_a_run_without_such_a_policy_is_silent():
    confirmed = _ticket_run("Yes, please go ahead.")
    root = confirmed.root(**{conventions.TASK_DESCRIPTION: HELPDESK_POLICY})
    assert rules([*confirmed.steps, root], mode="FM-1.1") == []
    # "no" first: not an agreement, although "proceed" is there
    refused = _ticket_run("No, don't proceed yet.")
    root = refused.root(**{conventions.TASK_DESCRIPTION: HELPDESK_POLICY})
    assert rules([*refused.steps, root], mode="FM-1.1") == [
        ("FM-1.1", "change_without_confirmation")
    ]
    # the same unconfirmed change, with instructions that ask for no confirmation
    loose = _ticket_run("Hmm, what about the scanner ticket?")
    root = loose.root(**{conventions.TASK_DESCRIPTION: "You are a helpdesk agent."})
    assert rules([*loose.steps, root], mode="FM-1.1") == []


def test_fm11_retrying_a_failed_change_with_other_arguments_needs_a_new_yes():
    run = RunBuilder(agent="billing")
    run.llm(input_text="Pay invoice INV-7.", output="INV-7 is $120, card ending 4242. Go ahead?")
    run.llm(input_text="Yes, charge the card ending 4242.", calls=("update_invoice",))
    run.tool("update_invoice", {"invoice": "INV-7", "amount": 120}, error="amount mismatch: 135")
    run.llm(input_text="Yes, charge the card ending 4242.", calls=("update_invoice",))
    run.tool("update_invoice", {"invoice": "INV-7", "amount": 135}, '{"paid": 135}')
    root = run.root(**{conventions.TASK_DESCRIPTION: HELPDESK_POLICY})
    findings = [f for f in analyse([*run.steps, root])[0] if f.mode == "FM-1.1"]
    assert [f.rule for f in findings] == ["change_without_confirmation"]
    assert '"amount": 135' in findings[0].message and "retries" in findings[0].message


def test_fm11_escalating_a_request_the_agent_refused():
    run = RunBuilder(agent="helpdesk")
    run.llm(input_text="Refund my annual licence, I bought it 14 months ago.", calls=())
    run.llm(
        input_text="Refund my annual licence, I bought it 14 months ago.",
        output="I'm sorry, licences older than 12 months are not eligible for a refund.",
    )
    run.llm(input_text="Then get me someone who can.", calls=("escalate_to_human_agent",))
    run.tool("escalate_to_human_agent", {"summary": "refund of an old licence"}, "queued")
    root = run.root(**{conventions.TASK_DESCRIPTION: HELPDESK_POLICY})
    findings = [f for f in analyse([*run.steps, root])[0] if f.mode == "FM-1.1"]
    assert [f.rule for f in findings] == ["escalation_after_refusal"]
    assert "escalate_to_human_agent" in findings[0].message
    assert "not eligible for a refund" in findings[0].message
    # escalating what the tools cannot do, with no refusal before, is what the policy asks
    fine = RunBuilder(agent="helpdesk")
    fine.llm(input_text="My laptop screen is cracked.", calls=("escalate_to_human_agent",))
    fine.tool("escalate_to_human_agent", {"summary": "hardware repair"}, "queued")
    root = fine.root(**{conventions.TASK_DESCRIPTION: HELPDESK_POLICY})
    assert rules([*fine.steps, root], mode="FM-1.1") == []


def test_fm11_invalid_policy_pattern_is_a_clear_error():
    config = DetectorsConfig()
    config.task_specification.refusal_pattern = "(unclosed"
    try:
        config.validate()
    except ValueError as exc:
        assert "task_specification.refusal_pattern" in str(exc)
    else:
        raise AssertionError("an invalid pattern was accepted")


def test_fm11_on_real_runs_of_a_policy_that_requires_an_explicit_yes():
    # run 3: update_reservation_flights after "I want to use the gift card with the smallest
    # balance..." (no yes); run 18: transfer_to_human_agents after "I cannot cancel this
    # reservation"; run 6: the change follows "Yes, please proceed" and nothing is escalated
    changed = tau_findings(3, "FM-1.1")
    assert "change_without_confirmation" in {f.rule for f in changed}
    assert any("OBUT9V" in f.message and "gift card" in f.message for f in changed)
    escalated = {f.rule: f for f in tau_findings(18, "FM-1.1")}
    assert set(escalated) == {"escalation_offered_after_refusal", "escalation_after_refusal"}
    assert "I cannot cancel" in escalated["escalation_after_refusal"].message
    assert "transfer_to_human_agents" in escalated["escalation_after_refusal"].message
    assert tau_findings(6, "FM-1.1") == []


def test_fm11_offering_to_escalate_a_request_the_agent_refused():
    run = RunBuilder(agent="helpdesk")
    run.llm(
        input_text="Refund my annual licence, I bought it 14 months ago.",
        output="Licences older than 12 months are not eligible for a refund. I can transfer you "
        "to a human agent if you like.",
    )
    run.human("No thanks.")
    root = run.root(**{conventions.TASK_DESCRIPTION: HELPDESK_POLICY})
    findings = [f for f in analyse([*run.steps, root])[0] if f.mode == "FM-1.1"]
    assert [f.rule for f in findings] == ["escalation_offered_after_refusal"]
    assert "transfer you to a human agent" in findings[0].message
    # the same offer with no refusal before it: a request the tools cannot handle
    fine = RunBuilder(agent="helpdesk")
    fine.llm(
        input_text="My laptop screen is cracked.",
        output="Hardware repairs are done on site; I can transfer you to a human agent.",
    )
    root = fine.root(**{conventions.TASK_DESCRIPTION: HELPDESK_POLICY})
    assert rules([*fine.steps, root], mode="FM-1.1") == []


def test_fm11_a_one_shot_run_is_not_held_to_in_transcript_confirmation():
    # a coding agent whose instructions ask for approval: the harness approves, not a user turn
    run = RunBuilder(agent="coder")
    run.llm(input_text="Rename the config loader.", calls=("apply_patch",))
    run.tool("apply_patch", {"input": "*** Update File: app/config.py"}, "Done")
    run.llm(input_text="Rename the config loader.", output="Renamed.")
    instructions = "Ask for explicit approval before running commands that write outside cwd."
    root = run.root(**{conventions.TASK_DESCRIPTION: instructions})
    assert rules([*run.steps, root], mode="FM-1.1") == []
    config = DetectorsConfig()
    config.task_specification.confirmation_needs_conversation = False
    assert rules([*run.steps, root], config, mode="FM-1.1") == [
        ("FM-1.1", "change_without_confirmation")
    ]


# --- an offer the instructions allow only on request ------------------------------------------

ISP_POLICY = (
    "You are the support agent of an internet provider. If an outage lasted more than a day, "
    "you may give a service credit of one day's fee. Do not proactively offer credits: only "
    "when the customer explicitly asks for compensation."
)


def _outage(first: str, agent: str, policy: str = ISP_POLICY) -> list[Step]:
    """A broadband support run: the customer reports an outage, the agent answers."""
    run = RunBuilder(agent="isp-support")
    run.human(first)
    run.llm(input_text=first, calls=("get_outages",))
    run.tool("get_outages", {"account_id": "AC-3310"}, '{"outages": [{"hours": 30}]}')
    run.llm(input_text=first, output=agent)
    run.human("Thanks, that's all.")
    run.llm(input_text="Thanks, that's all.", output="Glad to help.")
    return [*run.steps, run.root(**{conventions.TASK_DESCRIPTION: policy})]


def test_fm11_offering_compensation_nobody_asked_for():
    steps = _outage(
        "My internet was down for over a day on account AC-3310, it was awful.",
        "I'm sorry. Since the outage lasted 30 hours, I can offer you a service credit of "
        "one day's fee. Would you like that?",
    )
    findings = [f for f in analyse(steps)[0] if f.mode == "FM-1.1"]
    assert [f.rule for f in findings] == ["offer_before_request"]
    assert "offer you a service credit" in findings[0].message
    assert "Do not proactively offer" in findings[0].evidence["instruction"]


def test_fm11_an_offer_after_a_request_a_refusal_or_without_the_clause_is_silent():
    offer = "Since the outage lasted 30 hours, I can offer you a service credit. Shall I?"
    # the customer asked for compensation first
    asked = _outage("My internet on AC-3310 was down for a day. I want compensation.", offer)
    assert rules(asked, mode="FM-1.1") == []
    # the agent says what it cannot offer: no offer
    refused = _outage(
        "My internet on AC-3310 was down for a day.",
        "I'm sorry, I cannot offer a credit for outages shorter than two days.",
    )
    assert rules(refused, mode="FM-1.1") == []
    # the same unprompted offer, under instructions that do not forbid it
    loose = _outage("My internet on AC-3310 was down for a day.", offer, "You are an ISP agent.")
    assert rules(loose, mode="FM-1.1") == []
    # asking for the customer's credit card is no offer of a credit
    card = _outage("My internet on AC-3310 was down.", "Could you provide the credit card on file?")
    assert rules(card, mode="FM-1.1") == []


def test_fm11_real_run_offers_a_certificate_before_the_user_asks():
    # Run 96: the user complains of a delay and asks for nothing; at message 14 the agent
    # offers a certificate as compensation, which the policy allows only on request.
    found = [f for f in tau_findings(96, "FM-1.1") if f.rule == "offer_before_request"]
    assert len(found) == 1 and "offer you a certificate" in found[0].message
    # Run 45: the user asks for compensation before any offer: silent for this rule.
    assert [f for f in tau_findings(45, "FM-1.1") if f.rule == "offer_before_request"] == []


# --- a change before what the instructions say to obtain first -------------------------------

CLINIC_POLICY = (
    "# Clinic front desk\n\n## Cancel appointment\n\n- The agent must first obtain the patient "
    "id, the appointment id, and the reason for cancelling (illness, travel, other).\n\n"
    "## Move appointment\n\n- Offer the free slots of the same doctor."
)


def _clinic(
    user_turns: list[str], tool: str = "cancel_appointment", policy: str = CLINIC_POLICY
) -> list[Step]:
    """A clinic's booking agent: the patient gives ids, and the agent changes an appointment."""
    run = RunBuilder(agent="clinic")
    for turn in user_turns:
        run.human(turn)
        run.llm(input_text=turn, output="Thank you. Noted.")
    run.llm(input_text=user_turns[-1], calls=(tool,))
    run.tool(tool, {"patient_id": "P-77", "appointment_id": "AP-310"}, '{"status": "done"}')
    return [*run.steps, run.root(**{conventions.TASK_DESCRIPTION: policy})]


def test_fm11_cancelling_before_obtaining_the_reason_the_instructions_require():
    steps = _clinic(["I am patient P-77, cancel appointment AP-310.", "Yes, cancel it."])
    findings = [f for f in analyse(steps)[0] if f.mode == "FM-1.1"]
    assert [f.rule for f in findings] == ["change_before_prerequisites"]
    assert "cancel_appointment" in findings[0].message
    assert findings[0].evidence["missing"] == ["reason for cancelling"]
    assert "must first obtain" in findings[0].evidence["instruction"]


def test_fm11_prerequisites_obtained_or_not_required_are_silent():
    # the reason was given
    given = ["I am patient P-77, cancel AP-310.", "The reason is that I am travelling."]
    assert rules(_clinic(given), mode="FM-1.1") == []
    # a change of another verb: the clause covers cancelling only
    moved = _clinic(["I am patient P-77, move AP-310."], tool="move_appointment")
    assert rules(moved, mode="FM-1.1") == []
    # instructions with no such clause
    loose = _clinic(["Cancel AP-310."], policy="You are a clinic's front desk agent.")
    assert rules(loose, mode="FM-1.1") == []


def test_fm11_real_run_cancels_without_asking_the_reason():
    # Run 33 cancels S61CZX at message 48; the reason for cancellation, which the policy's
    # "Cancel flight" section says to obtain first, was never asked for nor given.
    found = [f for f in tau_findings(33, "FM-1.1") if f.rule == "change_before_prerequisites"]
    assert len(found) == 1 and "S61CZX" in found[0].message
    assert found[0].evidence["missing"] == ["reason for cancellation"]
    # Run 15 asks for the reason before cancelling: silent for this rule.
    assert [f for f in tau_findings(15, "FM-1.1") if f.rule == "change_before_prerequisites"] == []


# --- a confirmed change that carries a detail nobody named ------------------------------------

SUBSCRIPTION_POLICY = (
    "You manage subscriptions. Before any change, list the details and obtain explicit "
    "confirmation from the customer."
)
ACCOUNT = (
    '{"customer_id": "cu_118", "methods": [{"id": "card_40021", "brand": "visa", "last4": '
    '"4242"}, {"id": "card_77310", "brand": "amex", "last4": "0005"}]}'
)


def _upgrade(proposal: str, answer: str = "Yes, go ahead.", account: str = ACCOUNT) -> list[Step]:
    """A subscription agent proposes an upgrade, the customer says yes, and the agent charges
    card_77310."""
    run = RunBuilder(agent="billing")
    run.human("Upgrade my plan to Pro, please.")
    run.llm(input_text="Upgrade my plan to Pro, please.", calls=("get_customer",))
    run.tool("get_customer", {"customer_id": "cu_118"}, account)
    run.llm(input_text="Upgrade my plan to Pro, please.", output=proposal)
    run.human(answer)
    run.llm(input_text=answer, calls=("update_subscription",))
    args = {"customer_id": "cu_118", "plan": "pro", "payment_method": "card_77310"}
    run.tool("update_subscription", args, '{"plan": "pro"}')
    return [*run.steps, run.root(**{conventions.TASK_DESCRIPTION: SUBSCRIPTION_POLICY})]


def test_fm11_a_yes_to_details_that_left_out_the_card_charged():
    steps = _upgrade("Pro costs $30 a month more. Shall I upgrade plan pro now?")
    findings = [f for f in analyse(steps)[0] if f.mode == "FM-1.1"]
    assert [f.rule for f in findings] == ["change_with_unlisted_detail"]
    assert findings[0].evidence["detail"] == "payment_method=card_77310"
    assert "Yes, go ahead." in findings[0].message


def test_fm11_details_named_by_id_alias_or_kind_are_listed():
    # the card by its last four digits, a value of the object that holds it
    assert rules(_upgrade("Pro is $30 more, on your amex ending 0005. OK?"), mode="FM-1.1") == []
    # the customer named it
    named = _upgrade("Pro is $30 more. OK?", answer="Yes, charge my card ending 0005.")
    assert rules(named, mode="FM-1.1") == []
    # "your card", with one card on the account
    one = '{"customer_id": "cu_118", "methods": [{"id": "card_77310", "last4": "0005"}]}'
    assert rules(_upgrade("Pro is $30 more on your card. OK?", account=one), mode="FM-1.1") == []
    # near miss the other way: "your card" with two cards names neither
    vague = _upgrade("Pro is $30 more on your card. OK?")
    assert rules(vague, mode="FM-1.1") == [("FM-1.1", "change_with_unlisted_detail")]


def test_fm11_real_run_charges_a_card_the_confirmation_never_named():
    # Run 114: the user says "let's just proceed with adding the two checked bags"; the agent
    # charges credit_card_4938634, never named to the user, for $100 of bags.
    found = [f for f in tau_findings(114, "FM-1.1") if f.rule == "change_with_unlisted_detail"]
    assert [f.evidence["detail"] for f in found] == ["payment_id=credit_card_4938634"]
    # Run 176: the user names "my credit card ending in 7334" and the trip's flights are
    # carried over as a set: silent for this rule.
    assert [f for f in tau_findings(176, "FM-1.1") if f.rule == "change_with_unlisted_detail"] == []
