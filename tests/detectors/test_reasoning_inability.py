"""FM-2.6 reasoning-action mismatch: the model says it cannot look something up, then a call
returns it. Where the rule fires, and its near misses, which must stay silent."""

from __future__ import annotations

import pytest

from mast_otel.processors.detectors.config import DetectorsConfig
from mast_otel.processors.detectors.reasoning_action.config import ReasoningActionConfig
from tests.detectors.real_runs import tau_findings
from tests.steps import RunBuilder, analyse

_INVOICES = '{"customer": "c-88", "email": "li@acme.io", "invoices": [{"id": "INV-7", "due": 40}]}'


def _billing(refusal: str, result: str = _INVOICES, tool: str = "search_invoices") -> RunBuilder:
    """A billing agent refuses a look-up, the user insists, and the agent calls a tool."""
    run = RunBuilder(agent="billing")
    run.human("Which invoices are open for li@acme.io?")
    run.final(refusal)
    run.human("Please try, it is urgent.")
    run.llm(input_text="Please try, it is urgent.", calls=(tool,))
    run.tool(tool, {"email": "li@acme.io"}, result)
    run.final("You have one open invoice, INV-7, for 40.")
    return run


def _found(run: RunBuilder, config: DetectorsConfig | None = None) -> list[str]:
    return [f.message for f in analyse(run.steps, config)[0] if f.rule == "inability_then_done"]


def test_fm26_says_it_cannot_look_up_invoices_then_a_call_returns_them():
    told = _billing("I don't have access to invoices by email. Please check your inbox.")
    assert len(_found(told)) == 1
    run = _billing("I'm unable to look up invoices by email address. Please check your inbox.")
    messages = _found(run)
    assert len(messages) == 1
    assert "unable to look up invoices" in messages[0] and "search_invoices" in messages[0]
    assert "its result names invoices)" in messages[0]
    # The finding sits on the refusal, the evidence holds the call.
    finding = next(f for f in analyse(run.steps)[0] if f.rule == "inability_then_done")
    assert finding.span_id == run.steps[1].span_id
    off = DetectorsConfig()
    off.reasoning_action.inability_pattern = ""
    assert _found(run, off) == []


def test_fm26_a_refusal_no_result_belies_is_silent():
    # The result names nothing of what was refused (a payment plan, not invoices).
    other = _billing(
        "I don't have access to payment plans. Let me see what I can find.",
        result='{"customer": "c-88", "tier": "gold"}',
        tool="get_customer",
    )
    # A refusal to change something is no refusal to look it up.
    change = _billing("I cannot cancel invoices by email address.")
    # Words only about the way of asking ("using just the details") name no thing.
    vague = _billing("I'm unable to check using just those details.")
    # "Provide" refuses a look-up only when what is refused is information.
    grant = _billing("I cannot provide invoice credits by email.")
    # A search that came back empty is no inability: finding it later is a recovery.
    searched = _billing("I cannot find invoices for that email address yet.")
    # Refused by one way of looking (a name), then looked up by another (the email).
    other_way = _billing("I'm unable to look up invoices using just a name. Your email?")
    for run in (other, change, vague, grant, searched, other_way):
        assert _found(run) == []


def test_fm26_inability_pattern_is_checked():
    with pytest.raises(ValueError, match=r"reasoning_action\.inability_pattern"):
        ReasoningActionConfig(inability_pattern="(").validate()


def test_fm26_real_run_says_it_cannot_look_up_reservations_by_user_id_then_does():
    # Run 33: "I'm unable to look up reservations directly using just the user ID" (4), then
    # get_user_details on that user id returns the user's reservations (labelled at 4).
    found = [f for f in tau_findings(33, "FM-2.6") if f.rule == "inability_then_done"]
    assert len(found) == 1
    assert "unable to look up reservations" in found[0].message
    assert "get_user_details" in found[0].message
    # Run 22: "unable to search for reservations using just a name", asks for the user id and
    # reads the user by it: consistent. Run 159 never reads what it refused.
    assert [f for f in tau_findings(22, "FM-2.6") if f.rule == "inability_then_done"] == []
    assert [f for f in tau_findings(159, "FM-2.6") if f.rule == "inability_then_done"] == []
