"""FM-1.3 step repetition.

The detector's rules on plain step sequences: each where it should fire, and its near
misses, which must stay silent."""

from __future__ import annotations

import pytest

from mast_otel.collector.config import Config
from mast_otel.processors.detectors.config import DetectorsConfig
from mast_otel.processors.detectors.step_repetition.config import StepRepetitionConfig
from tests.imported import findings_of, tau_findings
from tests.steps import GET_PODS, PODS_BAD, RESTART, RunBuilder, analyse, modes, only, rules


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


# --- near-duplicate retries ------------------------------------------------------------------


def test_fm13_crm_retry_changing_one_field_with_the_same_error():
    run = RunBuilder(agent="crm-agent")
    for owner in ("u-17", "u-18", "u-19"):
        run.tool(
            "create_ticket",
            {"title": "Refund order 7781", "queue": "billing", "owner_id": owner},
            error=f"Error: owner {owner} cannot be assigned to queue billing",
        )
    findings = only(analyse(run.steps)[0], "FM-1.3")
    assert [f.rule for f in findings] == ["near_duplicate_retry"]
    assert "create_ticket retried 3 times" in findings[0].message
    assert "cannot be assigned" in findings[0].message


def test_fm13_coding_agent_reworded_patch_failing_the_same_way():
    run = RunBuilder(agent="codex")
    for body in ("-a = 1\n+a = 2", "-a = 1\n+a = 2  # fix", "-a = 1\n+a = 2  # fixed"):
        run.tool(
            "apply_patch",
            f"*** Begin Patch\n*** Update File: src/cart.py\n@@\n{body}\n*** End Patch",
            error="Failed to find expected lines in src/cart.py",
        )
    assert rules(run.steps, mode="FM-1.3") == [("FM-1.3", "near_duplicate_retry")]


def test_fm13_retries_that_change_the_approach_or_the_error_stay_silent():
    run = RunBuilder(agent="crm-agent")
    run.tool("create_ticket", {"title": "a", "owner_id": "u-1"}, error="Error: owner u-1 away")
    run.tool("create_ticket", {"title": "a", "owner_id": "u-2"}, error="Error: queue is full")
    run.tool("create_ticket", {"title": "a", "queue": "x", "owner_id": "u-3"}, error="Error: x")
    # Polling a job whose result changes is progress, not repetition.
    for state in ("queued", "running", "running 50%", "done"):
        run.tool("get_job_status", {"job_id": "j-1"}, f'{{"state": "{state}"}}')
    assert rules(run.steps, mode="FM-1.3") == []


def test_fm13_the_same_failing_call_twice():
    run = RunBuilder(agent="crm-agent")
    run.tool("close_ticket", {"ticket_id": "T-1"}, error="Error: ticket T-1 is locked")
    run.tool("close_ticket", {"ticket_id": "T-1"}, error="Error: ticket T-1 is locked")
    assert rules(run.steps, mode="FM-1.3") == [("FM-1.3", "same_call")]
    # A successful read twice stays below the threshold.
    run = RunBuilder(agent="crm-agent")
    run.tool("search_tickets", {"q": "refund"}, "[]")
    run.tool("search_tickets", {"q": "refund"}, "[]")
    assert rules(run.steps, mode="FM-1.3") == []


def test_fm13_tau_bench_payment_retry_loop():
    # Run 3 retries update_reservation_flights on one payment method after another with the
    # same balance error (labelled FM-1.3 at message 52).
    findings = tau_findings(3, "FM-1.3")
    assert "near_duplicate_retry" in [f.rule for f in findings]
    # Run 0 (clean for FM-1.3) stays silent.
    assert tau_findings(0, "FM-1.3") == []


# --- repeated requests to the user -----------------------------------------------------------


def _helpdesk(agent_turns: list[str], users: list[str], tail: list[dict] | None = None) -> list:
    """A helpdesk chat: the system prompt, then user and agent turns in turn."""
    messages: list[dict] = [
        {"role": "system", "content": "You are the IT helpdesk agent. Use the tools."}
    ]
    for user, agent in zip(users, agent_turns, strict=True):
        messages.append({"role": "user", "content": user})
        messages.append({"role": "assistant", "content": agent})
    return messages + (tail or [])


_ASKS = [
    "I can reset it. Could you give me the ticket number of your earlier request?",
    "To go on I need the ticket number. Please check your email for it.",
    "I still need the ticket number to reset the VPN token.",
    "Take your time to find the ticket number; I will be here.",
]
_USERS = [
    "My VPN token stopped working. My email is ana.ruiz@example.org.",
    "I don't have the ticket number, but you have my email.",
    "Can't you look it up by my email?",
    "OK, I'll look for it later.",
]


def test_fm13_helpdesk_agent_asks_for_the_same_ticket_number_until_the_run_ends():
    findings = [f for f in findings_of([_helpdesk(_ASKS, _USERS)]) if f.mode == "FM-1.3"]
    assert [f.rule for f in findings] == ["repeated_request"]
    assert findings[0].evidence["asked_for"] == "ticket number"
    assert findings[0].evidence["turns"] == 4
    assert len(findings[0].evidence_span_ids) == 4
    assert "ticket number" in findings[0].message and "Take your time" in findings[0].message


