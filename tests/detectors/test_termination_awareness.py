"""FM-1.5 unaware of termination conditions.

The detector's rules on plain step sequences: each where it should fire, and its near
misses, which must stay silent."""

from __future__ import annotations

import pytest

from mast_otel.processors.detectors.signals import is_final_answer
from mast_otel.processors.model import StepKind
from tests.imported import tau_findings, tau_steps
from tests.steps import GET_PODS, RunBuilder, analyse, rules


def test_fm15_limit_error_and_loop_at_the_end():
    run = RunBuilder()
    for _ in range(3):
        run.tool("kubectl", GET_PODS, "checkout-1 0/1 CrashLoopBackOff")
    run.failed_agent("GraphRecursionError: Recursion limit of 25 reached")
    assert rules(run.steps, mode="FM-1.5") == [("FM-1.5", "ended_in_loop"), ("FM-1.5", "limit_hit")]


def test_fm15_a_question_is_not_a_final_answer():
    run = RunBuilder()
    run.llm(output="Which namespace do you mean: shop or staging?")
    run.tool("kubectl", GET_PODS, "ok")
    assert rules(run.steps, mode="FM-1.5") == []


# --- a text-only turn the user answers is a turn of the conversation ---------------------------


def test_fm15_a_turn_the_user_answers_is_not_the_final_answer():
    # A CRM agent states what it will change and waits; the customer confirms; it acts.
    run = RunBuilder(agent="crm-agent")
    run.human("Please move ticket T-42 to the billing queue.")
    run.tool("get_ticket", {"ticket_id": "T-42"}, '{"id": "T-42", "queue": "general"}')
    run.llm(output="I can move T-42 from general to billing. Please confirm.")
    run.human("yes, go ahead")
    run.tool("update_ticket", {"ticket_id": "T-42", "queue": "billing"}, '{"queue": "billing"}')
    run.llm(output="Done: T-42 is now in the billing queue.")
    assert rules(run.steps, mode="FM-1.5") == []


def test_fm15_calls_after_the_final_answer_with_no_user_turn_between():
    run = RunBuilder(agent="crm-agent")
    run.human("Close ticket T-42.")
    run.tool("close_ticket", {"ticket_id": "T-42"}, '{"status": "closed"}')
    run.llm(output="T-42 is closed.")
    run.tool("list_tickets", {"status": "open"}, "[]")
    assert rules(run.steps, mode="FM-1.5") == [("FM-1.5", "calls_after_final_answer")]


def test_fm15_an_empty_user_turn_does_not_reopen_the_conversation():
    run = RunBuilder(agent="coder")
    run.llm(output="All tests pass; the fix is in cart.py.")
    run.human("")
    run.tool("shell", {"command": ["bash", "-lc", "git status"]}, "clean")
    assert rules(run.steps, mode="FM-1.5") == [("FM-1.5", "calls_after_final_answer")]


def test_fm15_tau_bench_conversation_turns_are_not_final_answers():
    # Run 0: the agent lists the booking details and waits ("...confirm..."), the simulated
    # user says yes, and it books: conversation, not calls after a final answer.
    steps = tau_steps(0)
    assert any(s.kind is StepKind.HUMAN for s in steps[3:])
    texts = [s for s in steps if s.kind is StepKind.LLM and is_final_answer(s)]
    assert texts, "text-only turns the user answered"
    assert tau_findings(0, "FM-1.5") == []


# --- cut off mid-work --------------------------------------------------------------------------


def test_fm15_coding_agent_cut_off_mid_work():
    run = RunBuilder(agent="codex")
    run.human("Make the test suite pass.")
    for i in range(12):
        run.tool("shell", {"command": ["bash", "-lc", f"sed -n {i},{i + 40}p src/cart.py"]}, "x")
    findings = [f for f in analyse(run.steps)[0] if f.mode == "FM-1.5"]
    assert [f.rule for f in findings] == ["ended_mid_work"]
    assert "shell after 12 tool calls" in findings[0].message


def test_fm15_ending_on_an_escalation_or_an_answer_is_not_cut_off():
    run = RunBuilder(agent="support")
    for i in range(12):
        run.tool("get_order", {"order_id": f"o-{i}"}, "{}")
    run.tool("transfer_to_human_agents", {"summary": "refund dispute"}, "Transfer successful")
    assert rules(run.steps, mode="FM-1.5") == []
    run = RunBuilder(agent="support")
    for i in range(12):
        run.tool("get_order", {"order_id": f"o-{i}"}, "{}")
    run.final("Orders o-0 to o-11 are all shipped.")
    assert rules(run.steps, mode="FM-1.5") == []


def test_fm15_tau_bench_cut_off_at_the_turn_limit():
    # Run 33 ends on a search_direct_flight result at the turn limit (labelled FM-1.5);
    # run 4 ends on transfer_to_human_agents and stays silent.
    assert [f.rule for f in tau_findings(33, "FM-1.5")] == ["ended_mid_work"]
    assert tau_findings(4, "FM-1.5") == []


def _rolled_back(run: RunBuilder) -> None:
    run.human("checkout in shop is failing after the deploy, roll it back")
    run.tool("kubectl", {"command": "kubectl rollout undo deployment/checkout -n shop"}, "ok")
    run.tool(
        "kubectl",
        {"command": "kubectl rollout status deployment/checkout -n shop"},
        'deployment "checkout" successfully rolled out',
    )


def test_fm15_calls_after_a_healthy_check_are_calls_after_success():
    run = RunBuilder()
    _rolled_back(run)
    for command in ("get pods -n shop", "logs deployment/checkout -n shop", "get events -n shop"):
        run.tool("kubectl", {"command": f"kubectl {command}"}, "ok")
    assert rules(run.steps, mode="FM-1.5") == [("FM-1.5", "calls_after_success")]


@pytest.mark.parametrize(
    ("check", "after_success"),
    [
        ({"resource": "deploy payments-api --namespace=payments"}, True),
        ({"resource": "pods -n payments"}, True),
        ({"resource": "deployment/orders-api -n payments"}, False),  # another deployment
        ({"resource": "deployment/payments-api -n staging"}, False),  # another namespace
    ],
)
def test_fm15_the_healthy_check_is_of_the_changed_resource(check: dict[str, str], after_success):
    run = RunBuilder()
    run.tool("kubectl_scale", {"resource": "deployment/payments-api -n payments", "replicas": 3})
    run.tool("kubectl_get", check, "payments-api 3/3 Running")
    for name in ("get_pods", "get_events", "get_logs"):
        run.tool(name, {"namespace": "payments"}, "ok")
    found = rules(run.steps, mode="FM-1.5")
    assert found == ([("FM-1.5", "calls_after_success")] if after_success else [])


def test_fm15_calls_for_what_the_user_asks_next_are_not_calls_after_success():
    # The rollback is verified; the user then asks for something else, and the calls serve it.
    run = RunBuilder()
    _rolled_back(run)
    run.final("Rolled back: checkout is healthy again.")
    run.human("thanks. now show me the pods and events of the payments namespace")
    for command in ("get pods -n payments", "get events -n payments", "top pods -n payments"):
        run.tool("kubectl", {"command": f"kubectl {command}"}, "ok")
    assert rules(run.steps, mode="FM-1.5") == []
