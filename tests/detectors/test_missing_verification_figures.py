"""FM-3.2 `unchecked_figure`: a change carried a figure the user gave, which no calculation of
the run produced, and the system rejected it with its own.

An online shop (another domain) where it fires, its near misses, and a real tau-bench run."""

from __future__ import annotations

from typing import Any

from mast_otel.collector.config import Config
from tests.detectors.real_runs import tau_findings
from tests.detectors.test_incorrect_verification_figures import _shop
from tests.imported import findings_of

REJECTED = "Error: amount does not match, order total is 135, but charged 120"
USERS = "Order 3 desk lamps (SKU LMP-40) and charge me $120."


def _found(run: list[Any], config: Config | None = None) -> list[tuple[str, str]]:
    return [
        (f.mode, f.rule)
        for f in findings_of([run], config)
        if f.rule in ("unchecked_figure", "rejected_figure")
    ]


def test_an_order_charged_at_the_users_figure_and_rejected():
    run = _shop(REJECTED, said="Placing the order now.", ask=USERS, compute=False)
    found = [f for f in findings_of([run]) if f.rule == "unchecked_figure"]
    assert [(f.mode, f.evidence["user_figure"], f.evidence["system_figure"]) for f in found] == [
        ("FM-3.2", 120, 135)
    ]
    assert "create_order" in found[0].message


def test_a_figure_the_agent_computed_or_a_rejection_without_figures_is_not_unchecked():
    # computed by the run (3 * 40 = 120): the check was made and went wrong, FM-3.3's business
    assert _found(_shop(REJECTED, said="Placing the order now.", ask=USERS)) == [
        ("FM-3.3", "rejected_figure")
    ]
    # no figures in the error, or an accepted order
    no_figures = _shop("Error: card declined", said="Placing the order now.", ask=USERS)
    assert _found(no_figures) == []
    accepted = _shop('{"order_id": "ORD-1", "amount": 120}', said="Placing it.", ask=USERS)
    assert _found(accepted) == []


def test_the_rule_can_be_turned_off():
    run = _shop(REJECTED, said="Placing the order now.", ask=USERS, compute=False)
    config = Config()
    config.detectors.missing_verification.check_user_figures = False
    assert _found(run, config) == []


def test_real_run():
    # Run 75 books two passengers paying the $304 the user quoted for one; the booking is
    # rejected: "total price is 608, but paid 304" (labelled FM-3.2).
    found = [f for f in tau_findings(75, "FM-3.2") if f.rule == "unchecked_figure"]
    assert [(f.evidence["user_figure"], f.evidence["system_figure"]) for f in found] == [(304, 608)]
    # Run 0 computed its own (wrong) figure: no unchecked_figure there.
    assert [f for f in tau_findings(0, "FM-3.2") if f.rule == "unchecked_figure"] == []
