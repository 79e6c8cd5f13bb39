"""FM-3.3 `user_word_over_record`: the agent repeats the user's description of a field that the
record it read gives another value.

A software subscription desk (another domain) where it fires, its near misses, and real
tau-bench runs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mast_otel.collector.config import Config
from tests.detectors.real_runs import tau_findings
from tests.imported import findings_of, tool_call


def _desk(said: str, plan: str = "basic", read: bool = True, earlier: str = "") -> list[Any]:
    """A subscription desk: the customer describes their plan; the agent reads the account
    (or not) and answers."""
    account = {"account_id": "acct-118", "plan": plan, "seats": 3, "auto_renew": "yes"}
    messages: list[Any] = [
        {"role": "system", "content": "You support customers of a software subscription."},
        {"role": "user", "content": "I'm on the premium plan, acct-118. I want priority support."},
    ]
    if read:
        messages += [
            tool_call("c1", "get_account", {"account_id": "acct-118"}),
            {"role": "tool", "tool_call_id": "c1", "content": json.dumps(account)},
        ]
    if earlier:
        messages += [
            {"role": "assistant", "content": earlier},
            {"role": "user", "content": "Please check again, I'm sure it's premium plan."},
        ]
    messages += [{"role": "assistant", "content": said}, {"role": "user", "content": "Thanks."}]
    return messages


def _fm33(runs: list[Any], config: Config | None = None) -> list[Any]:
    return [
        f
        for f in findings_of(runs, config)
        if f.mode == "FM-3.3" and f.rule == "user_word_over_record"
    ]


def test_the_users_plan_said_back_against_the_account_read():
    found = _fm33([_desk("Since you're on the Premium plan, I've opened a priority ticket.")])
    assert len(found) == 1
    assert found[0].evidence["user_value"] == "premium"
    assert found[0].evidence["record_value"] == "basic"
    assert found[0].evidence["field"] == "plan"
    assert "get_account" in found[0].message and "Premium plan" in found[0].message


@pytest.mark.parametrize(
    "said,plan,read,earlier",
    [
        # the account agrees
        ("Since you're on the premium plan, I've opened a priority ticket.", "premium", True, ""),
        # the agent tells the record's value, now or before
        ("Your account shows the basic plan, not the premium plan.", "basic", True, ""),
        (
            "Since you're on the premium plan, you get priority support.",
            "basic",
            True,
            "Your account is on the basic plan.",
        ),
        # a courtesy: the user's word is no reason for anything said
        ("As a valued premium plan customer, thank you for waiting.", "basic", True, ""),
        # a supposition, a question
        ("Since you're on the premium plan you would get priority.", "basic", True, ""),
        ("Are you sure you're on the premium plan?", "basic", True, ""),
        # nothing was read: nothing read says otherwise (not this rule's case)
        ("Since you're on the premium plan, I've opened a priority ticket.", "basic", False, ""),
    ],
)
def test_replies_the_record_does_not_contradict_are_silent(
    said: str, plan: str, read: bool, earlier: str
) -> None:
    assert _fm33([_desk(said, plan=plan, read=read, earlier=earlier)]) == []


def test_a_yes_or_no_field_is_no_other_value_and_the_rule_can_be_off():
    run = _desk("Because you have manual renewal, it is off.", plan="basic")
    run[1]["content"] += " I have manual renewal."
    assert _fm33([run]) == []
    config = Config()
    config.detectors.incorrect_verification.check_user_words = False
    said = "Since you're on the premium plan, I've opened a priority ticket."
    assert _fm33([_desk(said)], config) == []


def test_real_runs():
    # Runs 40 and 190: the user says "As a Gold member"; get_user_details shows membership
    # "regular"; the agent grants compensation "since you are a Gold member" (labelled FM-3.3).
    for index in (40, 190):
        found = [f for f in tau_findings(index, "FM-3.3") if f.rule == "user_word_over_record"]
        assert [(f.evidence["user_value"], f.evidence["record_value"]) for f in found] == [
            ("gold", "regular")
        ]
    # Run 37 says "As a valued Gold member, I've issued a $200 certificate" against a regular
    # profile: a courtesy, not a premise (reader C: an unsupported statement, FM-2.6).
    assert not [f for f in tau_findings(37, "FM-3.3") if f.rule == "user_word_over_record"]
    # Run 144 tells the user the profile says silver, then answers "as a gold member, you
    # would ..." because the user asked what gold would give: silent.
    assert not [f for f in tau_findings(144, "FM-3.3") if f.rule == "user_word_over_record"]
