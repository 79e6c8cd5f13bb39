"""Detector rules on plain step sequences: each rule fires where it should, and its near
misses stay silent."""

from __future__ import annotations

from processors.detectors.config import DetectorsConfig
from tests.steps import RunBuilder, analyse, modes

GET_PODS = {"command": "kubectl get pods -n shop"}
RESTART = {"command": "kubectl rollout restart deployment/checkout -n shop"}
PODS_BAD = "checkout-7d9 0/1 CrashLoopBackOff 5 (2m ago) 12m"


def only(findings, mode):
    return [f for f in findings if f.mode == mode]


# FM-1.3 ---------------------------------------------------------------------------------------


def test_same_call_three_times_with_same_result_is_repetition():
    run = RunBuilder()
    first = run.tool("kubectl", GET_PODS, PODS_BAD)
    run.llm()
    run.tool("kubectl", {"command": "kubectl  get pods   -n shop"}, PODS_BAD)  # whitespace
    run.llm()
    third = run.tool("kubectl", GET_PODS, PODS_BAD.replace("12m", "13m"))  # age ticks on
    findings, _ = analyse(run.steps)
    rep = only(findings, "FM-1.3")
    assert modes(rep) == [("FM-1.3", "same_call")]
    assert rep[0].span_id == third.span_id
    assert rep[0].evidence_span_ids[0] == first.span_id
    assert rep[0].evidence["repeats"] == 3
    assert rep[0].cost.llm_calls == 2
    assert rep[0].cost.seconds > 4


def test_argument_key_order_and_volatile_fields_do_not_hide_repetition():
    run = RunBuilder()
    run.tool("get_logs", {"pod": "checkout", "lines": 50, "request_id": "r1"}, "OOMKilled")
    run.tool("get_logs", {"lines": 50, "pod": "checkout", "request_id": "r2"}, "OOMKilled")
    run.tool("get_logs", {"request_id": "r3", "pod": "checkout", "lines": 50}, "OOMKilled")
    findings, _ = analyse(run.steps)
    assert modes(only(findings, "FM-1.3")) == [("FM-1.3", "same_call")]


def test_polling_a_rollout_whose_status_changes_is_not_repetition():
    run = RunBuilder()
    status = {"command": "kubectl rollout status deployment/checkout -n shop"}
    for ready in range(1, 5):
        run.tool("kubectl", status, f"Waiting: {ready} of 4 updated replicas are available")
    findings, _ = analyse(run.steps)
    assert only(findings, "FM-1.3") == []


def test_recheck_after_a_fix_is_not_repetition():
    run = RunBuilder()
    run.tool("kubectl", GET_PODS, PODS_BAD)
    run.tool("kubectl", GET_PODS, PODS_BAD)
    run.tool("kubectl", RESTART, "deployment.apps/checkout restarted")
    run.tool("kubectl", GET_PODS, PODS_BAD)
    findings, _ = analyse(run.steps)
    assert only(findings, "FM-1.3") == []


def test_repeats_far_apart_are_not_one_streak():
    run = RunBuilder()
    for i in range(3):
        run.tool("kubectl", GET_PODS, PODS_BAD)
        for j in range(7):
            run.tool("get_metrics", {"query": f"q{i}{j}"}, str(j))
    findings, _ = analyse(run.steps, DetectorsConfig())
    assert only(findings, "FM-1.3") == []


def test_repeated_remediation_with_same_result_is_repetition():
    run = RunBuilder()
    for _ in range(3):
        run.tool("kubectl", RESTART, "deployment.apps/checkout restarted")
    findings, _ = analyse(run.steps)
    assert modes(only(findings, "FM-1.3")) == [("FM-1.3", "same_call")]


def test_a_short_cycle_is_repetition():
    run = RunBuilder()
    for _ in range(3):
        run.tool("get_alerts", {}, "HighErrorRate firing")
        run.tool("kubectl", {"command": "kubectl describe pod checkout-7d9 -n shop"}, "Back-off")
    findings, _ = analyse(run.steps)
    rep = only(findings, "FM-1.3")
    assert ("FM-1.3", "cycle") in modes(rep)
    cycle = next(f for f in rep if f.rule == "cycle")
    assert len(cycle.evidence_span_ids) == 6
    assert cycle.evidence["period"] == 2


def test_two_repeats_stay_below_threshold_and_threshold_is_configurable():
    run = RunBuilder()
    run.tool("kubectl", GET_PODS, PODS_BAD)
    run.tool("kubectl", GET_PODS, PODS_BAD)
    assert only(analyse(run.steps)[0], "FM-1.3") == []
    config = DetectorsConfig()
    config.step_repetition.min_repeats = 2
    assert len(only(analyse(run.steps, config)[0], "FM-1.3")) == 1


# FM-1.4 ---------------------------------------------------------------------------------------


