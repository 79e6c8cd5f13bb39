"""FM-3.3 `past_error_misread`: a call fails with an error about a date already past, and the
agent tells the user another reason (unavailable) without saying the date is past.

A clinic's booking agent (another domain) where it fires, its near misses, and real tau-bench
runs."""

from __future__ import annotations

from typing import Any

import pytest

from mast_otel.collector.config import Config
from mast_otel.processors.detectors.incorrect_verification.config import IncorrectVerificationConfig
from tests.detectors.real_runs import tau_findings
from tests.imported import findings_of, tool_call

TODAY = "The current date is 2025-03-10."


def _clinic(
    said: str,
    error: str = "Error: slot DR-SLOT-77 not available on 2025-03-07",
    system: str = TODAY,
) -> list[Any]:
    """A clinic agent moves an appointment; the move fails; the agent tells the patient."""
    return [
        {"role": "system", "content": f"You book appointments for a clinic. {system}"},
        {"role": "user", "content": "Please move my check-up APT-2210 to Dr. Ruiz."},
        tool_call(
            "c1",
            "update_appointment",
            {"appointment_id": "APT-2210", "slot_id": "DR-SLOT-77", "date": "2025-03-07"},
        ),
        {"role": "tool", "tool_call_id": "c1", "content": error},
        {"role": "assistant", "content": said},
        {"role": "user", "content": "Hm, okay."},
    ]


def _fm33(runs: list[Any], config: Config | None = None) -> list[Any]:
    return [f for f in findings_of(runs, config) if f.rule == "past_error_misread"]


def test_an_error_about_a_past_date_told_as_unavailability():
    said = (
        "It seems slot DR-SLOT-77 on March 7 is no longer available. Would you like me to "
        "look for other slots with Dr. Ruiz on that day?"
    )
    found = _fm33([_clinic(said)])
    assert [f.mode for f in found] == ["FM-3.3"]
    assert found[0].evidence["error_date"] == "2025-03-07"
    assert found[0].evidence["current_date"] == "2025-03-10"
    assert "update_appointment" in found[0].message and "DR-SLOT-77" in found[0].message


@pytest.mark.parametrize(
    "said,error,system",
    [
        # the agent says why: the date has gone by
        ("Slot DR-SLOT-77 on March 7 is already in the past, so it cannot be used.", None, None),
        ("That appointment date (2025-03-07) has passed; shall I pick a new one?", None, None),
        # the error's date is today or later: unavailability is the reason
        (
            "Slot DR-SLOT-77 is not available. Shall I look for another?",
            "Error: slot DR-SLOT-77 not available on 2025-03-12",
            None,
        ),
        # the error names no date
        (
            "Slot DR-SLOT-77 is not available. Shall I look for another?",
            "Error: slot DR-SLOT-77 is full",
            None,
        ),
        # the reply speaks of something else than the error's subject
        ("Let me look at your other appointments first.", None, None),
        # the instructions give no current date
        ("It seems slot DR-SLOT-77 is no longer available.", None, "Be kind."),
        # the call succeeded: its result's date is no error
        (
            "Slot DR-SLOT-77 on March 7 is booked.",
            '{"appointment_id": "APT-2210", "slot": "DR-SLOT-77", "date": "2025-03-07"}',
            None,
        ),
    ],
)
def test_near_misses_are_silent(said: str, error: str | None, system: str | None) -> None:
    run = _clinic(
        said, error or "Error: slot DR-SLOT-77 not available on 2025-03-07", system or TODAY
    )
    assert _fm33([run]) == []


def test_the_rule_can_be_turned_off_and_its_pattern_is_checked():
    config = Config()
    config.detectors.incorrect_verification.past_error_excuse_pattern = ""
    assert _fm33([_clinic("Slot DR-SLOT-77 is not available.")], config) == []
    with pytest.raises(ValueError, match="past_error_excuse_pattern"):
        IncorrectVerificationConfig(past_error_excuse_pattern="(").validate()


def test_real_runs():
    # Runs 13, 63 and 163 try to keep HAT030 on 2024-05-13 in an update (the current time is
    # 2024-05-15) and tell the user the flight is not available, offering alternatives on that
    # date; run 133 does the same with HAT271 on 2024-05-10. All labelled FM-3.3.
    for index, date in ((13, "2024-05-13"), (63, "2024-05-13"), (133, "2024-05-10")):
        found = [f for f in tau_findings(index, "FM-3.3") if f.rule == "past_error_misread"]
        assert [f.evidence["error_date"] for f in found] == [date]
    # Run 75's errors name no past date: silent.
    assert [f for f in tau_findings(75, "FM-3.3") if f.rule == "past_error_misread"] == []
