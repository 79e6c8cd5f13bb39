"""FM-2.6 reasoning-action mismatch: reports and changes against what the run's results show.

The rules on a change's fields, on the change the user was told of, and on the price of a
group of records: each where it should fire, and its near misses, which must stay silent."""

from __future__ import annotations

import pytest

from mast_otel.processors.detectors.config import DetectorsConfig
from mast_otel.processors.detectors.reasoning_action.config import ReasoningActionConfig
from tests.detectors.real_runs import tau_findings
from tests.steps import RunBuilder, analyse

# --- a report of a change that its result belies, field by field ------------------------------

_TICKET = '{"ticket_id": "T-31", "priority": "normal", "assignee": "ana", "status": "open"}'
_TIERS = '{"plans": {"basic": 10, "pro": 20, "enterprise": 50}}'


def _ticket(said: str, asked: str = "urgent", shown: str = "high") -> list[str]:
    """A ticketing agent sets a field; the result shows what the system made of it."""
    run = RunBuilder(agent="helpdesk")
    run.llm(input_text="Escalate T-31, it is blocking payroll.", calls=("get_ticket",))
    run.tool("get_ticket", {"ticket_id": "T-31"}, _TICKET)
    run.llm(input_text="Escalate T-31.", calls=("update_ticket",))
    result = _TICKET.replace('"normal"', f'"{shown}"')
    run.tool("update_ticket", {"ticket_id": "T-31", "priority": asked}, result)
    run.llm(input_text="Escalate T-31.", output=said)
    return [f.rule for f in analyse([*run.steps, run.root()])[0] if f.mode == "FM-2.6"]


def test_fm26_a_report_telling_the_value_asked_not_the_one_the_result_shows():
    assert _ticket("Done: T-31 priority is now Urgent.") == ["report_contradicts_change"]


def test_fm26_a_report_matching_the_result_or_not_naming_the_field_is_silent():
    assert _ticket("Done: T-31 priority is now high (urgent is reserved for outages).") == []
    assert _ticket("Done: T-31 priority set to urgent.", shown="urgent") == []
    assert _ticket("Done: T-31 is now urgent.") == []
    assert _ticket("If approved, the priority would be urgent.") == []


def _two_changes(
    said: str, second: str = "add_ticket_tag", fixed: bool = False, first: str = "normal"
) -> list[str]:
    """A ticketing agent makes two changes before it reports: the priority, then a tag on the
    same ticket (or a second priority change, or a change to another ticket)."""
    run = RunBuilder(agent="helpdesk")
    run.llm(input_text="Escalate T-31 and tag it payroll.", calls=("get_ticket",))
    run.tool("get_ticket", {"ticket_id": "T-31"}, _TICKET)
    run.llm(input_text="Escalate T-31.", calls=("update_ticket",))
    first_result = _TICKET.replace('"normal"', f'"{first}"')
    run.tool("update_ticket", {"ticket_id": "T-31", "priority": "urgent"}, first_result)
    run.llm(input_text="Escalate T-31.", calls=(second,))
    if second == "add_ticket_tag":
        run.tool(second, {"ticket_id": "T-31", "tag": "payroll"}, _TICKET)
    elif second == "update_ticket":
        shown = "urgent" if fixed else "normal"
        result = _TICKET.replace('"normal"', f'"{shown}"')
        run.tool(second, {"ticket_id": "T-31", "priority": "urgent"}, result)
    else:
        other = '{"ticket_id": "T-32", "priority": "low", "assignee": "ana", "status": "open"}'
        run.tool(second, {"ticket_id": "T-32", "assignee": "ana"}, other)
    run.llm(input_text="Escalate T-31.", output=said)
    return [f.rule for f in analyse([*run.steps, run.root()])[0] if f.mode == "FM-2.6"]


def test_fm26_a_report_after_two_changes_still_compares_the_first_changes_field():
    said = "Done: T-31 priority is now Urgent and it is tagged payroll."
    assert _two_changes(said) == ["report_contradicts_change"]
    assert _two_changes(said, second="update_ticket") == ["report_contradicts_change"]


def test_fm26_a_later_change_that_took_effect_or_was_on_another_record_is_silent():
    # the second change set the priority again and its result shows it
    said = "Done: T-31 priority is now Urgent."
    assert _two_changes(said, second="update_ticket", fixed=True) == []
    # the report tells what the result shows
    assert _two_changes("Done: T-31 priority stays normal; tagged payroll.") == []
    # the first change took effect; the second, on T-32, shows T-32's own priority
    assert _two_changes(said, second="assign_ticket", first="urgent") == []


def _plan(said: str, asked: str = "pro", config: DetectorsConfig | None = None) -> list[str]:
    """A subscription agent: the values a tier may take are the keys of the price list."""
    run = RunBuilder(agent="billing")
    run.llm(input_text="Upgrade SUB-4.", calls=("get_plans",))
    run.tool("get_plans", {}, _TIERS)
    run.tool("get_subscription", {"subscription_id": "SUB-4"}, '{"id": "SUB-4", "tier": "basic"}')
    run.llm(input_text="Upgrade SUB-4.", calls=("update_subscription",))
    run.tool(
        "update_subscription",
        {"subscription_id": "SUB-4", "tier": asked},
        f'{{"id": "SUB-4", "tier": "{asked}"}}',
    )
    run.llm(input_text="Upgrade SUB-4.", output=said)
    return [f.rule for f in analyse([*run.steps, run.root()], config)[0] if f.mode == "FM-2.6"]


