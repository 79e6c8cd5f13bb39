"""FM-1.1's `change_to_past_resource`: a change to a resource whose scheduled dates, as last
read, all lie before the current time the instructions state."""

from __future__ import annotations

import json

from mast_otel.processors import conventions
from mast_otel.processors.model import Step
from tests.detectors.real_runs import tau_findings
from tests.steps import RunBuilder, analyse, rules

OPS_POLICY = (
    "You are the change-management assistant of an operations team. The current time is "
    "2025-03-10 09:00 UTC. Maintenance windows can be cancelled until they start."
)


def _windows(window: dict[str, object], policy: str = OPS_POLICY) -> list[Step]:
    run = RunBuilder(agent="ops")
    ask = "Cancel maintenance window MW-2207, the patch is no longer needed."
    run.human(ask)
    run.llm(input_text=ask, calls=("get_maintenance_window",))
    run.tool("get_maintenance_window", {"window_id": "MW-2207"}, json.dumps(window))
    run.llm(input_text=ask, output="MW-2207 will be cancelled. Confirm?")
    run.human("Yes, cancel it.")
    run.llm(input_text="Yes, cancel it.", calls=("cancel_maintenance_window",))
    run.tool("cancel_maintenance_window", {"window_id": "MW-2207"}, '{"status": "cancelled"}')
    return [*run.steps, run.root(**{conventions.TASK_DESCRIPTION: policy})]


PAST = {
    "id": "MW-2207",
    "created_at": "2025-02-01T10:00:00",
    "owner": {"name": "Ana", "birth_date": "1990-01-01"},
    "slots": [{"start_date": "2025-03-01"}, {"end_date": "2025-03-02"}],
}


def test_fm11_cancelling_a_window_that_already_took_place():
    findings = [f for f in analyse(_windows(PAST))[0] if f.mode == "FM-1.1"]
    assert [f.rule for f in findings] == ["change_to_past_resource"]
    assert "cancel_maintenance_window" in findings[0].message
    assert "MW-2207" in findings[0].message and "2025-03-02" in findings[0].message
    assert "2025-03-10" in findings[0].message
    assert "current time is 2025-03-10" in findings[0].evidence["instruction"]


def test_fm11_a_future_window_stamps_that_are_no_schedule_or_no_stated_time_are_silent():
    future = {**PAST, "slots": [{"start_date": "2025-03-01"}, {"end_date": "2025-03-12"}]}
    assert rules(_windows(future), mode="FM-1.1") == []
    # only creation and birth stamps are in the past: nothing scheduled is known
    stamps = {k: v for k, v in PAST.items() if k != "slots"}
    assert rules(_windows(stamps), mode="FM-1.1") == []
    # instructions that do not say what time it is
    timeless = "You are the change-management assistant of an operations team."
    assert rules(_windows(PAST, timeless), mode="FM-1.1") == []


def test_fm11_real_run_cancels_a_trip_already_flown():
    # run 79: 4XGCCM's flights are on 2024-05-03 and 04; the policy's current time is
    # 2024-05-15 and it cancels only trips not flown; cancel_reservation 4XGCCM at 24
    found = [f for f in tau_findings(79, "FM-1.1") if f.rule == "change_to_past_resource"]
    assert len(found) == 1
    assert "4XGCCM" in found[0].message and "2024-05-04" in found[0].message
    # run 0 changes only future reservations: silent for this rule
    assert [f for f in tau_findings(0, "FM-1.1") if f.rule == "change_to_past_resource"] == []


def test_fm11_a_change_to_another_kind_of_resource_than_the_dated_one_is_silent():
    # the customer's past visits are dated; a new booking for that customer changes no visit
    run = RunBuilder(agent="ops")
    ask = "Book a new maintenance slot for customer C-9."
    run.llm(input_text=ask, calls=("get_customer",))
    visits = {"id": "C-9", "visits": [{"date": "2025-01-04"}, {"date": "2025-02-01"}]}
    run.tool("get_customer", {"customer_id": "C-9"}, json.dumps(visits))
    run.llm(input_text="Yes, book it.", calls=("create_maintenance_slot",))
    run.tool("create_maintenance_slot", {"customer_id": "C-9", "date": "2025-03-20"}, "{}")
    steps = [*run.steps, run.root(**{conventions.TASK_DESCRIPTION: OPS_POLICY})]
    assert rules(steps, mode="FM-1.1") == []
    # the same customer record changed: it is the dated resource
    run.llm(input_text="Also delete C-9.", calls=("delete_customer",))
    run.tool("delete_customer", {"customer_id": "C-9"}, "{}")
    steps = [*run.steps, run.root(**{conventions.TASK_DESCRIPTION: OPS_POLICY})]
    assert rules(steps, mode="FM-1.1") == [("FM-1.1", "change_to_past_resource")]
