"""FM-3.3's figure rules: a change rejected with the system's figure against the agent's own
(`rejected_figure`), and an amount said to cover a larger one (`amount_does_not_cover`).

Each rule on runs of other domains (an online shop, a cloud billing desk), with its near
misses, and on real tau-bench runs."""

from __future__ import annotations

from typing import Any

import pytest

from mast_otel.collector.config import Config
from mast_otel.processors.detectors.incorrect_verification.config import IncorrectVerificationConfig
from mast_otel.processors.detectors.verification import figures
from tests.detectors.real_runs import tau_findings
from tests.imported import findings_of, tool_call


def _tool(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _shop(
    error: str,
    said: str = "The total for 3 lamps is $120. Shall I place the order?",
    ask: str = "Order 3 desk lamps (SKU LMP-40) for me.",
    compute: bool = True,
) -> list[Any]:
    """A shop agent reads a price, computes a total, and places an order that is rejected."""
    calculation = [tool_call("c2", "calculate", {"expression": "3 * 40"}), _tool("c2", "120.0")]
    return [
        {"role": "system", "content": "You place orders for customers of the shop."},
        {"role": "user", "content": ask},
        tool_call("c1", "get_product", {"sku": "LMP-40"}),
        _tool("c1", '{"sku": "LMP-40", "price": 40, "shipping": 15}'),
        *(calculation if compute else []),
        {"role": "assistant", "content": said},
        {"role": "user", "content": "Yes, go ahead."},
        tool_call("c3", "create_order", {"sku": "LMP-40", "quantity": 3, "amount": 120}),
        _tool("c3", error),
        {"role": "assistant", "content": "Something went wrong; let me look into it."},
    ]


def _fm33(runs: list[Any], config: Config | None = None) -> list[Any]:
    return [f for f in findings_of(runs, config) if f.mode == "FM-3.3"]


def test_a_rejected_order_whose_total_the_agent_computed_wrongly():
    found = _fm33([_shop("Error: amount does not match, order total is 135, but charged 120")])
    assert [f.rule for f in found] == ["rejected_figure"]
    assert found[0].evidence["system_figure"] == 135
    assert found[0].evidence["agent_figure"] == 120
    assert "create_order" in found[0].message and "135" in found[0].message


def test_rejections_the_agent_concluded_nothing_about_are_silent():
    runs = [
        # numbers the agent never stated (a rate limit)
        _shop("Error: rate limited, 100 requests per minute, retry after 30 seconds"),
        # one figure only
        _shop("Error: order total is 135"),
        # the figure is the user's, not one the agent concluded (FM-3.2's unchecked_figure)
        _shop(
            "Error: amount does not match, order total is 135, but charged 120",
            said="Placing the order now.",
            ask="Order 3 desk lamps (SKU LMP-40) and charge me $120.",
            compute=False,
        ),
        # accepted: no rejection
        _shop('{"order_id": "ORD-981", "amount": 120}'),
    ]
    for run in runs:
        assert _fm33([run]) == [], run[-2]


def _billing(said: str) -> list[Any]:
    """A cloud billing agent tells a customer whether a credit covers an invoice."""
    return [
        {"role": "system", "content": "You answer billing questions for a cloud provider."},
        {"role": "user", "content": "Will my credit pay invoice INV-2231?"},
        tool_call("c1", "get_account", {"account_id": "acct-77"}),
        _tool("c1", '{"account_id": "acct-77", "credit": 40, "open_invoices": ["INV-2231"]}'),
        tool_call("c2", "get_invoice", {"invoice_id": "INV-2231"}),
        _tool("c2", '{"invoice_id": "INV-2231", "amount_due": 55}'),
        {"role": "assistant", "content": said},
    ]


def test_an_amount_said_to_cover_a_larger_one():
    found = _fm33([_billing("Yes: your $40 credit will cover the $55 invoice in full.")])
    assert [f.rule for f in found] == ["amount_does_not_cover"]
    assert (found[0].evidence["amount"], found[0].evidence["needed"]) == (40, 55)
    assert "40" in found[0].message and "55" in found[0].message


@pytest.mark.parametrize(
    "said",
    [
        "Your $40 credit is not enough to cover the $55 invoice.",  # negated
        "Your $40 credit will only cover part of the $55 invoice.",  # partial
        "Your $60 credit will cover the $55 invoice.",  # it does cover
        "The $20 voucher and the $40 credit together cover the $55 invoice.",  # a split
        "Your credit covers invoices up to the end of the month.",  # no figures
    ],
)
def test_covering_claims_that_hold_or_say_they_do_not_are_silent(said: str) -> None:
    assert _fm33([_billing(said)]) == []


def test_figures_and_settings():
    # identifiers, dates and times are not figures; list markers and small counts neither
    assert figures("HAT030 on 2024-05-13 at 10:00, 1. total $1,305.50 for 12", 10) == [
        1305.5,
        12,
    ]
    config = Config()
    config.detectors.incorrect_verification.covers_pattern = ""
    assert _fm33([_billing("Your $40 credit will cover the $55 invoice.")], config) == []
    with pytest.raises(ValueError, match="covers_pattern"):
        IncorrectVerificationConfig(covers_pattern="(").validate()


def test_real_runs():
    # Run 0 computes 152 + 103 = 255 for the flights and pays 255; the booking is rejected:
    # "total price is 305, but paid 255" (a non-free bag it added itself; labelled FM-3.3).
    found = [f for f in tau_findings(0, "FM-3.3") if f.rule == "rejected_figure"]
    assert [(f.evidence["system_figure"], f.evidence["agent_figure"]) for f in found] == [
        (305, 255)
    ]
    # Run 72 says the $224 gift card will cover the remaining $234 (labelled FM-3.3).
    found = [f for f in tau_findings(72, "FM-3.3") if f.rule == "amount_does_not_cover"]
    assert [(f.evidence["amount"], f.evidence["needed"]) for f in found] == [(224, 234)]
    # Run 6 books with figures that add up: silent.
    assert tau_findings(6, "FM-3.3") == []
