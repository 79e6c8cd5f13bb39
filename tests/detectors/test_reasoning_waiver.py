"""FM-2.6 reasoning-action mismatch: a charge told as waived that no change let off. Where
the rule fires, and its near misses, which must stay silent."""

from __future__ import annotations

from tests.detectors.real_runs import tau_findings
from tests.steps import RunBuilder, analyse


def _library(report: str, waive: bool = False) -> list[str]:
    """A library desk agent renews a loan (and, if `waive`, calls a tool waiving its fee)."""
    run = RunBuilder(agent="library")
    run.llm(input_text="Renew my loan L-4 please.", calls=("update_loan",))
    run.tool("update_loan", {"loan_id": "L-4"}, '{"loan_id": "L-4", "due": "2024-06-01"}')
    if waive:
        run.llm(input_text="Renew my loan L-4 please.", calls=("apply_fee_waiver",))
        run.tool("apply_fee_waiver", {"loan_id": "L-4"}, '{"loan_id": "L-4", "late_fee": 0}')
    run.llm(input_text="Renew my loan L-4 please.", output=report)
    found = analyse([*run.steps, run.root()])[0]
    return [f.message for f in found if f.rule == "claimed_unperformed_action"]


def test_fm26_a_fee_told_as_waived_that_no_change_let_off():
    for report in (
        "L-4 is renewed until June 1. The late fee was waived.",
        "L-4 is renewed to June 1, and the late fees have been waived.",
    ):
        messages = _library(report)
        assert len(messages) == 1, report
        # The message names the change that was made: the loan's update.
        assert "waived" in messages[0] and "loan, updat" in messages[0]


def test_fm26_a_waiver_made_or_denied_is_silent():
    assert _library("L-4 is renewed. The late fee was waived.", waive=True) == []
    assert _library("L-4 is renewed. The late fee was not waived.") == []
    assert _library("L-4 is renewed; fees are never waived once the loan is overdue.") == []


def test_fm26_real_runs_tell_a_fee_waived_that_no_call_waived():
    # Run 69 (labelled at 18): "The change fees have been waived due to your travel insurance",
    # after update_reservation_flights, which waives nothing.
    found = [f for f in tau_findings(69, "FM-2.6") if f.rule == "claimed_unperformed_action"]
    assert len(found) == 1 and "change fees have been waived" in found[0].message
    # Run 19 (labelled at 24, again at 28): "The fare difference was waived" after a change
    # whose result shows a refund.
    found = [f for f in tau_findings(19, "FM-2.6") if f.rule == "claimed_unperformed_action"]
    assert len(found) == 1 and "fare difference was waived" in found[0].message


def test_fm26_the_claim_verbs_screen_covers_the_default_pattern():
    """A model output without one of `_DEFAULT_VERBS` skips the default claim pattern: every
    verb the pattern can match holds one of them."""
    import re

    from mast_otel.processors.detectors.reasoning_action.config import ReasoningActionConfig
    from mast_otel.processors.detectors.reasoning_action.context import _DEFAULT_VERBS

    pattern = ReasoningActionConfig().claimed_action_pattern
    groups = re.findall(r"\(\?P<verb\d?>([^()]*(?:\([^()]*\))?[^()]*)\)", pattern)
    assert len(groups) == 4
    for group in groups:
        for verb in group.split("|"):
            for spelled in (verb.replace("l?", "l"), verb.replace("l?", "")):
                assert _DEFAULT_VERBS.search(spelled), spelled
