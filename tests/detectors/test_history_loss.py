"""FM-1.4 loss of conversation history.

The detector's rules on plain step sequences: each where it should fire, and its near
misses, which must stay silent."""

from __future__ import annotations

from tests.steps import GET_PODS, PODS_BAD, RunBuilder, analyse, modes, only


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
