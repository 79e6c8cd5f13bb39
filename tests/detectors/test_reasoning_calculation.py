"""FM-2.6 `told_other_than_calculated`: the agent calculates, then tells the user a figure from
the same operands that is not what the calculation returned.

A shop's order desk (another domain) where it fires, its near misses, and a real tau-bench
run."""

from __future__ import annotations

from typing import Any

import pytest

from mast_otel.collector.config import Config
from tests.detectors.real_runs import tau_findings
from tests.imported import findings_of, tool_call

EXPRESSION = "(129 - 89) + (74 - 45) + 15 * 2"


def _shop(said: str, result: str = "99.0", expression: str = EXPRESSION) -> list[Any]:
    """A shop agent prices an upgrade of two items plus shipping, then tells the customer."""
    return [
        {"role": "system", "content": "You help customers of a shop with their orders."},
        {
            "role": "user",
            "content": "Upgrade both items of order ORD-77 to the pro model; the pro desk is "
            "$129 (I paid $89), the pro lamp $74 (I paid $45), and shipping is $15 per item.",
        },
        tool_call("c1", "calculate", {"expression": expression}),
        {"role": "tool", "tool_call_id": "c1", "content": result},
        {"role": "assistant", "content": said},
        {"role": "user", "content": "OK."},
    ]


def _rule(runs: list[Any], config: Config | None = None) -> list[Any]:
    return [f for f in findings_of(runs, config) if f.rule == "told_other_than_calculated"]


def test_a_total_told_that_leaves_out_terms_of_the_calculation():
    said = (
        "Desk: $129 - $89 = $40. Lamp: $74 - $45 = $29. The total you pay for the upgrade is $69."
    )
    found = _rule([_shop(said)])
    assert [f.mode for f in found] == ["FM-2.6"]
    assert found[0].evidence["told"] == 69
    assert found[0].evidence["result"] == 99
    assert "calculate" in found[0].message and "$69" in found[0].message


@pytest.mark.parametrize(
    "said",
    [
        # the result is told
        "Desk: $129 - $89 = $40. Lamp: $74 - $45 = $29. With shipping the total is $99.",
        "The upgrade costs $99.00 in all ($129 and $74 against $89 and $45, plus shipping).",
        # the figures of the calculation are not quoted: another subject
        "Your order ORD-77 ships on Monday; the upgrade comes to $69 after a coupon.",
        # operands quoted, but no figure besides them
        "The desk is $129 and the lamp $74; shall I go ahead?",
        # one operand quoted ("$15") does not tie the words to the calculation
        "Shipping is $15 for each of the 2 items, so $30 for shipping.",
    ],
)
def test_near_misses_are_silent(said: str) -> None:
    assert _rule([_shop(said)]) == []


def test_a_negative_result_told_as_its_amount_and_settings():
    said = "The new plan is $89 against the $129 you paid: $40 comes back to you."
    assert _rule([_shop(said, result="-40.0", expression="89 - 129")]) == []
    config = Config()
    config.detectors.reasoning_action.check_calculations = False
    told = "Desk: $129 - $89 = $40. Lamp: $74 - $45 = $29. The total is $69."
    assert _rule([_shop(told)], config) == []


def test_real_run():
    # Run 73 calculates (282 - 177) + (346 - 146) + (443 - 180) + 50 * 2 = 668, then tells
    # the user a cost difference of $368 (labelled FM-2.6).
    found = [f for f in tau_findings(73, "FM-2.6") if f.rule == "told_other_than_calculated"]
    assert [(f.evidence["result"], f.evidence["told"]) for f in found] == [(668, 368)]
    # Run 157 tells the refund of its calculation 243 - 2787 as $2544: silent.
    assert [f for f in tau_findings(157, "FM-2.6") if f.rule == "told_other_than_calculated"] == []
