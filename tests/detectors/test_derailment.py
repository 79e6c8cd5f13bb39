"""FM-2.3 task derailment.

The detector's rules on plain step sequences: each where it should fire, and its near
misses, which must stay silent."""

from __future__ import annotations

from tests.steps import GET_PODS, TASK, RunBuilder, rules


def test_fm23_calls_without_targets_are_neutral():
    run = RunBuilder()
    run.llm(input_text=TASK)
    for _ in range(6):
        run.tool("get_alerts", {}, "firing")
    assert rules(run.steps, mode="FM-2.3") == []


def test_fm23_calls_in_a_row_on_unrelated_resources_are_derailment():
    run = RunBuilder()
    run.llm(input_text=TASK)
    run.tool("kubectl", GET_PODS, "checkout-1 0/1 CrashLoopBackOff")
    for command in (
        "kubectl get pods -n billing",
        "kubectl describe deployment payments -n billing",
        "kubectl logs deployment/payments -n billing",
        "kubectl get configmap payments-config -n billing",
    ):
        run.tool("kubectl", {"command": command}, "ok")
    assert rules(run.steps, mode="FM-2.3") == [("FM-2.3", "off_task")]


def test_fm23_calls_on_the_tasks_resources_are_on_task():
    run = RunBuilder()
    run.llm(input_text=TASK)
    for command in (
        "kubectl get pods -n shop",
        "kubectl describe deployment checkout -n shop",
        "kubectl logs deployment/checkout -n shop",
        "kubectl get events -n shop",
    ):
        run.tool("kubectl", {"command": command}, "ok")
    assert rules(run.steps, mode="FM-2.3") == []


def test_fm23_a_lookup_by_what_the_user_gave_puts_its_result_on_task():
    # A service desk looks the caller up by the username they gave (no target of its own) and
    # then works on the employee id the look-up returned.
    run = RunBuilder(agent="desk-agent")
    run.human("I'm locked out of my account. username jalvarez")
    run.tool("lookup_employee", {"username": "jalvarez"}, '{"employee_id": "E10442"}')
    for name in ("send_code", "check_code", "reset_password", "get_employee"):
        run.tool(name, {"employee_id": "E10442"}, "ok")
    assert rules(run.steps, mode="FM-2.3") == []


def test_fm23_a_lookup_by_something_nobody_gave_does_not_put_its_result_on_task():
    run = RunBuilder(agent="desk-agent")
    run.human("I'm locked out of my account. username jalvarez")
    run.tool("lookup_employee", {"username": "mkowalski"}, '{"employee_id": "E11873"}')
    for name in ("send_code", "check_code", "reset_password", "get_employee"):
        run.tool(name, {"employee_id": "E11873"}, "ok")
    assert rules(run.steps, mode="FM-2.3") == [("FM-2.3", "off_task")]


def test_fm23_an_order_id_written_with_its_hash_is_the_one_the_user_named():
    run = RunBuilder(agent="shop-agent")
    run.human("Please check my order #W8843120, the jacket is too small")
    for name in ("get_order", "get_shipment", "get_invoice", "get_returns"):
        run.tool(name, {"order_id": "#W8843120"}, "ok")
    assert rules(run.steps, mode="FM-2.3") == []
