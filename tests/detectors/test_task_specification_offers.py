"""FM-1.1's `offer_before_request` in the other words an offer takes: telling the user they
are eligible for the thing, or offering to go ahead with issuing or receiving it."""

from __future__ import annotations

from mast_otel.processors import conventions
from mast_otel.processors.model import Step
from tests.detectors.real_runs import tau_findings
from tests.steps import RunBuilder, analyse, rules

SAAS_POLICY = (
    "You are the billing assistant of a software company. After an incident you may issue a "
    "voucher worth one month of the plan. Do not proactively offer vouchers: only when the "
    "customer explicitly asks for compensation."
)


def _incident(
    agent: str, first: str = "Our dashboards were down all morning (org ORG-5521)."
) -> list[Step]:
    run = RunBuilder(agent="billing")
    run.human(first)
    run.llm(input_text=first, calls=("get_incidents",))
    run.tool("get_incidents", {"org_id": "ORG-5521"}, '{"incidents": [{"minutes": 240}]}')
    run.llm(input_text=first, output=agent)
    return [*run.steps, run.root(**{conventions.TASK_DESCRIPTION: SAAS_POLICY})]


def test_fm11_telling_the_user_they_are_eligible_for_a_voucher_is_an_offer():
    steps = _incident(
        "The incident lasted four hours, so your organisation is eligible for a service voucher "
        "worth one month. Would you like me to go ahead with issuing this voucher?"
    )
    findings = [f for f in analyse(steps)[0] if f.mode == "FM-1.1"]
    assert [f.rule for f in findings] == ["offer_before_request"]
    assert "eligible for a service voucher" in findings[0].message


def test_fm11_an_eligibility_the_user_asked_about_or_a_card_is_no_unprompted_offer():
    said = "You are eligible for a service voucher worth one month. Shall I issue it?"
    asked = _incident(said, "Dashboards on ORG-5521 were down; I want compensation for it.")
    assert rules(asked, mode="FM-1.1") == []
    card = _incident("To update billing I need you to provide the credit card on file.")
    assert rules(card, mode="FM-1.1") == []


def test_fm11_real_run_says_the_user_is_eligible_for_a_certificate_unasked():
    # run 145: the user reports a delay and says they do not know yet whether to change or
    # cancel; at 8 the agent says "you are eligible for a compensation certificate"
    found = [f for f in tau_findings(145, "FM-1.1") if f.rule == "offer_before_request"]
    assert len(found) == 1
    assert "eligible for a compensation certificate" in found[0].message
