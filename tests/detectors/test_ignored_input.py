"""FM-2.5 ignored other agent's input.

The detector's rules on plain step sequences: each where it should fire, and its near
misses, which must stay silent."""

from __future__ import annotations

from tests.steps import FIX, GET_PODS, RESTART, RunBuilder, analyse, only, rules

BRIEF = "checkout in shop is OOMKilled (logs). Raise the memory of deployment/checkout in shop."


def test_fm25_a_receiver_that_never_touches_what_it_was_handed_ignored_it():
    run = RunBuilder(agent="triage")
    run.tool("kubectl", GET_PODS, "checkout 0/1 OOMKilled")
    handoff = run.handoff("fixer", BRIEF)
    run.tool("kubectl", {"command": "kubectl get pods -n billing"}, "ok", agent="fixer")
    run.tool("kubectl", {"command": "kubectl get nodes"}, "ok", agent="fixer")
    findings, _ = analyse(run.steps)
    ignored = only(findings, "FM-2.5")
    assert [(f.rule, f.span_id) for f in ignored] == [("instruction_ignored", handoff.span_id)]
    assert "checkout" in ignored[0].evidence["named_targets"]


def test_fm25_a_receiver_that_acts_on_the_brief_or_calls_too_little_is_silent():
    run = RunBuilder(agent="triage")
    run.tool("kubectl", GET_PODS, "checkout 0/1 OOMKilled")
    run.handoff("fixer", BRIEF)
    run.tool("kubectl", {"command": "kubectl get nodes"}, "ok", agent="fixer")
    run.tool("kubectl", FIX, "updated", agent="fixer")
    assert rules(run.steps, mode="FM-2.5") == []
    brief = RunBuilder(agent="triage")
    brief.handoff("fixer", BRIEF)
    brief.tool("kubectl", {"command": "kubectl get nodes"}, "ok", agent="fixer")
    assert rules(brief.steps, mode="FM-2.5") == []  # one call: below min_receiver_calls


def test_fm25_repeating_the_call_the_sender_said_had_failed():
    run = RunBuilder(agent="triage")
    run.tool("kubectl", RESTART, "", error="forbidden")
    run.handoff("fixer", "restarting deployment/checkout in shop failed: forbidden")
    again = run.tool("kubectl", RESTART, "", error="forbidden", agent="fixer")
    findings, _ = analyse(run.steps)
    repeated = [f for f in only(findings, "FM-2.5") if f.rule == "repeated_failed_action"]
    assert [f.span_id for f in repeated] == [again.span_id]
    told = RunBuilder(agent="triage")
    told.tool("kubectl", RESTART, "", error="forbidden")
    told.handoff("fixer", "restart deployment/checkout in shop")  # says nothing failed
    told.tool("kubectl", RESTART, "restarted", agent="fixer")
    assert ("FM-2.5", "repeated_failed_action") not in rules(told.steps, mode="FM-2.5")
