"""FM-3.3 `unavailable_option_offered`: the agent offers an item at the price of a class its own
read showed none left of.

A hardware shop (another domain) where it fires, its near misses, and real tau-bench runs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mast_otel.collector.config import Config
from mast_otel.processors.detectors.incorrect_verification.config import IncorrectVerificationConfig
from tests.detectors.real_runs import tau_findings
from tests.imported import findings_of, tool_call

# Two drills, each sold in two sizes; the 18V kit of DR-450 is sold out.
_CATALOGUE = [
    {
        "sku": "DR-450",
        "name": "Cordless drill",
        "stock": {"12v": 14, "18v_kit": 0},
        "prices": {"12v": 89, "18v_kit": 149},
    },
    {
        "sku": "DR-720",
        "name": "Hammer drill",
        "stock": {"12v": 3, "18v_kit": 6},
        "prices": {"12v": 119, "18v_kit": 189},
    },
]


def _shop(said: str, catalogue: list[dict[str, Any]] | None = None) -> list[Any]:
    """A shop assistant searches the catalogue and offers the customer drills."""
    return [
        {"role": "system", "content": "You help customers of a hardware shop order tools."},
        {"role": "user", "content": "I need an 18V cordless drill kit."},
        tool_call("c1", "search_products", {"query": "drill"}),
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps(catalogue or _CATALOGUE)},
        {"role": "assistant", "content": said},
        {"role": "user", "content": "Thanks, I will think about it."},
    ]


def _fm33(runs: list[Any], config: Config | None = None) -> list[Any]:
    return [f for f in findings_of(runs, config) if f.mode == "FM-3.3"]


def test_an_item_offered_at_the_price_of_a_sold_out_class():
    said = "Here is what we have:\n1. DR-450 Cordless drill, 18V kit: $149\n2. DR-720: $189"
    found = _fm33([_shop(said)])
    assert [f.rule for f in found] == ["unavailable_option_offered"]
    assert found[0].evidence["items"] == ["DR-450"]
    assert found[0].evidence["class"] == "18v_kit"
    assert found[0].evidence["price"] == 149
    assert "search_products" in found[0].message and "stock.18v_kit = 0" in found[0].message


def test_a_total_of_two_items_with_one_sold_out_class():
    said = "The bundle of DR-720 and DR-450 in the 18V kit comes to $338."
    found = _fm33([_shop(said)])
    assert [f.evidence["items"] for f in found] == [["DR-720", "DR-450"]]
    assert found[0].evidence["unavailable"] == "DR-450"


def test_one_number_of_stock_and_one_price():
    catalogue = [{"sku": "SAW-31", "in_stock": 0, "price": 64}]
    found = _fm33([_shop("SAW-31 is a good choice at $64.", catalogue)])
    assert [f.evidence["items"] for f in found] == [["SAW-31"]]
    assert "in_stock = 0" in found[0].message


@pytest.mark.parametrize(
    "said",
    [
        # the class with stock left, or another item
        "DR-450 in 12V costs $89; DR-720 as an 18V kit costs $189.",
        # the agent says it is sold out
        "DR-450 as an 18V kit ($149) is sold out; DR-720 has it for $189.",
        "DR-450: 18V kit $149 (0 left). DR-720: 18V kit $189.",
        # the item is named but no price of its sold-out class is quoted
        "DR-450 is only available in 12V. DR-720 comes as an 18V kit.",
        # the sum of two classes with stock left
        "DR-450 (12V) and DR-720 (12V) together cost $208.",
    ],
)
def test_offers_that_hold_or_say_it_is_gone_are_silent(said: str) -> None:
    assert _fm33([_shop(said)]) == []


def test_a_figure_past_a_blank_line_is_not_said_of_the_item():
    said = "DR-450 comes in 12V only.\n\nYour cart total so far is $149."
    assert _fm33([_shop(said)]) == []


def test_a_price_shared_by_a_class_with_stock_left_is_no_evidence():
    catalogue = [
        {"sku": "DR-450", "stock": {"12v": 5, "18v_kit": 0}, "prices": {"12v": 149, "18v_kit": 149}}
    ]
    assert _fm33([_shop("DR-450 is $149.", catalogue)]) == []


def test_the_latest_read_counts():
    run = _shop("DR-450 as an 18V kit is $149.")
    restocked = [dict(_CATALOGUE[0], stock={"12v": 14, "18v_kit": 2})]
    run[4:4] = [
        tool_call("c2", "get_product", {"sku": "DR-450"}),
        {"role": "tool", "tool_call_id": "c2", "content": json.dumps(restocked)},
    ]
    assert _fm33([run]) == []


def test_hostile_reads_and_replies_raise_nothing():
    # A price too large for a float: the item is not read (it raised OverflowError).
    huge = [dict(_CATALOGUE[0], prices={"12v": 10**400, "18v_kit": 149})]
    assert _fm33([_shop("DR-450 as an 18V kit is $149.", huge)]) == []
    # A reply naming an item in a letter that matches it only under case folding (long s):
    # no item of that name was read (it raised KeyError).
    run = _shop("\u017fku-9x is $149.", [{"sku": "sku-9x", "stock": 0, "price": 149}])
    assert _fm33([run]) == []
    # Without case: "dr-450" names DR-450.
    assert [f.rule for f in _fm33([_shop("dr-450 as an 18V kit is $149.")])] == [
        "unavailable_option_offered"
    ]


def test_settings():
    config = Config()
    config.detectors.incorrect_verification.availability_field_pattern = ""
    assert _fm33([_shop("DR-450 as an 18V kit is $149.")], config) == []
    with pytest.raises(ValueError, match="unavailable_said_pattern"):
        IncorrectVerificationConfig(unavailable_said_pattern="(").validate()


def test_real_runs():
    # Run 169 lists HAT088 at "Economy Price: $179" though its search showed 0 economy seats;
    # run 3 quotes HAT229 "Economy ($109)" (0 economy seats); run 103 totals HAT229 and
    # HAT266 at "$239 (Economy)". All three labelled FM-3.3.
    expected = {169: ["HAT088"], 3: ["HAT229"], 103: ["HAT229", "HAT266"]}
    for index, items in expected.items():
        found = [f for f in tau_findings(index, "FM-3.3") if f.rule == "unavailable_option_offered"]
        assert [(f.evidence["items"], f.evidence["class"]) for f in found] == [(items, "economy")]
    # Run 69 read the same search as run 169 and left HAT088 out of its list: silent.
    assert [f for f in tau_findings(69, "FM-3.3") if f.rule == "unavailable_option_offered"] == []
