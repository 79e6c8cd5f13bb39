"""FM-1.1's `change_outside_window`: a change the instructions allow only within a time of the
resource's creation, made later, on a resource none of their named exceptions cover."""

from __future__ import annotations

import json

from mast_otel.processors import conventions
from mast_otel.processors.detectors.task_specification.config import TaskSpecificationConfig
from mast_otel.processors.model import Step
from tests.detectors.real_runs import tau_findings
from tests.steps import RunBuilder, analyse, rules

SHOP_POLICY = (
    "You are the order assistant of an online shop. The current time is 2025-06-02 10:00 UTC.\n"
    "- Orders can be cancelled within 48 hours of purchase. Otherwise, standard orders can be "
    "cancelled only if a return guarantee was bought, and express orders can always be "
    "cancelled.\n# Returns\n- Refunds go to the original payment method."
)

ORDER = {
    "order_id": "ORD-4410",
    "created_at": "2025-05-28T09:12:00",
    "shipping": "standard",
    "guarantee": "no",
    "items": [{"sku": "LAMP-2", "price": 89}],
}


def _cancel(order: dict[str, object], policy: str = SHOP_POLICY, read: bool = True) -> list[Step]:
    run = RunBuilder(agent="shop")
    ask = "Please cancel order ORD-4410, I changed my mind."
    run.human(ask)
    if read:
        run.llm(input_text=ask, calls=("get_order",))
        run.tool("get_order", {"order_id": "ORD-4410"}, json.dumps(order))
    run.llm(input_text=ask, output="I will cancel ORD-4410 (lamp, $89). Confirm?")
    run.human("Yes, go ahead.")
    run.llm(input_text="Yes, go ahead.", calls=("cancel_order",))
    run.tool("cancel_order", {"order_id": "ORD-4410"}, json.dumps({**order, "state": "cancelled"}))
    return [*run.steps, run.root(**{conventions.TASK_DESCRIPTION: policy})]


def test_fm11_shop_cancels_an_order_older_than_the_window_without_an_exception():
    findings = [f for f in analyse(_cancel(ORDER))[0] if f.mode == "FM-1.1"]
    assert [f.rule for f in findings] == ["change_outside_window"]
    message = findings[0].message
    assert "cancel_order" in message and "ORD-4410" in message
    assert "2025-05-28T09:12:00" in message and "48-hour window" in message
    assert "guarantee='no'" in message and "shipping='standard'" in message
    assert findings[0].evidence["window_hours"] == 48
    # the change's own result carries the record when nothing read it first
    assert rules(_cancel(ORDER, read=False), mode="FM-1.1") == [("FM-1.1", "change_outside_window")]


def test_fm11_within_the_window_or_with_an_exception_the_instructions_name_is_silent():
    recent = {**ORDER, "created_at": "2025-06-01T11:00:00"}
    assert rules(_cancel(recent), mode="FM-1.1") == []
    # a field the clause names says yes: the guarantee was bought
    assert rules(_cancel({**ORDER, "guarantee": "yes"}), mode="FM-1.1") == []
    # a value the clause says can always be cancelled
    assert rules(_cancel({**ORDER, "shipping": "express"}), mode="FM-1.1") == []
    # days as the unit: 7 days of purchase covers a five-day-old order
    weekly = SHOP_POLICY.replace("48 hours", "7 days")
    assert rules(_cancel(ORDER, weekly), mode="FM-1.1") == []


def test_fm11_without_a_stated_window_time_or_creation_stamp_is_silent():
    no_window = SHOP_POLICY.replace("within 48 hours of purchase", "at any time")
    assert rules(_cancel(ORDER, no_window), mode="FM-1.1") == []
    timeless = SHOP_POLICY.replace("The current time is 2025-06-02 10:00 UTC.", "")
    assert rules(_cancel(ORDER, timeless), mode="FM-1.1") == []
    unstamped = {k: v for k, v in ORDER.items() if k != "created_at"}
    assert rules(_cancel(unstamped), mode="FM-1.1") == []
    # an empty pattern is a valid setting (the rule off)
    config = TaskSpecificationConfig(change_window_pattern="")
    config.validate()


