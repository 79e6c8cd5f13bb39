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
