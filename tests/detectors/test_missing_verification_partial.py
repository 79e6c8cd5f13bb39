"""FM-3.2 `superlative_over_partial_search`: the agent calls an option the best of all after
running only some of the tools that take the query.

A parts shop (another domain) whose stock comes from two tools taking the same query, a hotel
desk whose only search tool's name limits it to nearby rooms, their near misses, and real
tau-bench runs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mast_otel.collector.config import Config
from mast_otel.processors.detectors.missing_verification.config import MissingVerificationConfig
from mast_otel.processors.detectors.missing_verification.superlative_over_partial_search import (
    QueryTools,
)
from tests.detectors.real_runs import ROOT, tau_findings
from tests.imported import findings_of, tau_run, tool_call

QUERY = {"part": "M6 bolt", "region": "eu"}
NUTS = {"part": "M5 nut", "region": "eu"}


def _search(call_id: str, tool: str, offers: list[Any], query: dict[str, Any] = QUERY) -> list[Any]:
    return [
        tool_call(call_id, tool, query),
        {"role": "tool", "tool_call_id": call_id, "content": json.dumps(offers)},
    ]


def _shop(
    said: str,
    tools: tuple[str, ...],
    asked: str = "Find me the cheapest M6 bolts.",
    earlier: tuple[str, ...] = ("list_warehouse_stock", "list_supplier_stock"),
) -> list[Any]:
    """A parts shop: the customer first asks about nuts, which the agent searches with
    `earlier` (both stock tools: that is how the run shows they take the same query); then asks
    `asked`, which the agent searches with `tools` before answering `said`."""
    messages: list[Any] = [
        {"role": "system", "content": "You sell hardware parts."},
        {"role": "user", "content": "Do you have M5 nuts?"},
    ]
    offers = {
        "list_warehouse_stock": [{"seller": "warehouse", "price": 0.12}],
        "list_supplier_stock": [{"seller": "acme", "price": 0.09}],
    }
    for n, tool in enumerate(earlier):
        messages += _search(f"e{n}", tool, offers[tool], NUTS)
    if earlier:
        messages.append({"role": "assistant", "content": "Yes, both sellers have M5 nuts."})
    messages.append({"role": "user", "content": asked})
    for n, tool in enumerate(tools):
        messages += _search(f"c{n}", tool, offers[tool])
    messages += [{"role": "assistant", "content": said}, {"role": "user", "content": "Thanks."}]
    return messages


def _fm32(runs: list[Any], config: Config | None = None) -> list[Any]:
    return [
        f
        for f in findings_of(runs, config)
        if f.mode == "FM-3.2" and f.rule == "superlative_over_partial_search"
    ]


def test_the_cheapest_offer_after_asking_one_of_two_stock_tools():
    said = "The cheapest offer is the warehouse's at 0.12 per bolt."
    found = _fm32([_shop(said, ("list_warehouse_stock",))])
    assert len(found) == 1
    assert found[0].evidence["searches"] == [
        {
            "query": json.dumps(QUERY, sort_keys=True),
            "ran": ["list_warehouse_stock"],
            "not_run": ["list_supplier_stock"],
        }
    ]
    assert "list_supplier_stock" in found[0].message and "cheapest" in found[0].message


@pytest.mark.parametrize(
    "said,tools,asked",
    [
        # both tools ran: the claim covers every option
        ("The cheapest offer is acme's.", ("list_warehouse_stock", "list_supplier_stock"), None),
        # the claim is scoped to what was searched, or the user asked for that scope
        ("The cheapest warehouse offer is 0.12.", ("list_warehouse_stock",), None),
        ("The cheapest offer is 0.12.", ("list_warehouse_stock",), "Cheapest from your warehouse?"),
        # a question, an intention to look
        ("Is 0.12 the cheapest price?", ("list_warehouse_stock",), None),
        ("Let me look for the cheapest offer elsewhere too.", ("list_warehouse_stock",), None),
        # no superlative
        ("The warehouse has them at 0.12.", ("list_warehouse_stock",), None),
    ],
)
def test_claims_covering_what_was_searched_are_silent(
    said: str, tools: tuple[str, ...], asked: str | None
) -> None:
    run = _shop(said, tools, asked or "Find me the cheapest M6 bolts.")
    assert _fm32([run]) == []


def test_an_agent_never_seen_with_a_second_tool_is_silent():
    # Nothing in the run says another tool takes the query: the one that ran may be all there is.
    alone = _shop("The cheapest offer is 0.12.", ("list_warehouse_stock",), earlier=())
    assert _fm32([alone]) == []


def _offered(*tools: tuple[str, list[str]]) -> list[dict[str, Any]]:
    """Tool definitions in the OpenAI request shape, as a chat transcript's `tools`."""
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "parameters": {"type": "object", "properties": {p: {"type": "string"} for p in ps}},
            },
        }
        for name, ps in tools
    ]