def test_fm11_a_change_of_another_verb_than_the_window_names_is_silent():
    run = RunBuilder(agent="shop")
    run.llm(input_text="Change the address of ORD-4410.", calls=("get_order",))
    run.tool("get_order", {"order_id": "ORD-4410"}, json.dumps(ORDER))
    run.llm(input_text="Yes.", calls=("update_order_address",))
    run.tool("update_order_address", {"order_id": "ORD-4410", "zip": "10115"}, "{}")
    steps = [*run.steps, run.root(**{conventions.TASK_DESCRIPTION: SHOP_POLICY})]
    assert rules(steps, mode="FM-1.1") == []


def test_fm11_a_run_where_the_other_side_cancelled_something_is_left_alone():
    run = RunBuilder(agent="shop")
    ask = "My delivery was cancelled by the courier, cancel ORD-4410."
    run.llm(input_text=ask, calls=("get_delivery",))
    run.tool("get_delivery", {"order_id": "ORD-4410"}, '{"status": "cancelled"}')
    run.llm(input_text=ask, calls=("get_order",))
    run.tool("get_order", {"order_id": "ORD-4410"}, json.dumps(ORDER))
    run.llm(input_text="Yes.", calls=("cancel_order",))
    run.tool("cancel_order", {"order_id": "ORD-4410"}, "{}")
    steps = [*run.steps, run.root(**{conventions.TASK_DESCRIPTION: SHOP_POLICY})]
    assert rules(steps, mode="FM-1.1") == []


def test_fm11_real_run_cancels_an_economy_trip_booked_days_before_without_insurance():
    # run 25: M20IZO was created 2024-05-12T09:36:29, economy, insurance "no"; the policy's
    # current time is 2024-05-15 15:00 and it allows cancelling within 24 hours of booking,
    # otherwise only with insurance (and business always); cancel_reservation at 10
    found = [f for f in tau_findings(25, "FM-1.1") if f.rule == "change_outside_window"]
    assert len(found) == 1
    assert "M20IZO" in found[0].message and "insurance='no'" in found[0].message
    # run 141 never read 3RK2T9 before cancelling it: the cancellation's own result dates it
    found = [f for f in tau_findings(141, "FM-1.1") if f.rule == "change_outside_window"]
    assert len(found) == 1 and "2024-05-02T06:02:56" in found[0].message
    # run 28 cancels business trips and ones with insurance; run 58 one booked 23 h before
    for index in (28, 58):
        assert [f for f in tau_findings(index, "FM-1.1") if f.rule == "change_outside_window"] == []


def test_fm11_the_resource_s_own_name_is_no_exception_shown():
    # an id that shares a word with the clause ("standard") names the order, not an exception
    order = {**ORDER, "order_id": "STANDARD-4410"}
    run = _cancel(order)
    for step in run:
        if step.tool_arguments:
            step.tool_arguments = step.tool_arguments.replace("ORD-4410", "STANDARD-4410")
    findings = [f for f in analyse(run)[0] if f.mode == "FM-1.1"]
    assert [f.rule for f in findings] == ["change_outside_window"]
    shown = findings[0].message.split("they name")[1]
    assert "order_id" not in shown and "shipping='standard'" in shown


def test_fm11_real_run_s_exceptions_leave_out_the_reservation_s_own_id():
    # run 81 cancels D1EW9B (basic economy, no insurance, booked 271 h before)
    found = [f for f in tau_findings(81, "FM-1.1") if f.rule == "change_outside_window"]
    assert len(found) == 1 and "D1EW9B" in found[0].message
    shown = found[0].message.split("they name")[1]
    assert "reservation_id" not in shown and "insurance='no'" in shown
