"""FM-3.2 and FM-3.3 both follow a ledger of a run's changes and the reads after them. When
their settings make the two ledgers the same, FM-3.3 reads FM-3.2's instead of following every
step again; these tests hold the shared ledger to what two ledgers of their own report."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from mast_otel.processors.classify import ActionClassifier
from mast_otel.processors.detectors import build_detectors, detector_factory
from mast_otel.processors.detectors.config import DetectorsConfig
from mast_otel.processors.detectors.incorrect_verification.detector import IncorrectVerification
from mast_otel.processors.detectors.missing_verification.detector import MissingVerification
from mast_otel.processors.model import Finding, Step
from mast_otel.processors.run import Run
from tests.steps import RunBuilder, analyse

# The default check-tool pattern, worded differently: the same calls match, so each detector
# keeps a ledger of its own and both must report exactly what the shared ledger reports.
EQUIVALENT_PATTERN = r"(?:alert|health|status|verify|check|probe|metric|monitor)"
CHANGE = {"name": "checkout", "namespace": "shop"}
OTHER = {"name": "payments", "namespace": "billing"}


def unhealthy_after_change(run: RunBuilder) -> None:
    run.tool("restart_deployment", CHANGE)
    run.tool("kubectl_get", CHANGE, result="checkout-7d9f 0/1 CrashLoopBackOff")
    run.final("The checkout deployment is fixed and healthy now.")


def other_target_checked(run: RunBuilder) -> None:
    run.tool("restart_deployment", CHANGE)
    run.tool("kubectl_get", OTHER, result="payments-1 1/1 Running")
    run.final("Resolved: the service is running again.")


def unchecked_change(run: RunBuilder) -> None:
    run.tool("kubectl_get", CHANGE, result="checkout-7d9f 0/1 CrashLoopBackOff")
    run.tool("scale_service", CHANGE)
    run.final("I scaled it up.")


def no_change_unhealthy_read(run: RunBuilder) -> None:
    run.tool("kubectl_get", CHANGE, result="checkout-7d9f 0/1 Error")
    run.final("All pods are ready, the issue is resolved.")


def healthy_after_change(run: RunBuilder) -> None:
    run.tool("restart_deployment", CHANGE)
    run.tool("check_health", {}, result="all pods ready")
    run.final("Fixed: the checkout deployment is healthy.")


SCENARIOS: list[Callable[[RunBuilder], None]] = [
    unhealthy_after_change,
    other_target_checked,
    unchecked_change,
    no_change_unhealthy_read,
    healthy_after_change,
]


def steps_of(scenario: Callable[[RunBuilder], None]) -> list[Step]:
    run = RunBuilder()
    scenario(run)
    return [*run.steps, run.root()]


def own_ledgers() -> DetectorsConfig:
    config = DetectorsConfig()
    config.missing_verification = dataclasses.replace(
        config.missing_verification, check_tool_pattern=EQUIVALENT_PATTERN
    )
    return config


def verification(findings: list[Finding]) -> list[tuple[object, ...]]:
    return [
        (f.mode, f.rule, f.span_id, f.evidence_span_ids, sorted(f.evidence.items(), key=str))
        for f in findings
        if f.mode in ("FM-3.2", "FM-3.3")
    ]


def ledgers(config: DetectorsConfig) -> tuple[object, object]:
    detectors = build_detectors(config, ActionClassifier())
    states = detector_factory(detectors)(Run("t" * 32, 16, 0.0))
    by_type = {type(d): s for d, s in zip(detectors, states, strict=True)}
    return (
        by_type[MissingVerification].ledger,  # type: ignore[attr-defined]
        by_type[IncorrectVerification].ledger,  # type: ignore[attr-defined]
    )


def test_the_ledger_is_shared_only_when_both_would_keep_the_same() -> None:
    missing, incorrect = ledgers(DetectorsConfig())
    assert missing is incorrect
    missing, incorrect = ledgers(own_ledgers())
    assert missing is not incorrect


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_shared_ledger_reports_what_own_ledgers_report(
    scenario: Callable[[RunBuilder], None],
) -> None:
    shared, _ = analyse(steps_of(scenario))
    own, _ = analyse(steps_of(scenario), own_ledgers())
    assert verification(shared) == verification(own)


def test_the_scenarios_exercise_both_modes() -> None:
    rules = {
        (mode, rule)
        for scenario in SCENARIOS
        for mode, rule, *_ in verification(analyse(steps_of(scenario))[0])
    }
    assert ("FM-3.2", "unverified_change") in rules
    assert {rule for mode, rule in rules if mode == "FM-3.3"} >= {
        "claimed_despite_unhealthy",
        "wrong_target",
    }


def test_fm33_alone_keeps_its_own_ledger_and_reports_the_same() -> None:
    alone = DetectorsConfig()
    alone.missing_verification = dataclasses.replace(alone.missing_verification, enabled=False)
    for scenario in SCENARIOS:
        shared, _ = analyse(steps_of(scenario))
        own, _ = analyse(steps_of(scenario), alone)
        assert [f for f in verification(shared) if f[0] == "FM-3.3"] == verification(own)
