"""FM-2.6 `unsupported_value`: a total the agent worked out in its own words or scratchpad,
from supported operands, is supported; a wrong sum or an invented operand is not."""

from __future__ import annotations

from tests.detectors.real_runs import tau_findings
from tests.steps import RunBuilder, analyse

_ORDERS = [
    ("ORD-1", '{"order_id": "ORD-1", "lines": [{"sku": "A", "amount": 402}]}'),
    ("ORD-2", '{"order_id": "ORD-2", "lines": [{"sku": "B", "amount": 306}]}'),
    ("ORD-3", '{"order_id": "ORD-3", "lines": [{"sku": "C", "amount": 308}]}'),
]


def _told(working: str, total: str) -> list[str]:
    """A shop agent reads three orders, works out their total in a scratchpad (`think`), and
    tells the user `total`."""
    run = RunBuilder(agent="shop")
    for order, result in _ORDERS:
        run.llm(input_text="What do my open orders come to?", calls=("get_order",))
        run.tool("get_order", {"order_id": order}, result)
    run.llm(input_text="What do my open orders come to?", calls=("think",))
    run.tool("think", {"thought": working}, "")
    run.llm(input_text="What do my open orders come to?", output=f"Your open orders total {total}.")
    found = analyse([*run.steps, run.root()])[0]
    return [f.message for f in found if f.rule == "unsupported_value"]


def test_fm26_a_total_worked_out_from_supported_amounts_is_supported():
    assert _told("Total = $402 + $306 + $308 = $1016", "$1,016") == []


def test_fm26_a_wrong_sum_or_an_invented_operand_supports_nothing():
    wrong = _told("Total = $402 + $306 + $308 = $1116", "$1,116")
    assert len(wrong) == 1 and "$1,116" in wrong[0]
    invented = _told("Total = $402 + $306 + $308 + $55 = $1071", "$1,071")
    assert len(invented) == 1 and "$1,071" in invented[0]


def test_fm26_real_run_total_from_its_scratchpad_is_supported():
    # Run 34: its think call adds the four reservations' payments ("$402 + $306 + $308 +
    # $16005 = $17021", each read from a reservation) and it tells the user $17,021.
    assert [f for f in tau_findings(34, "FM-2.6") if f.rule == "unsupported_value"] == []


def test_derived_values_are_the_rounded_sums_and_differences() -> None:
    """The derivation in whole cents gives the same values as rounding each sum and
    difference of two values read to the cent, small and large alike."""
    import random

    from mast_otel.processors.classify import ActionClassifier
    from mast_otel.processors.detectors.base import DetectorContext, Reporter
    from mast_otel.processors.detectors.reasoning_action.amounts import Amounts
    from mast_otel.processors.detectors.reasoning_action.config import ReasoningActionConfig
    from mast_otel.processors.detectors.reasoning_action.context import reasoning_context
    from mast_otel.processors.detectors.signals import Signals, SignalsConfig

    context = reasoning_context(
        ReasoningActionConfig(),
        DetectorContext(ActionClassifier(), Signals(SignalsConfig())),
        Reporter("FM-2.6", "reasoning_action", "1.0"),
    )
    rng = random.Random(7)
    for _ in range(500):
        scale = rng.choice([10, 1_000, 1e6, 1e12, 1e15])
        found = {round(rng.uniform(0, scale), 2) for _ in range(rng.randint(1, 20))}
        amounts = Amounts(context)
        # A source, then the same grown (a model's input call by call): only the new pairs
        # are derived the second time, and the result is the same.
        part = set(sorted(found)[: len(found) // 2])
        amounts._derive(part)
        amounts._derive(found)
        values = sorted(found)
        expected = {
            round(f(a, b), 2)
            for i, a in enumerate(values)
            for b in values[i + 1 :]
            for f in (lambda x, y: x + y, lambda x, y: y - x)
        }
        assert amounts.derived == expected
