"""FM-3.2 `verdict_without_read`: the agent rules on the user's own case before any tool read
anything.

A subscription support desk (another domain) where it fires, its near misses, and real
tau-bench runs."""

from __future__ import annotations

from typing import Any

import pytest

from mast_otel.collector.config import Config
from mast_otel.processors.detectors.missing_verification.config import MissingVerificationConfig
from tests.detectors.real_runs import tau_findings
from tests.imported import findings_of, tool_call


def _support(said: str, read_first: bool = False, tools: bool = True) -> list[Any]:
    """A subscription desk: the customer asks for a refund; the agent answers, then (with
    tools) escalates the case."""
    messages: list[Any] = [
        {"role": "system", "content": "You handle refunds for a software subscription."},
        {"role": "user", "content": "I bought the annual plan last week, refund me. I'm acct-118."},
    ]
    if read_first:
        messages += [
            tool_call("c1", "get_subscription", {"account_id": "acct-118"}),
            {
                "role": "tool",
                "tool_call_id": "c1",
                "content": '{"account_id": "acct-118", "plan": "annual", "bought": "2025-03-01"}',
            },
        ]
    messages.append({"role": "assistant", "content": said})
    messages.append({"role": "user", "content": "OK, please pass it on."})
    if tools:
        messages += [
            tool_call("c2", "open_ticket", {"account_id": "acct-118", "summary": "refund"}),
            {"role": "tool", "tool_call_id": "c2", "content": '{"ticket": "T-9"}'},
            {"role": "assistant", "content": "Ticket T-9 is open."},
        ]
    return messages


def _rules(run: list[Any], config: Config | None = None) -> list[str]:
    return [f.rule for f in findings_of([run], config) if f.rule == "verdict_without_read"]


def test_a_refund_verdict_given_before_anything_was_read():
    found = [
        f
        for f in findings_of([_support("Good news: you are eligible for a full refund.")])
        if f.rule == "verdict_without_read"
    ]
    assert len(found) == 1 and found[0].mode == "FM-3.2"
    assert "eligible for a full refund" in found[0].message
    assert _rules(_support("Your annual plan cannot be refunded after 7 days.")) == [
        "verdict_without_read"
    ]
    # compensation offered for the case is a verdict on it too
    assert _rules(_support("I can offer you a $20 credit for the trouble.")) == [
        "verdict_without_read"
    ]


@pytest.mark.parametrize(
    "said,read_first,tools",
    [
        ("Good news: you are eligible for a full refund.", True, True),  # read first
        ("You may be eligible for a refund.", False, True),  # hedged
        ("If the plan is under 14 days old, you are eligible.", False, True),  # conditional
        ("Are you eligible? Let me look.", False, True),  # a question, then an intention
        ("Let me check whether you are eligible for a refund.", False, True),
        ("Good news: you are eligible for a full refund.", False, False),  # no tools at all
        ("Refunds are possible within 14 days of purchase.", False, True),  # policy, no verdict
        ("If you are on the annual plan, I can offer a credit.", False, True),  # conditional
        ("I can offer a few options: upgrade, pause or cancel.", False, True),  # no compensation
    ],
)
def test_verdicts_after_a_read_hedged_or_without_tools_are_silent(
    said: str, read_first: bool, tools: bool
) -> None:
    assert _rules(_support(said, read_first=read_first, tools=tools)) == []


def test_settings():
    config = Config()
    config.detectors.missing_verification.verdict_pattern = ""
    assert _rules(_support("You are eligible for a full refund."), config) == []
    with pytest.raises(ValueError, match="verdict_pattern"):
        MissingVerificationConfig(verdict_pattern="(").validate()


def test_real_runs():
    # Run 168 tells the user that neither cancellation condition applies to their reservation
    # without having called any read (labelled FM-3.2); it later transfers to a person.
    found = [f for f in tau_findings(168, "FM-3.2") if f.rule == "verdict_without_read"]
    assert len(found) == 1 and "neither condition applies" in found[0].message
    # Run 87 offers a certificate for a delay it never looked up (labelled FM-3.2).
    found = [f for f in tau_findings(87, "FM-3.2") if f.rule == "verdict_without_read"]
    assert len(found) == 1 and "offer a certificate" in found[0].message
    # Run 6 reads the profile and the reservation before ruling on anything: silent.
    assert [f for f in tau_findings(6, "FM-3.2") if f.rule == "verdict_without_read"] == []
