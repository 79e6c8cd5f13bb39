"""FM-1.1's escalation rules when the user asks for a person: escalating a request the agent
refused before reading anything is not reported; escalating one it refused after reading the
case is."""

from __future__ import annotations

from mast_otel.processors import conventions
from mast_otel.processors.detectors.config import DetectorsConfig
from tests.detectors.real_runs import tau_findings
from tests.steps import RunBuilder, analyse, rules

HOSTING_POLICY = (
    "You are the support agent of a hosting company. Before you change a server you must obtain "
    "explicit approval from the customer. Escalate to a human engineer only if the request "
    "cannot be handled with your tools."
)
ASK = "Move my database to the other data centre, please."
REFUSED = "I'm sorry, I cannot process a data-centre migration for a database."
SUPERVISOR = "Could I speak to a supervisor about this?"


def _escalated(read_first: bool, then: str) -> RunBuilder:
    run = RunBuilder(agent="support")
    if read_first:
        run.llm(input_text=ASK, calls=("get_server",))
        run.tool("get_server", {"server_id": "db-7"}, '{"id": "db-7", "plan": "shared"}')
    run.llm(input_text=ASK, output=REFUSED)
    run.llm(input_text=then, calls=("escalate_to_human_engineer",))
    run.tool("escalate_to_human_engineer", {"summary": "migrate db-7"}, "queued")
    return run


def _fm11(run: RunBuilder) -> list[tuple[str, str]]:
    root = run.root(**{conventions.TASK_DESCRIPTION: HOSTING_POLICY})
    return rules([*run.steps, root], mode="FM-1.1")


def test_fm11_escalating_to_the_person_the_user_asked_for_after_an_unchecked_refusal():
    # the agent read nothing: its refusal is about the kind of request, and the user asked
    # for a supervisor, so handing it over is what the escalate-only clause allows
    assert _fm11(_escalated(read_first=False, then=SUPERVISOR)) == []
    # it read the server and refused that case: the request is one it may deny, not escalate
    assert _fm11(_escalated(read_first=True, then=SUPERVISOR)) == [
        ("FM-1.1", "escalation_after_refusal")
    ]
    # nothing read, but the user did not ask for a person: the agent chose to escalate
    assert _fm11(_escalated(read_first=False, then="Fine, do whatever you can.")) == [
        ("FM-1.1", "escalation_after_refusal")
    ]


def test_fm11_an_empty_person_request_pattern_reports_every_escalation_after_a_refusal():
    config = DetectorsConfig()
    config.task_specification.person_request_pattern = ""
    run = _escalated(read_first=False, then=SUPERVISOR)
    root = run.root(**{conventions.TASK_DESCRIPTION: HOSTING_POLICY})
    findings = [f for f in analyse([*run.steps, root], config)[0] if f.mode == "FM-1.1"]
    assert [f.rule for f in findings] == ["escalation_after_refusal"]
    assert "escalate_to_human_engineer" in findings[0].message
    assert "data-centre migration" in findings[0].message


def test_fm11_real_runs_escalating_after_the_user_asked_for_a_supervisor():
    # runs 138 and 88: "I cannot process a refund for travel insurance" before any tool was
    # called; the user asks for a supervisor and is transferred: nothing to report
    assert tau_findings(138, "FM-1.1") == []
    assert not {f.rule for f in tau_findings(88, "FM-1.1")} & {
        "escalation_after_refusal",
        "escalation_offered_after_refusal",
    }
    # run 118: the same request for a supervisor, after the agent read SI5UKW and refused
    # its cancellation: the transfer is still reported
    escalated = {f.rule: f for f in tau_findings(118, "FM-1.1")}
    assert "escalation_after_refusal" in escalated
    assert "unable to cancel" in escalated["escalation_after_refusal"].message


def test_fm11_a_refusal_that_something_cannot_be_added_then_an_offer_to_escalate():
    run = RunBuilder(agent="support")
    run.llm(input_text="Add a backup plan to server db-7.", calls=("get_server",))
    run.tool("get_server", {"server_id": "db-7"}, '{"id": "db-7", "plan": "shared"}')
    run.llm(
        input_text="Add a backup plan to server db-7.",
        output="A backup plan cannot be added to a shared server after it was created. I can "
        "transfer you to a human engineer if you like.",
    )
    findings = _fm11(run)
    assert findings == [("FM-1.1", "escalation_offered_after_refusal")]


def test_fm11_real_run_offers_a_person_for_insurance_it_said_cannot_be_added():
    # run 136: "travel insurance cannot be added after the initial booking" (6), then at 10
    # "I can transfer you to a human agent who might be able to explore other options"
    offered = {f.rule: f for f in tau_findings(136, "FM-1.1")}
    assert "escalation_offered_after_refusal" in offered
    message = offered["escalation_offered_after_refusal"].message
    assert "cannot be added" in message and "transfer you to a human agent" in message


def test_fm11_a_plan_that_does_not_cover_the_request_then_an_offer_to_escalate():
    run = RunBuilder(agent="support")
    ask = "Restore yesterday's snapshot of db-7 for free, I pay for the backup plan."
    run.llm(input_text=ask, calls=("get_server",))
    run.tool("get_server", {"server_id": "db-7"}, '{"id": "db-7", "plan": "backup-basic"}')
    run.llm(
        input_text=ask,
        output="Your backup-basic plan does not cover restores older than 12 hours. Would you "
        "like me to transfer you to a human engineer?",
    )
    assert _fm11(run) == [("FM-1.1", "escalation_offered_after_refusal")]


def test_fm11_real_run_offers_a_person_after_saying_insurance_does_not_cover_it():
    # run 124: at 24 the insurance "does not cover fees for voluntary changes"; at 26 the
    # agent offers to transfer the user to a human agent to have them waived
    offered = {f.rule: f for f in tau_findings(124, "FM-1.1")}
    assert "escalation_offered_after_refusal" in offered
    assert "does not cover" in offered["escalation_offered_after_refusal"].message
