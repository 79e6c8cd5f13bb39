"""Rules of the FC1, FC2 and FC3 detectors on plain step sequences, positive and near miss,
including the rules the scenario corpus does not exercise."""

from __future__ import annotations

from processors import conventions
from processors.detectors.config import DetectorsConfig
from tests.steps import RunBuilder, analyse

GET_PODS = {"command": "kubectl get pods -n shop"}
FIX = {"command": "kubectl set resources deployment/checkout --limits=memory=256Mi -n shop"}
TASK = "checkout in namespace shop is failing"


def rules(steps, config=None, mode=None):
    findings, _ = analyse(steps, config)
    return sorted((f.mode, f.rule) for f in findings if mode is None or f.mode == mode)


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


def test_fm12_role_tools_from_configuration_and_read_only_pattern():
    config = DetectorsConfig()
    config.role_specification.agent_tools = {"triage": ["kubectl", "get_alerts"]}
    config.role_specification.read_only_agents = ["^triage$"]
    run = RunBuilder(agent="triage")
    run.tool("get_alerts", {}, "HighErrorRate firing")
    run.tool("run_shell", {"command": "curl checkout"}, "ok")
    run.tool("kubectl", FIX, "updated")
    assert rules(run.steps, config, "FM-1.2") == [
        ("FM-1.2", "read_only_role_mutates"),
        ("FM-1.2", "tool_outside_role"),
    ]
    fixer = RunBuilder(agent="fixer")
    fixer.tool("kubectl", FIX, "updated")
    assert rules(fixer.steps, config, "FM-1.2") == []


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


def test_fm21_messages_fall_back_to_the_opening():
    run = RunBuilder()
    for n in (2, 4, 6, 8):
        run.llm(input_tokens=None, messages=n)
    run.llm(input_tokens=None, messages=2)
    assert rules(run.steps, mode="FM-2.1") == [("FM-2.1", "back_to_opening")]
    assert rules(run.steps, mode="FM-1.4") == []  # a reset, not a partial loss


def test_fm22_unnamed_target_and_its_near_miss():
    run = RunBuilder()
    run.llm(input_text=TASK)
    run.tool("kubectl", {"command": "kubectl rollout restart deployment/payments -n billing"})
    assert rules(run.steps, mode="FM-2.2") == [("FM-2.2", "unnamed_target")]
    named = RunBuilder()
    named.llm(input_text=TASK)
    named.tool("kubectl", {"command": "kubectl rollout restart deployment/checkout -n shop"})
    assert rules(named.steps, mode="FM-2.2") == []


def test_fm23_calls_without_targets_are_neutral():
    run = RunBuilder()
    run.llm(input_text=TASK)
    for _ in range(6):
        run.tool("get_alerts", {}, "firing")
    assert rules(run.steps, mode="FM-2.3") == []


def test_fm24_rereading_after_a_change_is_not_withholding():
    run = RunBuilder(agent="triage")
    run.tool("kubectl", GET_PODS, "checkout 0/1")
    run.handoff("fixer", "checkout in shop is OOMKilled (logs); fix deployment/checkout")
    run.tool("kubectl", FIX, "updated", agent="fixer")
    run.tool("kubectl", GET_PODS, "checkout 1/1 Running", agent="fixer")
    assert rules(run.steps, mode="FM-2.4") == []
    lazy = RunBuilder(agent="triage")
    lazy.tool("kubectl", GET_PODS, "checkout 0/1")
    lazy.handoff("fixer", "please fix it")
    lazy.tool("kubectl", GET_PODS, "checkout 0/1", agent="fixer")
    assert rules(lazy.steps, mode="FM-2.4") == [("FM-2.4", "redone_after_handoff")]


def test_fm26_other_tool_and_target_mismatch():
    run = RunBuilder()
    run.tool("kubectl", {"command": "kubectl describe deployment payments -n billing"}, "ok")
    run.llm(output="I will look at the payments deployment logs.", calls=("kubectl",))
    run.tool("kubectl", {"command": "kubectl logs deployment/cart -n shop"}, "ok")
    run.llm(output="Listing alerts.", calls=("get_alerts",))
    run.tool("kubectl", GET_PODS, "ok")
    assert rules(run.steps, mode="FM-2.6") == [
        ("FM-2.6", "other_tool_executed"),
        ("FM-2.6", "target_mismatch"),
    ]


def test_fm31_required_deliverable():
    config = DetectorsConfig()
    config.premature_termination.required_final_pattern = r"root cause"
    run = RunBuilder()
    run.tool("kubectl", GET_PODS, "ok")
    run.final("checkout pods listed.")
    assert rules(run.steps, config, "FM-3.1") == [("FM-3.1", "no_deliverable")]
    good = RunBuilder()
    good.tool("kubectl", GET_PODS, "ok")
    good.final("The root cause is a 64Mi memory limit.")
    assert rules(good.steps, config, "FM-3.1") == []


def test_fm33_late_unhealthy_check_and_no_claim_near_miss():
    run = RunBuilder()
    run.tool("kubectl", FIX, "updated")
    run.t += 30_000_000_000  # half a minute later: the change had time to take effect
    run.tool("kubectl", GET_PODS, "checkout-2 0/1 CrashLoopBackOff")
    run.final("The issue is resolved.")
    assert rules(run.steps, mode="FM-3.3") == [("FM-3.3", "claimed_despite_unhealthy")]
    honest = RunBuilder()
    honest.tool("kubectl", FIX, "updated")
    honest.tool("kubectl", GET_PODS, "checkout-2 0/1 CrashLoopBackOff")
    honest.final("The pods still crash; the fix did not work.")
    assert rules(honest.steps, mode="FM-3.3") == []


def test_every_detector_can_be_turned_off():
    config = DetectorsConfig()
    for name in vars(config):
        if name != "signals":
            getattr(config, name).enabled = False
    run = RunBuilder()
    for _ in range(4):
        run.tool("kubectl", FIX, "updated")
    assert rules(run.steps, config) == []
