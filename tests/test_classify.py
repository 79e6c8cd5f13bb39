"""What a call does: tool-name verbs, parsed shell commands, Codex built-ins, escalations."""

from __future__ import annotations

import json

import pytest

from mast_otel.processors.classify import (
    ActionClassifier,
    ActionKind,
    ClassifierConfig,
    split_commands,
)
from mast_otel.processors.model import StepKind
from tests.imported import chat_steps, tau_run, tau_steps

MUT, READ, NEUTRAL, ESC, UNKNOWN = (
    ActionKind.MUTATING,
    ActionKind.READ,
    ActionKind.NEUTRAL,
    ActionKind.ESCALATION,
    ActionKind.UNKNOWN,
)
C = ActionClassifier()


def kind(name: str, args: object) -> ActionKind:
    return C.classify(name, args if isinstance(args, str) else json.dumps(args)).kind


def targets(name: str, args: object) -> set[str]:
    return set(C.classify(name, args if isinstance(args, str) else json.dumps(args)).targets)


# --- tool names decide, in any domain -------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("book_reservation", MUT),
        ("cancel_reservation", MUT),
        ("update_reservation_baggages", MUT),
        ("send_certificate", MUT),
        ("sendEmail", MUT),
        ("crm.update_ticket", MUT),
        ("close-ticket", MUT),
        ("issueRefund", MUT),
        ("pay_invoice", MUT),
        ("get_user_details", READ),
        ("search_direct_flight", READ),
        ("listOpenTickets", READ),
        ("lookup_customer", READ),
        ("calculate", READ),
        ("think", NEUTRAL),
        ("update_plan", NEUTRAL),
        ("transfer_to_human_agents", ESC),
        ("escalate_to_support", ESC),
        ("handoff_to_operator", ESC),
        ("summarise_weather", UNKNOWN),
    ],
)
def test_tool_name_verbs(name: str, expected: ActionKind) -> None:
    assert kind(name, {"note": "please cancel and delete everything"}) is expected


def test_words_in_arguments_do_not_decide() -> None:
    # A read whose query mentions a write stays a read; a scratchpad thinking about a
    # cancellation changes nothing.
    assert kind("search_tickets", {"query": "DELETE FROM users; cancel booking"}) is READ
    assert kind("think", {"thought": "I will cancel reservation ABC123 now"}) is NEUTRAL
    assert kind("summarise_weather", {"text": "kubectl delete pod x"}) is UNKNOWN


def test_targets_come_from_structured_fields() -> None:
    assert targets("cancel_reservation", {"reservation_id": "ZFA04Y"}) == {"zfa04y"}
    assert targets("crm.update_ticket", {"ticket_id": "T-42", "status": "closed"}) == {"t-42"}
    assert targets("merge_accounts", {"account_ids": ["A1", "A2"]}) == {"a1", "a2"}
    # Free text is not a target.
    assert targets("send_email", {"body": "about deployment/checkout"}) == set()


def test_http_method_argument() -> None:
    assert kind("http_request", {"method": "PATCH", "url": "https://api/x"}) is MUT
    assert kind("http_request", {"method": "GET", "url": "https://api/x"}) is READ


# --- shell commands are parsed ---------------------------------------------------------------


def shell(script: str) -> ActionKind:
    return kind("shell", {"command": ["bash", "-lc", script]})


def test_shell_commands_by_their_program() -> None:
    assert shell("cat src/app.py | grep TODO") is READ
    assert shell("sed -n 1,80p src/app.py") is READ
    assert shell("sed -i 's/a/b/' src/app.py") is MUT
    assert shell("git status && git diff") is READ
    assert shell("git add -A && git commit -m fix") is MUT
    assert shell("python -m pytest -q tests/test_app.py 2>&1 | tail -5") is READ
    assert shell("rm -rf build") is MUT
    assert shell("sudo -u app kubectl delete pod checkout-1 -n shop") is MUT
    assert shell("ls > listing.txt") is MUT
    assert shell("make 2>/dev/null") is UNKNOWN
    assert kind("exec_command", {"cmd": "cd repo; FOO=1 npm install left-pad"}) is MUT
    assert kind("exec_command", {"cmd": "rg -n 'DROP TABLE' migrations/"}) is READ


def test_text_inside_heredocs_echo_and_json_is_not_a_command() -> None:
    assert shell("cat <<'EOF'\nrm -rf /\nkubectl delete ns prod\nEOF") is READ
    assert shell('echo "rm -rf / && git push --force"') is READ
    assert shell("""echo '{"method": "DELETE", "sql": "DROP TABLE users"}' | jq .""") is READ
    assert shell("cat > notes.md <<EOF\nrm -rf /\nEOF") is MUT  # writes notes.md, runs no rm
    assert targets("shell", {"command": ["bash", "-lc", "cat > notes.md <<EOF\nrm x\nEOF"]}) == {
        "notes.md"
    }


def test_split_commands_unwraps_shells_and_wrappers() -> None:
    assert split_commands("bash -lc 'cd a && sudo rm -f b'") == [["cd", "a"], ["rm", "-f", "b"]]
    assert split_commands("timeout 5 env X=1 ls\npwd") == [["ls"], ["pwd"]]
    assert split_commands("echo 'unbalanced") == [["echo", "'unbalanced"]]


