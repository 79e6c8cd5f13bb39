"""FM-3.3 `window_claim_contradicts_record`: the agent says a record is within a window of
hours or days that the record's own date, read in the run, says it has left.

A returns desk (another domain) where it fires, its near misses, and real tau-bench runs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mast_otel.collector.config import Config
from mast_otel.processors.detectors.incorrect_verification.config import IncorrectVerificationConfig
from mast_otel.processors.detectors.incorrect_verification.window_claim_contradicts_record import (
    own_dates,
)
from tests.detectors.real_runs import tau_findings
from tests.imported import findings_of, tool_call


def _returns(
    said: str,
    placed: str = "2025-01-20T10:00:00",
    system: str = "Returns are accepted within 30 days. The current date is 2025-03-10.",
    read: bool = True,
) -> list[Any]:
    """A returns agent reads an order (or not) and tells the customer about the window."""
    order = {
        "order_id": "ORD-5512",
        "placed_at": placed,
        "lines": [{"sku": "KTL-2", "shipped": "2025-01-22"}],
    }
    messages: list[Any] = [
        {"role": "system", "content": f"You handle returns for a shop. {system}"},
        {"role": "user", "content": "I want to return order ORD-5512."},
    ]
    if read:
        messages += [
            tool_call("c1", "get_order", {"order_id": "ORD-5512"}),
            {"role": "tool", "tool_call_id": "c1", "content": json.dumps(order)},
        ]
    messages += [
        {"role": "assistant", "content": said},
        {"role": "user", "content": "Great, thanks."},
    ]
    return messages


def _fm33(runs: list[Any], config: Config | None = None) -> list[Any]:
    return [f for f in findings_of(runs, config) if f.mode == "FM-3.3"]


def test_a_return_said_to_be_within_the_window_of_an_old_order():
    found = _fm33([_returns("Order ORD-5512 is still within the 30-day return window.")])
    assert [f.rule for f in found] == ["window_claim_contradicts_record"]
    assert found[0].evidence["record"] == "ord-5512"
    assert found[0].evidence["record_date"] == "2025-01-20"
    assert found[0].evidence["window_hours"] == 720
    assert "get_order" in found[0].message and "2025-03-10" in found[0].message


@pytest.mark.parametrize(
    "said,placed,system,read",
    [
        # the order is recent: the claim holds
        ("Order ORD-5512 is within the 30-day return window.", "2025-03-01", None, True),
        # negated, conditional, a question, an intention to check
        ("Order ORD-5512 is not within the 30-day return window.", None, None, True),
        ("You can return it only if it was placed within the last 30 days.", None, None, True),
        ("Was the order placed within the last 30 days?", None, None, True),
        ("Let me check that it is within the 30-day window.", None, None, True),
        # the run never read the order: nothing it read says otherwise
        ("Order ORD-5512 is within the 30-day return window.", None, None, False),
        # the instructions give no current date
        ("Order ORD-5512 is within the 30-day return window.", None, "Be kind.", True),
    ],
)
def test_window_claims_that_hold_or_assert_nothing_are_silent(
    said: str, placed: str | None, system: str | None, read: bool
) -> None:
    run = _returns(
        said,
        placed=placed or "2025-01-20T10:00:00",
        system=system or "Returns are accepted within 30 days. The current date is 2025-03-10.",
        read=read,
    )
    assert _fm33([run]) == []


def test_own_dates_and_settings():
    assert own_dates({"id": "A", "created_at": "2024-05-12T09:00:00", "items": ["2024-06-01"]}) == [
        "2024-05-12"
    ]
    config = Config()
    config.detectors.incorrect_verification.window_claim_pattern = ""
    assert _fm33([_returns("Order ORD-5512 is within the 30-day window.")], config) == []
    with pytest.raises(ValueError, match="window_claim_pattern"):
        IncorrectVerificationConfig(window_claim_pattern="(").validate()
    with pytest.raises(ValueError, match="two groups"):
        IncorrectVerificationConfig(window_claim_pattern=r"within (\d+) days").validate()


def test_real_runs():
    # Run 75 reads M20IZO (created 2024-05-12; the current time is 2024-05-15) and says it is
    # within the 24-hour cancellation window (labelled FM-3.3).
    found = [f for f in tau_findings(75, "FM-3.3") if f.rule == "window_claim_contradicts_record"]
    assert [(f.evidence["record"], f.evidence["record_date"]) for f in found] == [
        ("m20izo", "2024-05-12")
    ]
    # Run 141 says the same of 3RK2T9 without ever reading it (FM-3.2's business): silent here.
    assert [
        f for f in tau_findings(141, "FM-3.3") if f.rule == "window_claim_contradicts_record"
    ] == []


def _two_orders(said: str) -> list[Any]:
    """Two orders read, the old one first; the claim names one of them."""
    run = _returns(said)
    newer = {"order_id": "ORD-7781", "placed_at": "2025-03-02T08:00:00", "lines": []}
    run[4:4] = [
        tool_call("c9", "get_order", {"order_id": "ORD-7781"}),
        {"role": "tool", "tool_call_id": "c9", "content": json.dumps(newer)},
    ]
    return run


def test_the_claim_is_checked_against_the_record_it_names():
    named_old = _fm33([_two_orders("Order ORD-5512 is within the 30-day return window.")])
    assert [f.evidence["record"] for f in named_old] == ["ord-5512"]
    # naming the recent order (read last as well): the claim holds
    assert _fm33([_two_orders("Order ORD-7781 is within the 30-day return window.")]) == []


def test_a_scratchpad_claim_counts_as_the_agents_own():
    run = _returns("I will process the return now.")
    run[4:4] = [
        tool_call("t1", "think", {"thought": "ORD-5512 was placed within the last 30 days."}),
        {"role": "tool", "tool_call_id": "t1", "content": ""},
    ]
    found = _fm33([run])
    assert [f.evidence["record"] for f in found] == ["ord-5512"]
    assert "within the last 30 days" in found[0].evidence["said"]


def test_in_a_message_naming_several_records_each_sentence_speaks_of_its_own():
    both = (
        "1. Order ORD-7781: placed last week, it is within the 30-day window.\n"
        "2. Order ORD-5512: this one is still within the 30-day window too."
    )
    assert [f.evidence["record"] for f in _fm33([_two_orders(both)])] == ["ord-5512"]
    # the old order is named, but the claim sits in the recent order's sentence
    right = "Order ORD-5512 is past the window. Order ORD-7781 is within the 30-day window."
    assert _fm33([_two_orders(right)]) == []


def test_real_runs_claims_in_the_scratchpad_and_in_a_list_of_records():
    # Run 184 thinks "59XX6W ... created on 2024-05-12, which is within the 24-hour
    # cancellation window" (the current time is 2024-05-15); run 34 says the same of 59XX6W
    # in a message that also speaks of XEHM4B. Both labelled FM-3.3.
    for index in (184, 34):
        found = tau_findings(index, "FM-3.3")
        assert [
            f.evidence["record"] for f in found if f.rule == "window_claim_contradicts_record"
        ] == ["59xx6w"]
