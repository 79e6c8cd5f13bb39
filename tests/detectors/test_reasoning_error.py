"""FM-2.6 `told_other_than_error_figure`: a call fails with an error stating what the total is,
and the model tells the user another total.

A concert-ticket desk (another domain) where it fires, its near misses, and real tau-bench
runs."""

from __future__ import annotations

from typing import Any

import pytest

from mast_otel.collector.config import Config
from mast_otel.processors.detectors.reasoning_action.config import ReasoningActionConfig
from tests.detectors.real_runs import tau_findings
from tests.imported import findings_of, tool_call

ERROR = "Error: amount due is 184.50, but paid 160.00"
ORDER = {"event": "EVT-31", "seats": ["B12", "B13"], "paid": 160.0}


def _desk(said: str, error: str = ERROR, retried: bool = False) -> list[Any]:
    """A ticket desk buys two seats, the payment is refused with the amount due, and the
    model speaks to the customer (after a successful retry, if `retried`)."""
    messages: list[Any] = [
        {"role": "system", "content": "You sell concert tickets for the box office."},
        {"role": "user", "content": "Two seats for EVT-31, B12 and B13, at $80 each please."},
        tool_call("c1", "purchase_tickets", ORDER),
        {"role": "tool", "tool_call_id": "c1", "content": error},
        tool_call("c2", "calculate", {"expression": "80 * 2"}),
        {"role": "tool", "tool_call_id": "c2", "content": "160.0"},
    ]
    if retried:
        messages += [
            tool_call("c3", "purchase_tickets", {**ORDER, "paid": 184.5}),
            {"role": "tool", "tool_call_id": "c3", "content": '{"order": "T-9", "paid": 184.5}'},
        ]
    messages += [
        {"role": "assistant", "content": said},
        {"role": "user", "content": "OK."},
    ]
    return messages


def _rule(runs: list[Any], config: Config | None = None) -> list[Any]:
    return [f for f in findings_of(runs, config) if f.rule == "told_other_than_error_figure"]


def test_a_total_told_against_the_amount_the_error_states():
    said = "Sorry for the hiccup. The correct amount for both seats is $160.00; shall I retry?"
    found = _rule([_desk(said)])
    assert [f.mode for f in found] == ["FM-2.6"]
    assert found[0].evidence["figure"] == 184.5
    assert found[0].evidence["told"] == 160
    assert "purchase_tickets" in found[0].message and "$160.00" in found[0].message
    assert "184.5" in found[0].message


@pytest.mark.parametrize(
    "said",
    [
        # the figure is told (with or without its cents or symbol)
        "The amount due is actually $184.50, not $160; shall I charge the difference?",
        "It comes to 184.5 with the booking fee; the seats are $80 each ($160).",
        # the amount told is not said of the quantity the error named
        "Each seat is $80. Let me check the booking fee and come back to you.",
        # no amount told
        "The amount did not go through; let me look into it.",
    ],
)
def test_near_misses_are_silent(said: str) -> None:
    assert _rule([_desk(said)]) == []


def test_a_success_of_the_same_tool_ends_the_watch_and_settings():
    said = "Done: your order T-9 is placed and the amount charged is $160.00 plus fees."
    assert _rule([_desk(said, retried=True)]) == []
    # an error that states no figure
    assert _rule([_desk(said, error="Error: seat B13 is taken")]) == []
    config = Config()
    config.detectors.reasoning_action.error_figure_pattern = ""
    told = "The correct amount for both seats is $160.00; shall I retry?"
    assert _rule([_desk(told)], config) == []


def test_the_pattern_needs_its_groups():
    with pytest.raises(ValueError, match="error_figure_pattern needs the groups"):
        ReasoningActionConfig(error_figure_pattern=r"total is (\d+)").validate()
    ReasoningActionConfig(error_figure_pattern="").validate()
    # A group that did not take part in the match reads as empty: no figure, no finding.
    config = Config()
    config.detectors.reasoning_action.error_figure_pattern = (
        r"(?:(?P<what>total) is (?P<value>\d+)|amount due)"
    )
    assert _rule([_desk("The correct amount for both seats is $160.00.")], config) == []


def test_real_runs():
    # Run 196: the booking fails with "total price is 1002, but paid 957"; the model then
    # tells "The correct total, including additional fees, is $1,047" (labelled FM-2.6), and
    # after the next failure that the total "is indeed $957".
    found = [f for f in tau_findings(196, "FM-2.6") if f.rule == "told_other_than_error_figure"]
    assert [(f.evidence["figure"], f.evidence["told"]) for f in found] == [
        (1002, 1047),
        (1002, 957),
    ]
    # Run 111: "total price is 375, but paid 299", then "The total price for the flights is
    # indeed $299", and after "total price is 375, but paid 374" that it "is $374".
    found = [f for f in tau_findings(111, "FM-2.6") if f.rule == "told_other_than_error_figure"]
    assert [(f.evidence["figure"], f.evidence["told"]) for f in found] == [(375, 299), (375, 374)]
    # Runs 0, 61 and 75 tell the total the error gave ($305, $375, $608): silent.
    for index in (0, 61, 75):
        assert [
            f for f in tau_findings(index, "FM-2.6") if f.rule == "told_other_than_error_figure"
        ] == []