def test_a_kubectl_tool_given_its_command() -> None:
    assert kind("kubectl", {"command": "kubectl get pods -n shop"}) is READ
    assert kind("kubectl", {"command": "rollout restart deployment/checkout -n shop"}) is MUT
    assert targets("kubectl", {"command": "kubectl delete pod checkout-1 -n shop"}) == {
        "checkout-1",
        "shop",
    }
    assert kind("kubectl_get", {"resource": "pods"}) is READ


# --- Codex built-ins -------------------------------------------------------------------------

PATCH = (
    "*** Begin Patch\n*** Update File: src/cart.py\n@@\n-a\n+b\n*** Add File: tests/test_c.py\n"
    "+def test(): pass\n*** Delete File: old.py\n*** End Patch"
)


def test_apply_patch_writes_the_files_its_header_names() -> None:
    for args in (PATCH, {"input": PATCH}):
        action = C.classify("apply_patch", args if isinstance(args, str) else json.dumps(args))
        assert action.kind is MUT
        assert set(action.targets) == {"src/cart.py", "tests/test_c.py", "old.py"}


def test_update_plan_is_planning() -> None:
    plan = {"plan": [{"step": "delete the old module", "status": "pending"}]}
    assert kind("update_plan", plan) is NEUTRAL


def test_configured_vocabulary() -> None:
    config = ClassifierConfig(mutating_verbs=["frobnicate"], read_verbs=["peek"])
    custom = ActionClassifier(config)
    assert custom.classify("frobnicate_widget", "{}").kind is MUT
    assert custom.classify("peek_widget", "{}").kind is READ
    assert custom.classify("book_reservation", "{}").kind is UNKNOWN
    with pytest.raises(ValueError, match="read_verbs"):
        ClassifierConfig(read_verbs=[""]).validate()


# --- the real corpus and the steps it gives ----------------------------------------------------


def test_tau_bench_calls_by_what_they_do() -> None:
    # Run 0 books a reservation (the policy's write) after reading the user's details.
    steps = tau_steps(0)
    calls = {s.tool_name: s for s in steps if s.kind is StepKind.TOOL}
    run = tau_run(0)
    named = {c["function"]["name"] for m in run["traj"] for c in m.get("tool_calls") or []}
    assert set(calls) <= named
    for name, step in calls.items():
        action = C.classify(name, step.tool_arguments)
        if name.startswith(("book_", "cancel_", "update_", "send_")):
            assert action.kind is MUT, name
        elif name.startswith(("get_", "search_", "list_")):
            assert action.kind is READ, name
    assert C.classify("think", calls["think"].tool_arguments).kind is NEUTRAL
    booking = C.classify("book_reservation", calls["book_reservation"].tool_arguments)
    assert booking.kind is MUT and booking.targets  # the user id it books for


def test_tau_bench_escalation_is_not_a_handoff() -> None:
    # Run 4 ends with transfer_to_human_agents: a tool call escalating to a person.
    steps = tau_steps(4)
    transfer = [s for s in steps if s.tool_name == "transfer_to_human_agents"]
    assert transfer and all(s.kind is StepKind.TOOL for s in transfer)
    assert not [s for s in steps if s.kind is StepKind.HANDOFF]
    assert C.classify("transfer_to_human_agents", transfer[0].tool_arguments).kind is ESC


def test_transfer_to_an_agent_stays_a_handoff() -> None:
    steps = chat_steps(
        [
            {"role": "user", "content": "refund my order 7"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "transfer_to_refunds_agent", "arguments": "{}"},
                    },
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "transfer_to_live_support", "arguments": "{}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            {"role": "tool", "tool_call_id": "c2", "content": "ok"},
        ]
    )
    kinds = {s.tool_name: s.kind for s in steps if s.tool_name}
    assert kinds == {
        "transfer_to_refunds_agent": StepKind.HANDOFF,
        "transfer_to_live_support": StepKind.TOOL,
    }


def test_a_person_word_alone_does_not_make_an_escalation() -> None:
    assert kind("assign_ticket_to_user", {"ticket_id": "T-1", "user_id": "u-2"}) is MUT
    assert kind("forward_email_to_support", {"message_id": "m-1"}) is MUT
    assert kind("get_support_ticket", {"ticket_id": "T-1"}) is READ
    assert kind("route_to_live_agent", {}) is ESC
    assert kind("talk_to_human", {}) is ESC


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        # A runner tool's sub-command in an action key: `kubectl rollout <action>`.
        ("kubectl_rollout", {"action": "history", "deployment": "orders"}, READ),
        ("kubectl_rollout", {"action": "status", "deployment": "orders"}, READ),
        ("kubectl_rollout", {"action": "undo", "deployment": "orders"}, MUT),
        ("kubectl_rollout", {"subCommand": "restart", "deployment": "orders"}, MUT),
        # Without one, or with one the patterns do not know, the name's verb decides.
        ("kubectl_rollout", {"deployment": "orders"}, MUT),
        ("kubectl_rollout", {"action": "frobnicate", "deployment": "orders"}, MUT),
        # A name with no verb: the action's verb decides.
        ("reservation", {"operation": "cancel", "reservation_id": "R1"}, MUT),
        ("reservation", {"operation": "get", "reservation_id": "R1"}, READ),
        # A name with a verb of its own keeps it; a command key still wins.
        ("get_ticket", {"action": "close", "ticket_id": "T1"}, READ),
        ("kubectl", {"action": "get", "command": "kubectl delete pod web-1"}, MUT),
    ],
)
def test_an_action_argument_gives_the_sub_command(name: str, args: object, expected: ActionKind):
    assert kind(name, args) is expected
