"""FM-3.3 `refusal_against_permission`: the agent tells the user an action is not allowed that
the run's own instructions grant without condition.

A SaaS admin bot (another domain) where it fires, its near misses, the text readers, and real
tau-bench runs."""

from __future__ import annotations

from typing import Any

import pytest

from mast_otel.collector.config import Config
from mast_otel.processors.detectors.incorrect_verification.config import IncorrectVerificationConfig
from mast_otel.processors.detectors.permission_text import contradicts, permissions, refusals
from tests.detectors.real_runs import tau_findings
from tests.imported import findings_of, tool_call

POLICY = (
    "You are the admin assistant of a team workspace product.\n"
    "- Workspaces: Admins can rename workspaces but cannot delete them.\n"
    "- Members: the admin can edit members without changing the seat count.\n"
    "- Billing: if the plan is annual, the admin can update the billing email."
)
SYNONYMS = [["change", "modify", "update", "edit", "alter", "amend"]]


def _admin(said: str, system: str = POLICY, error: str | None = None) -> list[Any]:
    """An admin asks for a change to workspace WS-42; the bot reads it and answers."""
    run: list[Any] = [
        {"role": "system", "content": system},
        {"role": "user", "content": "Please rename workspace WS-42 to 'Growth' and tidy members."},
        tool_call("c1", "get_workspace", {"workspace_id": "WS-42"}),
        {"role": "tool", "tool_call_id": "c1", "content": '{"id": "WS-42", "name": "Sales"}'},
    ]
    if error is not None:
        run += [
            tool_call("c2", "rename_workspace", {"workspace_id": "WS-42", "name": "Growth"}),
            {"role": "tool", "tool_call_id": "c2", "content": error},
        ]
    run += [{"role": "assistant", "content": said}, {"role": "user", "content": "Okay."}]
    return run


def _fm33(runs: list[Any], config: Config | None = None) -> list[Any]:
    return [f for f in findings_of(runs, config) if f.rule == "refusal_against_permission"]


@pytest.mark.parametrize(
    "said,action",
    [
        ("I'm sorry, but workspaces cannot be renamed once created.", "rename workspace"),
        ("Renaming a workspace is not allowed for your account.", "rename workspace"),
        ("It is not possible to rename workspace WS-42.", "rename workspace"),
        ("Member roles cannot be modified by admins.", "edit member"),
        ("Your plan is locked, which cannot be changed to edit members or seats.", "edit member"),
    ],
)
def test_a_refusal_of_what_the_instructions_grant(said: str, action: str) -> None:
    found = _fm33([_admin(said)])
    assert [f.mode for f in found] == ["FM-3.3"]
    assert f"refusing to {action}" in found[0].message
    assert said[:30] in found[0].message
    assert "can" in found[0].evidence["permission"]


@pytest.mark.parametrize(
    "said,system,error",
    [
        # what the grant excepts: deleting, the seat count
        ("Workspaces cannot be deleted, only renamed.", None, None),
        ("The seat count cannot be changed when editing members.", None, None),
        ("Members and the seat count cannot be modified together.", None, None),
        # a grant under a condition ("if the plan is annual"): the refusal may be right
        ("The billing email cannot be updated on a monthly plan.", None, None),
        # another verb than the grant's (or a synonym's)
        ("Workspaces cannot be archived.", None, None),
        # a question, not a refusal
        ("Can workspaces be renamed twice?", None, None),
        # the system refused first: the agent repeats its word
        (
            "I'm sorry, workspaces cannot be renamed right now.",
            None,
            "Error: rename_workspace not permitted while a migration runs",
        ),
        # instructions that grant nothing of it
        ("Workspaces cannot be renamed.", "You are the admin assistant.", None),
    ],
)
def test_near_misses_are_silent(said: str, system: str | None, error: str | None) -> None:
    assert _fm33([_admin(said, system or POLICY, error)]) == []


def test_the_text_readers() -> None:
    granted = permissions(POLICY, SYNONYMS)
    assert [(p.verb, sorted(p.object), sorted(p.restriction)) for p in granted] == [
        ("rename", ["workspace"], ["delete"]),
        ("edit", ["member"], ["count", "seat"]),
    ]
    # "flights or cabin class": each refused alone; naming the flights does not excuse the cabin
    cabin = permissions("All reservations can change cabin without changing the flights.", [])
    found = refusals("It is basic economy, which cannot be modified to change flights or cabin.")
    assert [sorted(r.object) for r in found] == [["flight"], ["cabin"]]
    assert [contradicts(cabin[0], r) for r in found] == [False, True]
    # A subject is read from where its clause starts (the sentence, or after a comma), however
    # long; a refusal's clause after a comma starts anew.
    long = "Because " + "of the rules " * 40 + "passenger names cannot be changed."
    assert [{"name", "passenger"} <= r.object for r in refusals(long)] == [True]
    after = refusals("I checked, and the workspace cannot be renamed.")
    assert [(r.verb, sorted(r.object)) for r in after] == [("renamed", ["workspace"])]


def test_the_rule_can_be_turned_off_and_its_synonyms_are_checked() -> None:
    config = Config()
    config.detectors.incorrect_verification.check_refused_permissions = False
    assert _fm33([_admin("Workspaces cannot be renamed.")], config) == []
    with pytest.raises(ValueError, match="permission_verb_synonyms"):
        IncorrectVerificationConfig(permission_verb_synonyms=["Change it"]).validate()


def test_real_runs() -> None:
    # Runs 93 and 193 tell the user basic economy passenger names cannot be changed; run 154
    # that basic economy "cannot be modified to change passengers"; run 4 that "changing the
    # passenger's identity is not allowed" (beside the passenger count, rightly refused); run 33
    # that basic economy "cannot be modified to change flights or cabin class". The policy: "The
    # user can modify passengers but cannot modify the number of passengers" and "all
    # reservations, including basic economy, can change cabin". Labelled FM-3.3 (33, 93, 193) or
    # FM-1.2 (4, 154: an invented rule).
    for index, said, refused in (
        (4, "changing the passenger's identity is not allowed", "modify passenger"),
        (33, "cannot be modified to change flights or cabin class", "change cabin"),
        (93, "including changing passenger names", "modify passenger"),
        (154, "cannot be modified to change passengers", "modify passenger"),
        (193, "including changing passenger names", "modify passenger"),
    ):
        found = [f for f in tau_findings(index, "FM-3.3") if f.rule == "refusal_against_permission"]
        assert len(found) == 1 and f"refusing to {refused}" in found[0].message
        assert said in found[0].evidence["said"]
    # Run 10 refuses to change the number of passengers, run 114 to upgrade one passenger of
    # two, run 15 to remove a passenger: each right, silent.
    for index in (10, 114, 15):
        assert [
            f for f in tau_findings(index, "FM-3.3") if f.rule == "refusal_against_permission"
        ] == []
