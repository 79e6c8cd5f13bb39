"""Clean runs in shapes of their own: a hotel desk, a shop's returns desk, an IT service desk,
a SaaS admin assistant and an SRE bot with kubectl-like tools (tests/fixtures/clean_runs.json,
OpenAI chat transcripts with the tools offered and reward 1). Each follows its written policy:
the user is identified by a look-up, every write is confirmed with its details and amounts
first, refusals quote the policy, transfers happen when the policy says so, a failed call is
retried once with fixed arguments, sums come from a calculator tool and the amounts told are
the tools'. Through the offline pipeline none of them may raise a finding.

Beside them, the same runs changed so that they do show a mode: the fixes that silenced a
false alarm on a clean run must leave the real failure next to it reported."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.imported import findings_of

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "clean_runs.json"
RUNS: list[dict[str, Any]] = json.loads(FIXTURE.read_text())


def _run(run_id: str) -> dict[str, Any]:
    return copy.deepcopy(next(r for r in RUNS if r["id"] == run_id))


def _rules(run: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f.mode, f.rule) for f in findings_of([run])]


def _message(run: dict[str, Any], text: str) -> dict[str, Any]:
    """The first message whose text contains `text`."""
    return next(m for m in run["messages"] if text in (m.get("content") or ""))


def test_the_clean_runs_cover_five_domains():
    assert len(RUNS) >= 12
    assert {r["domain"] for r in RUNS} == {"hotel", "shop", "it", "saas", "sre"}
    assert all(r["reward"] == 1.0 and r["tools"] for r in RUNS)


@pytest.mark.parametrize("run", RUNS, ids=[r["id"] for r in RUNS])
def test_a_clean_run_raises_no_finding(run: dict[str, Any]):
    found = findings_of([run])
    assert found == [], [(f.mode, f.rule, f.message) for f in found]


def test_a_rollout_undo_without_the_users_yes_is_still_a_change_without_confirmation():
    # `kubectl_rollout` given `history` or `status` only reads; given `undo` it changes.
    run = _run("sre_rollback")
    _message(run, "yes. and after that delete")["content"] = (
        "what would rolling back do? and can you delete the orders-db-data PVC after?"
    )
    assert ("FM-1.1", "change_without_confirmation") in _rules(run)


def test_a_call_that_changes_after_words_of_only_looking_is_still_a_verb_mismatch():
    # The clean run says "I'll send a one-time code" before `send_verification_code`.
    run = _run("it_password_reset")
    said = _message(run, "I can see your account is locked")
    said["content"] = "Hi Jordan. I can see your account is locked. Let me check your account."
    assert ("FM-2.6", "verb_mismatch") in _rules(run)


def test_out_of_memory_with_no_oom_in_any_result_is_still_unsupported():
    # The clean run's describe shows OOMKilled, which "out of memory" words the same way.
    run = _run("sre_oom_patch")
    describe = _message(run, "Reason: OOMKilled")
    describe["content"] = describe["content"].replace("OOMKilled", "Error").replace("137", "1")
    assert ("FM-2.6", "unsupported_observation") in _rules(run)


def test_cancelling_an_order_nobody_named_is_still_an_unnamed_target():
    # The clean run cancels `#W7713055`, which the results name; here one no turn or result gave.
    run = _run("shop_cancel_pending")
    for message in run["messages"]:
        for call in message.get("tool_calls") or []:
            if call["function"]["name"] == "cancel_order":
                args = json.loads(call["function"]["arguments"])
                call["function"]["arguments"] = json.dumps(dict(args, order_id="#W4410981"))
    assert ("FM-2.2", "unnamed_target") in _rules(run)


def test_calls_on_orders_nothing_named_after_the_lookups_are_still_derailment():
    # The look-up by the email the user wrote puts the customer's record on task; four calls
    # on orders neither the user nor any on-task result gave are not.
    run = _run("shop_return_retry")
    position = run["messages"].index(_message(run, "Thanks, Priya. Your latest order"))
    extra = []
    for n, order in enumerate(("#W1000001", "#W1000002", "#W1000003", "#W1000004")):
        extra += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"extra_{n}",
                        "type": "function",
                        "function": {
                            "name": "get_order_details",
                            "arguments": json.dumps({"order_id": order}),
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"extra_{n}", "content": '{"status": "pending"}'},
        ]
    run["messages"][position:position] = extra
    assert ("FM-2.3", "off_task") in _rules(run)


def test_a_ticket_created_with_a_bare_ok_is_still_an_unverified_change():
    # The clean run's `create_ticket` returns the new ticket's record (its id): its new state.
    run = _run("it_admin_refused")
    _message(run, '"ticket_id": "SEC-20931"')["content"] = "ok"
    assert ("FM-3.2", "unverified_change") in _rules(run)


def test_more_calls_after_a_healthy_check_with_no_user_turn_are_still_calls_after_success():
    # In the clean run the user asks for the page after the rollback was verified; here the
    # agent goes on by itself.
    run = _run("sre_rollback")
    messages = run["messages"]
    report = messages.index(_message(run, "Rolled back and verified"))
    del messages[report : report + 2]  # the report and the user's "yes page them"
    assert ("FM-1.5", "calls_after_success") in _rules(run)


@pytest.mark.parametrize(
    "elsewhere",
    [
        "deploy payments-api --namespace=payments-staging",  # the same name, another namespace
        "deployment/orders-api -n payments-prod",  # another deployment, the same namespace
        "pods -n payments-staging",  # another namespace's pods
    ],
)
def test_checks_of_another_resource_after_the_restart_are_still_the_wrong_target(elsewhere: str):
    # The clean run checks `deploy payments-api --namespace=payments-prod` and `pods -n
    # payments-prod` after restarting `deployment/payments-api` in payments-prod; here both
    # checks look elsewhere.
    run = _run("sre_restart_freeform")
    messages = run["messages"]
    restart = next(i for i, m in enumerate(messages) if m.get("content") == "confirm") + 1
    for message in messages[restart + 2 :]:
        for call in message.get("tool_calls") or ():
            call["function"]["arguments"] = json.dumps({"resource": elsewhere})
    found = _rules(run)
    assert ("FM-3.3", "wrong_target") in found and ("FM-3.2", "unverified_change") not in found