def test_a_tool_the_agent_was_offered_but_never_ran_counts():
    # The run never calls list_supplier_stock, but the model was offered it (its definitions
    # on every LLM call, `gen_ai.tool.definitions`): the claim covers options never looked at.
    alone = _shop("The cheapest offer is 0.12.", ("list_warehouse_stock",), earlier=())
    stock = ["part", "region", "max_results"]  # an optional parameter besides the query's
    offered = {
        "messages": alone,
        "tools": _offered(
            ("list_warehouse_stock", stock), ("list_supplier_stock", stock), ("order_part", stock)
        ),
    }
    found = _fm32([offered])
    assert [s["not_run"] for s in found[0].evidence["searches"]] == [["list_supplier_stock"]]
    # A changing tool (order_part) is no search; a read tool whose parameters do not include
    # the query's does not take it; no definitions at all: nothing says a second tool exists.
    other = {
        "messages": alone,
        "tools": _offered(
            ("list_warehouse_stock", stock), ("order_part", stock), ("get_invoice", ["invoice_id"])
        ),
    }
    assert _fm32([other]) == [] and _fm32([alone]) == []


def _rooms(said: str, tools: tuple[str, ...], asked: str = "Find me the cheapest room.") -> list:
    """A hotel desk (another shape): the agent searches rooms with `tools` only, all of which
    it calls for the first time, then answers `said`."""
    messages: list[Any] = [
        {"role": "system", "content": "You book hotel rooms."},
        {"role": "user", "content": asked},
    ]
    query = {"city": "Lyon", "night": "2025-06-01"}
    for n, tool in enumerate(tools):
        messages += [
            tool_call(f"r{n}", tool, query),
            {"role": "tool", "tool_call_id": f"r{n}", "content": '[{"room": "A2", "rate": 90}]'},
        ]
    return [*messages, {"role": "assistant", "content": said}, {"role": "user", "content": "Ok"}]


def test_a_search_tool_whose_name_limits_it_needs_no_second_tool_seen():
    said = "The cheapest room tonight is A2 at 90 euros."
    found = _fm32([_rooms(said, ("search_nearby_rooms",))])
    assert len(found) == 1
    assert found[0].evidence["searches"][0]["limited_to"] == ["nearby"]
    assert found[0].evidence["searches"][0]["not_run"] == []
    assert "search_nearby_rooms only: its name limits it to nearby options" in found[0].message


@pytest.mark.parametrize(
    "said,tools,asked",
    [
        # the claim or the user's request names the limit
        ("The cheapest nearby room is A2.", ("search_nearby_rooms",), None),
        ("The cheapest room is A2.", ("search_nearby_rooms",), "Cheapest room nearby, please?"),
        # the tools that ran are limited differently: together they may cover every option
        ("The cheapest room is A2.", ("search_nearby_rooms", "search_regional_rooms"), None),
        # a name that says nothing of a limit
        ("The cheapest room is A2.", ("search_rooms",), None),
    ],
)
def test_claims_after_a_limited_search_that_stay_silent(
    said: str, tools: tuple[str, ...], asked: str | None
) -> None:
    assert _fm32([_rooms(said, tools, asked or "Find me the cheapest room.")]) == []


def test_the_name_limits_can_be_turned_off():
    config = Config()
    config.detectors.missing_verification.scoped_search_pattern = ""
    run = _rooms("The cheapest room is A2.", ("search_nearby_rooms",))
    assert _fm32([run], config) == []
    with pytest.raises(ValueError, match="scoped_search_pattern"):
        MissingVerificationConfig(scoped_search_pattern="(").validate()


