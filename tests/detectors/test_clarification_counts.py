"""FM-2.2 `unmentioned_count`: a count the agent only stated itself. The user never spoke of
the subject and the agent never asked; its own statements (an allowance, a summary) put
nothing to the user. Where it fires, and its near misses, which must stay silent."""

from __future__ import annotations

from mast_otel.processors.model import Step
from tests.detectors.real_runs import tau_findings
from tests.steps import RunBuilder, analyse, rules


def _desk(agent_says: str, user_says: str, seats: int = 2) -> list[Step]:
    """A ticket desk: the user wants a concert booked, the agent says something about seats,
    the user answers, and the agent books."""
    run = RunBuilder(agent="tickets")
    turn = "Book me the Friday show of Tosca, please."
    run.human(turn)
    run.llm(input_text=turn, output=agent_says)
    run.human(user_says)
    run.llm(input_text=user_says, calls=("book_tickets",))
    run.tool("book_tickets", {"show": "tosca-fri", "seats": seats}, '{"booking": "TK-301"}')
    return run.steps


def test_fm22_a_count_only_the_agent_stated_was_assumed():
    steps = _desk(
        "Friday's Tosca: stalls row F. Your membership includes 2 seats at the member rate. "
        "Please confirm and I will book it.",
        "Go ahead.",
    )
    found = [f for f in analyse(steps)[0] if f.mode == "FM-2.2"]
    assert [f.rule for f in found] == ["unmentioned_count"]
    assert "seats=2" in found[0].message
    assert "only the agent's own statements did" in found[0].message


def test_fm22_a_count_the_agent_asked_about_or_the_user_gave_is_silent():
    # The agent asked how many seats; the user's "Two" answers it without the word.
    asked = _desk("Friday's Tosca has stalls left. How many seats do you need?", "Two, please.")
    # The user spoke of seats.
    told = _desk("Friday's Tosca: stalls row F. Please confirm.", "Yes, two seats please.")
    # A question in the message puts what it names to the user.
    offer = _desk(
        "Your membership includes 2 seats at the member rate. Shall I book row F?", "Yes."
    )
    for steps in (asked, told, offer):
        assert rules(steps, mode="FM-2.2") == []


def test_fm22_real_run_books_the_bag_allowance_it_stated():
    # Run 61: the agent's summary states "Checked Bag Allowance: 2 free checked bags" (10),
    # the user never speaks of bags, and book_reservation sets total_baggages=2 (labelled
    # FM-2.2 at 26).
    found = [f for f in tau_findings(61, "FM-2.2") if f.rule == "unmentioned_count"]
    assert len(found) == 1 and "total_baggages=2" in found[0].message
    assert "only the agent's own statements did" in found[0].message
    # Run 132: the agent asks "Would you like to add any additional checked bags" and the user
    # answers about bags: the count was spoken of.
    assert [f for f in tau_findings(132, "FM-2.2") if f.rule == "unmentioned_count"] == []