def test_fm13_requests_that_end_in_a_lookup_or_name_the_value_stay_silent():
    # The user gives the number at last and the agent looks the ticket up: the stretch ended.
    answered = _helpdesk(
        _ASKS,
        [*_USERS[:3], "Found it: INC-20431."],
        [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_ticket", "arguments": '{"ticket": "INC-20431"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": '{"ticket": "INC-20431"}'},
            {"role": "assistant", "content": "Your token is reset."},
        ],
    )
    # Turns that name the value ("ticket number INC-20431") do not ask for it.
    named = _helpdesk(
        [f"Your ticket number INC-2043{i} is open; anything else?" for i in range(4)], _USERS
    )
    # Three requests stay below the threshold.
    three = _helpdesk(_ASKS[:3], _USERS[:3])
    # Waiting for it ("once you have the ticket number, ...") is not asking for it again, and a
    # turn that does not ask ends the stretch: two requests, a wait, two requests.
    waiting = _helpdesk(
        [
            _ASKS[0],
            _ASKS[1],
            "Once you have the ticket number, let me know and I will reset the VPN token.",
            _ASKS[2],
            _ASKS[1],
        ],
        [*_USERS, "Still looking."],
    )
    for run in (answered, named, three, waiting):
        assert [f.rule for f in findings_of([run]) if f.mode == "FM-1.3"] == []


def test_fm13_repeated_request_threshold_is_configured_and_checked():
    config = Config()
    config.detectors.step_repetition.request_min_turns = 3
    three = _helpdesk(_ASKS[:3], _USERS[:3])
    assert [f.rule for f in findings_of([three], config) if f.mode == "FM-1.3"] == [
        "repeated_request"
    ]
    config.detectors.step_repetition.request_min_turns = 0
    assert [f for f in findings_of([_helpdesk(_ASKS, _USERS)], config) if f.mode == "FM-1.3"] == []
    bad = StepRepetitionConfig(request_min_turns=1)
    with pytest.raises(ValueError, match="request_min_turns"):
        bad.validate()
    with pytest.raises(ValueError, match="needs a group"):
        StepRepetitionConfig(request_pattern=r"\bticket id\b").validate()


def test_fm13_tau_bench_agent_asks_for_the_reservation_id_again_and_again():
    # Run 97 asks for the reservation ID at messages 2, 4, 6 and 8, each time right after the
    # user said they do not have it, and the run ends there (labelled FM-1.3).
    findings = [f for f in tau_findings(97, "FM-1.3") if f.rule == "repeated_request"]
    assert [f.evidence["asked_for"] for f in findings] == ["reservation id"]
    assert "in a row" in findings[0].message
    # Run 54 asks twice, then only waits ("once you have your reservation ID, please provide
    # it ...") while the user adds requests: not labelled FM-1.3, and silent.
    assert [f for f in tau_findings(54, "FM-1.3") if f.rule == "repeated_request"] == []
    # Run 174 asks for the user id five times, then gets it and looks the reservation up.
    assert [f for f in tau_findings(174, "FM-1.3") if f.rule == "repeated_request"] == []


# --- the same read again after a turn of the user --------------------------------------------


def _coding_session(second_turn: str, second_result: str, edit_between: bool = False) -> list:
    """A coding agent greps for a symbol, the user asks for something new, it greps again."""
    run = RunBuilder(agent="coder")
    run.human("Where is parse_config used?")
    run.llm(calls=("grep",))
    run.tool("grep", {"pattern": "parse_config", "path": "src/"}, "src/app.py:12")
    run.llm(output="It is used in src/app.py line 12.")
    run.human(second_turn)
    run.llm(calls=("grep",))
    if edit_between:
        run.tool("write_file", {"path": "src/cli.py", "content": "parse_config()"}, "written")
    run.tool("grep", {"pattern": "parse_config", "path": "src/"}, second_result)
    run.llm(output="Here is what I found.")
    return run.steps


def test_the_same_read_answering_a_new_user_turn_is_repetition():
    findings = only(
        analyse(_coding_session("Any uses in the tests too?", "src/app.py:12"))[0], "FM-1.3"
    )
    assert [f.rule for f in findings] == ["same_call"]
    assert 'grep({"pattern": "parse_config", "path": "src/"})' in findings[0].message
    assert findings[0].evidence["repeats"] == 2


def test_the_same_read_again_with_a_new_result_or_after_a_change_is_no_repetition():
    # the read found something new: the user's turn (or time) changed what it reads
    changed = _coding_session("And now?", "src/app.py:12\nsrc/cli.py:3")
    assert only(analyse(changed)[0], "FM-1.3") == []
    # a change between: reading again is checking it
    edited = _coding_session("Use it in the CLI too.", "src/app.py:12", edit_between=True)
    assert only(analyse(edited)[0], "FM-1.3") == []
    # no turn of the user between: two reads are not yet a repetition
    run = RunBuilder(agent="coder")
    run.tool("grep", {"pattern": "parse_config", "path": "src/"}, "src/app.py:12")
    run.llm()
    run.tool("grep", {"pattern": "parse_config", "path": "src/"}, "src/app.py:12")
    assert only(analyse(run.steps)[0], "FM-1.3") == []
    # the setting at 3 asks for a third call, as without a user turn
    config = DetectorsConfig()
    config.step_repetition.min_repeats_across_user_turn = 3
    same = _coding_session("Any uses in the tests too?", "src/app.py:12")
    assert only(analyse(same, config)[0], "FM-1.3") == []


def test_fm13_tau_bench_the_same_search_answering_a_new_request():
    # Run 72: asked at message 21 to look for other nonstop options, the agent re-runs the
    # search_direct_flight EWR-LAX 2024-05-21 of message 14 and gets the same single flight
    # (labelled FM-1.3 at message 22).
    found = [f for f in tau_findings(72, "FM-1.3") if f.rule == "same_call"]
    assert [f.evidence["tool"] for f in found] == ["search_direct_flight"]
    assert '"destination":"LAX"' in found[0].evidence["arguments"]
    # Run 0 repeats no read across a turn of the user and stays silent.
    assert tau_findings(0, "FM-1.3") == []