def test_fm26_a_report_of_a_change_to_a_value_the_result_does_not_show():
    assert _plan("SUB-4 has been upgraded to Enterprise.") == ["report_contradicts_change"]
    assert _plan("SUB-4 has been upgraded to Pro.") == []
    assert _plan("SUB-4 has been upgraded to pro; enterprise will be offered next month.") == []
    config = DetectorsConfig()
    config.reasoning_action.changed_to_pattern = ""
    assert _plan("SUB-4 has been upgraded to Enterprise.", config=config) == []
    with pytest.raises(ValueError, match="changed_to_pattern"):
        ReasoningActionConfig(changed_to_pattern="(").validate()


def test_fm26_real_runs_report_a_cabin_the_update_result_does_not_show():
    # Run 72: the update asked cabin economy, its result shows basic_economy, the model
    # reports "Cabin Class: Economy" (labelled FM-2.6 at message 36). Run 123: the update
    # set economy (as its result shows) and the model reports "Upgraded to Business Class".
    for index, told in ((72, "economy"), (123, "business")):
        found = [f for f in tau_findings(index, "FM-2.6") if f.rule == "report_contradicts_change"]
        assert [f.evidence["told"] for f in found] == [told]
        assert "update_reservation_flights" in found[0].message
    # Run 55 upgrades FQ8APE (the result still shows basic_economy), then adds bags to it,
    # and reports "Upgraded to economy class" (labelled FM-2.6 at message 24): the bags'
    # change between does not hide the cabin's.
    found = [f for f in tau_findings(55, "FM-2.6") if f.rule == "report_contradicts_change"]
    assert [(f.evidence["told"], f.evidence["shown"]) for f in found] == [
        ("economy", "basic economy")
    ]
    # Run 20 changes flights in the same cabin and reports them: silent.
    assert [f for f in tau_findings(20, "FM-2.6") if f.rule == "report_contradicts_change"] == []


# --- a change made other than the one the user was told of --------------------------------------


def _reassign(told: str, assignee: str = "omar") -> list[str]:
    """A ticketing agent: the assignees the run knows are those its results named."""
    run = RunBuilder(agent="helpdesk")
    run.llm(input_text="Who can take T-31?", calls=("list_agents",))
    run.tool("list_agents", {"team": "payroll"}, '[{"assignee": "ana"}, {"assignee": "omar"}]')
    run.llm(input_text="Who can take T-31?", output=told)
    run.human("Yes, do it.")
    run.llm(input_text="Yes, do it.", calls=("update_ticket",))
    result = f'{{"ticket_id": "T-31", "assignee": "{assignee}"}}'
    run.tool("update_ticket", {"ticket_id": "T-31", "assignee": assignee}, result)
    return [f.rule for f in analyse([*run.steps, run.root()])[0] if f.mode == "FM-2.6"]


def test_fm26_a_change_other_than_the_one_announced():
    assert _reassign("I will assign T-31 to Ana. Shall I go ahead?") == [
        "call_differs_from_announced"
    ]


def test_fm26_a_change_as_announced_or_naming_both_values_is_silent():
    assert _reassign("I will assign T-31 to Omar. Shall I go ahead?") == []
    assert _reassign("Ana is away, so I will assign T-31 to Omar. OK?") == []
    assert _reassign("Shall I reassign T-31?") == []


def test_fm26_real_run_naming_both_cabins_before_the_update_is_no_broken_promise():
    # Run 123 says the outgoing leg goes to business and the return stays in economy, and
    # sets cabin economy: the message names the value the call set, so this rule is silent.
    assert [f for f in tau_findings(123, "FM-2.6") if f.rule == "call_differs_from_announced"] == []


# --- the price of a group told as the price of one member ---------------------------------------

_BUNDLES = (
    '{"order_id": "O-5", "bundles": [[{"sku": "CAM-100", "price": 240}, '
    '{"sku": "LENS-35", "price": 180}], [{"sku": "CAM-100", "price": 240}, '
    '{"sku": "BAG-2", "price": 40}]]}'
)
_HITS = '[{"sku": "CAM-100", "price": 240}, {"sku": "CAM-200", "price": 310}]'


def _shop(said: str, result: str = _BUNDLES) -> list[str]:
    """A shopping agent lists bundles of items its catalogue returned."""
    run = RunBuilder(agent="shop")
    run.llm(input_text="What camera kits do you have?", calls=("search_bundles",))
    run.tool("search_bundles", {"query": "camera kit"}, result)
    run.llm(input_text="What camera kits do you have?", output=said)
    return [f.rule for f in analyse([*run.steps, run.root()])[0] if f.mode == "FM-2.6"]


def test_fm26_a_bundle_priced_at_one_of_its_items():
    said = "Kits:\n- CAM-100 with LENS-35\n  - Price: $240\n- CAM-100 with BAG-2: $280"
    assert _shop(said) == ["group_told_as_member"]


def test_fm26_a_bundle_priced_in_full_in_parts_or_a_list_of_hits_is_silent():
    assert _shop("Kits:\n- CAM-100 with LENS-35\n  - Price: $420") == []
    assert _shop("- CAM-100 with LENS-35: $240 + $180 = $420") == []
    assert _shop("- CAM-100 ($240) and LENS-35 ($180)") == []
    # search hits side by side are alternatives, not a group
    assert _shop("CAM-100 and CAM-200 are in stock; the cheaper is $240.", _HITS) == []


def test_fm26_real_run_prices_a_connection_at_its_first_leg():
    # Run 75 lists "HAT069 (JFK to SEA) & HAT011 (SEA to SFO) - Price: $123", HAT069's fare
    # alone (labelled FM-2.6 at message 20); the connection costs $300.
    found = [f for f in tau_findings(75, "FM-2.6") if f.rule == "group_told_as_member"]
    assert [f.evidence["group"] for f in found] == [["HAT069", "HAT011"]]
    assert "300" in found[0].message
