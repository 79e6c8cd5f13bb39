"""FM-2.6 reasoning-action mismatch: money going back told to the user as money they pay.

`refund_told_as_charge` where it should fire (a negative calculation or a negative payment line
told as a charge), and its near misses, which must stay silent."""

from __future__ import annotations

import pytest

from mast_otel.processors.detectors.config import DetectorsConfig
from mast_otel.processors.detectors.reasoning_action.config import ReasoningActionConfig
from tests.detectors.real_runs import tau_findings
from tests.steps import RunBuilder, analyse

_ORDER = '{"order_id": "O-7", "plan": "pro", "payments": [{"method": "card_4", "amount": 90}]}'


def _calculated(said: str, result: str = "-20.0", config: DetectorsConfig | None = None) -> list:
    """A shop's agent prices a switch to a cheaper plan with a calculator."""
    run = RunBuilder(agent="shop")
    run.human("What does moving O-7 to the basic plan at $70 cost?")
    run.llm(input_text="What does it cost?", calls=("get_order",))
    run.tool("get_order", {"order_id": "O-7"}, _ORDER)
    run.llm(input_text="What does it cost?", calls=("calculate",))
    run.tool("calculate", {"expression": "70 - 90"}, result)
    run.llm(input_text="What does it cost?", output=said)
    return [f for f in analyse([*run.steps, run.root()], config)[0] if f.mode == "FM-2.6"]


def _changed(said: str, amount: int = -35) -> list:
    """A shop's agent changes an order; the result adds a payment line."""
    run = RunBuilder(agent="shop")
    run.llm(input_text="Move O-7 to the basic plan.", calls=("get_order",))
    run.tool("get_order", {"order_id": "O-7"}, _ORDER)
    run.llm(input_text="Move O-7 to the basic plan.", calls=("update_order",))
    line = f'{{"method": "card_4", "amount": {amount}}}'
    result = _ORDER.replace('"pro"', '"basic"').replace("}]}", f"}}, {line}]}}")
    run.tool("update_order", {"order_id": "O-7", "plan": "basic"}, result)
    run.llm(input_text="Move O-7 to the basic plan.", output=said)
    return [f for f in analyse([*run.steps, run.root()])[0] if f.mode == "FM-2.6"]


def test_fm26_a_negative_calculation_told_as_a_price_to_pay():
    found = _calculated("Moving to basic costs an additional $20 per month.")
    assert [f.rule for f in found] == ["refund_told_as_charge"]
    assert "calculate" in found[0].message and "-20.0" in found[0].message


def test_fm26_a_negative_payment_line_told_as_a_charge():
    found = _changed("Done. $35 has been charged to your credit card ending in 4.")
    assert [f.rule for f in found] == ["refund_told_as_charge"]
    assert "update_order" in found[0].message


def test_fm26_money_back_told_as_money_back_or_a_positive_sum_is_silent():
    assert _calculated("Moving to basic saves you $20 a month.") == []
    assert _calculated("You'll get $20 back on your credit card.") == []
    assert _calculated("Moving to basic costs an additional $20.", result="20.0") == []
    assert _calculated("The basic plan is $70 a month.") == []
    assert _changed("Done. $35 has been refunded to your credit card ending in 4.") == []
    assert _changed("Done. $35 has been charged to your card.", amount=35) == []


def test_fm26_the_rule_is_off_with_an_empty_pattern():
    config = DetectorsConfig()
    config.reasoning_action.user_pays_pattern = ""
    assert _calculated("Moving to basic costs an additional $20.", config=config) == []
    with pytest.raises(ValueError, match="user_pays_pattern"):
        ReasoningActionConfig(user_pays_pattern="(").validate()


def test_fm26_real_run_tells_a_fare_drop_as_an_added_cost():
    # Run 22: calculate returned -114 (the new fare is lower), and the model tells "an
    # additional $114" (labelled FM-2.6 at message 18), then "$114 has been charged" after an
    # update whose payment line is -114.
    found = [f for f in tau_findings(22, "FM-2.6") if f.rule == "refund_told_as_charge"]
    assert len(found) == 2 and "-114" in found[0].message
    # Run 157 tells its refund of $2544 as a refund: silent.
    assert [f for f in tau_findings(157, "FM-2.6") if f.rule == "refund_told_as_charge"] == []
