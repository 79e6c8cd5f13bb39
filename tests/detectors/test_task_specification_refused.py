"""FM-1.1's `change_after_own_refusal`: the agent tells the user a resource does not allow an
action, then makes that change to it."""

from __future__ import annotations

from mast_otel.processors.model import Step
from tests.detectors.real_runs import tau_findings
from tests.steps import RunBuilder, analyse, rules

REFUSED = (
    "Here is where things stand:\n\n"
    "1. **payments-db** is under the production change freeze. It cannot be updated before "
    "the freeze ends on Friday.\n"
    "2. **search-api** can be updated now."
)


def _freeze(said: str, tool: str, service: str) -> list[Step]:
    run = RunBuilder(agent="sre")
    ask = "Roll the new config out to payments-db and search-api."
    run.llm(input_text=ask, calls=("get_change_freeze",))
    run.tool("get_change_freeze", {"env": "prod"}, '{"frozen": ["payments-db"]}')
    run.llm(input_text=ask, output=said)
    run.llm(input_text="Please just do it.", calls=(tool,))
    run.tool(tool, {"service": service, "config": "v42"}, '{"status": "done"}')
    return run.steps


def test_fm11_updating_the_service_the_agent_said_cannot_be_updated():
    found = [
        f
        for f in analyse(_freeze(REFUSED, "update_service", "payments-db"))[0]
        if f.rule == "change_after_own_refusal"
    ]
    assert len(found) == 1
    assert "update_service" in found[0].message and "payments-db" in found[0].message
    assert "cannot be updated before the freeze" in found[0].message


def test_fm11_another_resource_or_another_action_than_the_refused_one_is_silent():
    # the list item that names search-api refuses nothing
    other = _freeze(REFUSED, "update_service", "search-api")
    assert ("FM-1.1", "change_after_own_refusal") not in rules(other)
    # payments-db was refused an update; restarting it is another action
    restart = _freeze(REFUSED, "restart_service", "payments-db")
    assert ("FM-1.1", "change_after_own_refusal") not in rules(restart)


def test_fm11_real_run_cancels_the_reservation_it_said_cannot_be_cancelled():
    # run 84: at 10 "Reservation XEHM4B cannot be canceled as it is a Basic Economy ticket
    # without travel insurance"; at 20 cancel_reservation XEHM4B
    found = [f for f in tau_findings(84, "FM-1.1") if f.rule == "change_after_own_refusal"]
    assert len(found) == 1
    assert "XEHM4B" in found[0].message and "cannot be canceled" in found[0].message
