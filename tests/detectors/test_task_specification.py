"""FM-1.1 disobey task specification.

The detector's rules on plain step sequences: each where it should fire, and its near
misses, which must stay silent."""

from __future__ import annotations

from processors import conventions
from processors.detectors.config import DetectorsConfig
from tests.steps import FIX, GET_PODS, TASK, RunBuilder, rules


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