def test_context_shrinking_by_more_than_half_is_history_loss():
    run = RunBuilder()
    run.llm(input_tokens=800)
    run.tool("kubectl", GET_PODS, PODS_BAD)
    before = run.llm(input_tokens=4200)
    after = run.llm(input_tokens=1500)
    findings, _ = analyse(run.steps)
    loss = only(findings, "FM-1.4")
    assert modes(loss) == [("FM-1.4", "context_shrink")]
    assert loss[0].span_id == after.span_id
    assert loss[0].evidence_span_ids == (before.span_id, after.span_id)
    assert loss[0].evidence["before"] == 4200 and loss[0].evidence["after"] == 1500


def test_a_summarized_context_is_not_history_loss():
    run = RunBuilder()
    run.llm(input_tokens=4200)
    run.llm(input_tokens=600, name="summarize_history", agent="summarizer")
    run.llm(input_tokens=900)
    findings, _ = analyse(run.steps)
    assert only(findings, "FM-1.4") == []


def test_shrink_uses_message_counts_when_tokens_are_not_reported():
    run = RunBuilder()
    run.llm(input_tokens=None, messages=14)
    run.llm(input_tokens=None, messages=2)
    findings, _ = analyse(run.steps)
    assert modes(only(findings, "FM-1.4")) == [("FM-1.4", "context_shrink")]


def test_small_contexts_and_other_agents_do_not_count():
    run = RunBuilder()
    run.llm(input_tokens=500)
    run.llm(input_tokens=100)  # below min_prior_input_tokens
    run.llm(input_tokens=5000, agent="planner")
    run.llm(input_tokens=1000, agent="executor")  # another agent's first call
    findings, _ = analyse(run.steps)
    assert only(findings, "FM-1.4") == []


def test_reacquiring_an_unchanged_result_long_after_is_history_loss():
    run = RunBuilder()
    first = run.tool("kubectl", {"command": "kubectl describe deployment checkout -n shop"}, "x")
    for i in range(9):
        run.tool("query_metrics", {"query": f"rate(errors[{i}m])"}, str(i))
    again = run.tool("kubectl", {"command": "kubectl describe deployment checkout -n shop"}, "x")
    findings, _ = analyse(run.steps)
    loss = only(findings, "FM-1.4")
    assert modes(loss) == [("FM-1.4", "reacquire")]
    assert loss[0].span_id == again.span_id
    assert loss[0].evidence_span_ids == (first.span_id, again.span_id)


def test_rereading_after_a_change_is_not_history_loss():
    run = RunBuilder()
    run.tool("kubectl", {"command": "kubectl describe deployment checkout -n shop"}, "x")
    for i in range(9):
        run.tool("query_metrics", {"query": f"q{i}"}, str(i))
    run.tool("kubectl", {"command": "kubectl scale deployment checkout --replicas=3 -n shop"})
    run.tool("kubectl", {"command": "kubectl describe deployment checkout -n shop"}, "x")
    findings, _ = analyse(run.steps)
    assert only(findings, "FM-1.4") == []


# FM-3.2 ---------------------------------------------------------------------------------------


def test_a_change_never_checked_is_missing_verification():
    run = RunBuilder()
    run.tool("kubectl", GET_PODS, PODS_BAD)
    change = run.tool("kubectl", RESTART, "deployment.apps/checkout restarted")
    run.llm()
    findings, signatures = analyse([*run.steps, run.root()])
    missing = only(findings, "FM-3.2")
    assert modes(missing) == [("FM-3.2", "unverified_change")]
    assert missing[0].span_id == change.span_id
    assert sorted(missing[0].evidence["targets"]) == ["checkout", "shop"]
    assert signatures[0].mode_counts == {"FM-3.2": 1}


def test_a_check_of_another_resource_does_not_verify():
    run = RunBuilder()
    run.tool("kubectl", RESTART, "deployment.apps/checkout restarted")
    run.tool("kubectl", {"command": "kubectl get deployment payments -n billing"}, "1/1")
    findings, _ = analyse(run.steps)
    missing = only(findings, "FM-3.2")
    assert len(missing) == 1
    assert missing[0].evidence["reads_after_on_other_resources"] == ["kubectl"]


def test_a_check_after_the_change_is_verification():
    run = RunBuilder()
    run.tool("kubectl", RESTART, "deployment.apps/checkout restarted")
    run.tool("kubectl", GET_PODS, "checkout-8f1 1/1 Running 0 30s")
    findings, _ = analyse(run.steps)
    assert only(findings, "FM-3.2") == []


def test_an_alert_check_verifies_and_a_failed_change_needs_none():
    run = RunBuilder()
    run.tool("restart_deployment", {"name": "checkout"}, "restarted")
    run.tool("get_alerts", {}, "no alerts firing")
    run.tool("scale_deployment", {"name": "cart", "replicas": 2}, "", error="forbidden")
    findings, _ = analyse(run.steps)
    assert only(findings, "FM-3.2") == []


def test_read_only_runs_raise_nothing():
    run = RunBuilder()
    for i in range(5):
        run.llm(input_tokens=1000 + 300 * i)
        run.tool("kubectl", {"command": f"kubectl logs checkout-{i} -n shop"}, f"log {i}")
    findings, signatures = analyse([*run.steps, run.root()])
    assert findings == []
    assert signatures[0].steps == 11
    assert signatures[0].llm_calls == 5 and signatures[0].tool_calls == 5