def test_what_earlier_runs_showed_is_not_carried_over():
    # An earlier run used both tools; this one only one: its findings must not depend on which
    # runs the same process saw before (worker processes, restarts).
    both = _shop("Here are the offers.", ("list_warehouse_stock", "list_supplier_stock"))
    alone = _shop("The cheapest offer is 0.12.", ("list_warehouse_stock",), earlier=())
    assert _fm32([both, alone]) == []
    assert len(_fm32([_shop("The cheapest offer is 0.12.", ("list_warehouse_stock",))])) == 1


def test_the_claim_speaks_of_the_searches_since_the_user_last_spoke():
    run = _shop("The cheapest offer is 0.12.", ("list_warehouse_stock",))
    # Both tools ran the query before the user asked again: the query was searched in full.
    run[2:2] = [
        *_search("e1", "list_supplier_stock", [{"seller": "acme", "price": 0.09}]),
        {"role": "assistant", "content": "Acme has them."},
        {"role": "user", "content": "And the warehouse?"},
    ]
    assert _fm32([run]) == []


def test_settings_and_bounds():
    config = Config()
    config.detectors.missing_verification.superlative_pattern = ""
    run = _shop("The cheapest offer is 0.12.", ("list_warehouse_stock",))
    assert _fm32([run], config) == []
    with pytest.raises(ValueError, match="superlative_pattern"):
        MissingVerificationConfig(superlative_pattern="(").validate()
    with pytest.raises(ValueError, match="max_known_query_tools"):
        MissingVerificationConfig(max_known_query_tools=0).validate()
    tools = QueryTools(max_tools=1)
    tools.learn("shop", "a", frozenset({"x"}))
    tools.learn("shop", "b", frozenset({"x"}))
    assert tools.taking("shop", frozenset({"x"})) == {"a"}


def test_real_runs():
    # Runs 58 and 109 search SFO-SEA with search_onestop_flight only and call a business
    # round trip the cheapest; both searched other legs with both flight tools earlier in the
    # run (both labelled FM-3.2: search_direct_flight never ran for SFO-SEA).
    for index in (58, 109):
        found = [
            f for f in tau_findings(index, "FM-3.2") if f.rule == "superlative_over_partial_search"
        ]
        assert ["search_direct_flight"] in [s["not_run"] for s in found[0].evidence["searches"]]
    # Runs 6, 7, 106 (ATL-PHL, "the cheapest economy option") and 153 (DEN-IAH, "the quickest
    # return option") make the same kind of claim after search_onestop_flight alone and never
    # run search_direct_flight at all: the tool's own name limits it to one-stop options (all
    # labelled FM-3.2).
    for index, said in ((6, "cheapest"), (7, "cheapest"), (106, "cheapest"), (153, "quickest")):
        found = [
            f for f in tau_findings(index, "FM-3.2") if f.rule == "superlative_over_partial_search"
        ]
        assert len(found) == 1 and said in found[0].evidence["said"]
        assert found[0].evidence["searches"][0]["ran"] == ["search_onestop_flight"]
        assert found[0].evidence["searches"][0]["limited_to"] == ["onestop"]
    # Run 160's user asked for direct flights: its "cheapest" after direct searches only is
    # scoped to them. Runs 27 and 177 call options the earliest and shortest after running both
    # flight tools.
    for index in (160, 27, 177):
        assert not [
            f for f in tau_findings(index, "FM-3.2") if f.rule == "superlative_over_partial_search"
        ]
    # Given the tools the agent was offered (tau-bench's airline tools, which the file does not
    # carry), runs 6 and 153 are found: search_direct_flight was offered and never ran.
    tools = json.loads((ROOT / "tests/labels/tau_airline/tools.json").read_text())
    for index in (6, 153):
        found = [
            f
            for f in _fm32([{**tau_run(index), "tools": tools}])
            if f.rule == "superlative_over_partial_search"
        ]
        assert ["search_direct_flight"] in [s["not_run"] for s in found[0].evidence["searches"]]
