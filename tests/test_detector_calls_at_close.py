"""FM-1.1 and FM-1.2 check a run's calls again when it closes, against policy and role
attributes that arrived last. They keep only the calls that check can report; these tests
hold them to what checking every call in order would report."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from mast_otel.processors import conventions
from mast_otel.processors.classify import ActionClassifier, ActionKind
from mast_otel.processors.detectors.config import DetectorsConfig
from mast_otel.processors.model import Step, StepKind
from tests.steps import RunBuilder, analyse

# Read-only, mutating and other tools, interleaved unevenly.
TOOLS = ("kubectl_get", "restart_deployment", "get_logs", "scale_service", "shell")
ARGS = {"namespace": "shop"}
# max_findings_per_run: the default, and one past the calls of each tool in these runs.
LIMITS = (5, 70)


def limited(limit: int) -> DetectorsConfig:
    config = DetectorsConfig()
    config.task_specification = dataclasses.replace(
        config.task_specification, max_findings_per_run=limit
    )
    config.role_specification = dataclasses.replace(
        config.role_specification, max_findings_per_run=limit
    )
    return config


def calls(run: RunBuilder, count: int, agents: tuple[str, ...] = ("sre-agent",)) -> list[Step]:
    pattern = itertools.cycle([0, 2, 1, 0, 4, 2, 3, 0, 1, 2, 2, 4])
    agent_of = itertools.cycle(agents)
    return [run.tool(TOOLS[next(pattern)], ARGS, agent=next(agent_of)) for _ in range(count)]


def expected(
    steps: list[Step], rules: list[tuple[str, object]], limit: int
) -> list[tuple[str, str]]:
    """What checking every call in order, each rule in turn, up to the limit reports."""
    classifier = ActionClassifier()
    out: list[tuple[str, str]] = []
    for step in steps:
        mutating = classifier.classify(step.tool_name, step.tool_arguments).kind is (
            ActionKind.MUTATING
        )
        for rule, breaks in rules:
            if breaks(step, mutating) and len(out) < limit:  # type: ignore[operator]
                out.append((step.span_id, rule))
    return out


@pytest.mark.parametrize("limit", LIMITS)
def test_task_policy_arriving_last_reports_the_first_calls_that_break_it(limit: int) -> None:
    run = RunBuilder()
    steps = calls(run, 300)
    root = run.root(
        **{conventions.TASK_ALLOWED_TOOLS: "kubectl_get,get_logs", conventions.TASK_READ_ONLY: True}
    )
    findings, _ = analyse([*run.steps, root], limited(limit))
    got = [(f.span_id, f.rule) for f in findings if f.mode == "FM-1.1"]
    assert got == expected(
        steps,
        [
            ("tool_not_allowed", lambda s, m: s.tool_name not in ("kubectl_get", "get_logs")),
            ("mutation_in_read_only_task", lambda s, m: m),
        ],
        limit,
    )
    assert len(got) == limit


@pytest.mark.parametrize("limit", LIMITS)
def test_read_only_task_arriving_last_reports_the_first_changes(limit: int) -> None:
    run = RunBuilder()
    steps = calls(run, 300)
    root = run.root(**{conventions.TASK_READ_ONLY: True})
    findings, _ = analyse([*run.steps, root], limited(limit))
    got = [(f.span_id, f.rule) for f in findings if f.mode == "FM-1.1"]
    assert got == expected(steps, [("mutation_in_read_only_task", lambda s, m: m)], limit)
    assert len(got) == limit
    assert {f.evidence["tool"] for f in findings if f.mode == "FM-1.1"} == {
        "restart_deployment",
        "scale_service",
    }


@pytest.mark.parametrize("limit", LIMITS)
def test_roles_arriving_last_report_the_first_calls_outside_them(limit: int) -> None:
    run = RunBuilder()
    steps = calls(run, 300, agents=("investigator", "fixer", "investigator"))
    # Each agent's own span ends after its calls and carries its role.
    investigator = Step(
        trace_id=run.trace_id,
        span_id="b" * 16,
        parent_span_id=run.root_id,
        name="invoke_agent investigator",
        kind=StepKind.AGENT,
        start_ns=run.t,
        end_ns=run.t + 1,
        dialect="genai",
        agent="investigator",
        run_attributes={
            conventions.AGENT_ALLOWED_TOOLS: "kubectl_get,get_logs",
            conventions.AGENT_READ_ONLY: True,
        },
    )
    findings, _ = analyse([*run.steps, investigator, run.root()], limited(limit))
    got = [(f.span_id, f.rule) for f in findings if f.mode == "FM-1.2"]
    investigators = [s for s in steps if s.agent == "investigator"]
    assert got == expected(
        investigators,
        [
            ("tool_outside_role", lambda s, m: s.tool_name not in ("kubectl_get", "get_logs")),
            ("read_only_role_mutates", lambda s, m: m),
        ],
        limit,
    )
    assert len(got) == limit


@pytest.mark.parametrize("limit", LIMITS)
def test_calls_reported_as_they_came_are_not_reported_again_at_close(limit: int) -> None:
    run = RunBuilder()
    first = calls(run, 150)
    loose, strict = ("kubectl_get", "get_logs", "shell"), ("kubectl_get", "get_logs")
    # A child span states a looser tool list midway; the root, arriving last, the real one.
    midway = Step(
        trace_id=run.trace_id,
        span_id="c" * 16,
        parent_span_id=run.root_id,
        name="invoke_agent",
        kind=StepKind.AGENT,
        start_ns=run.t,
        end_ns=run.t + 1,
        dialect="genai",
        run_attributes={conventions.TASK_ALLOWED_TOOLS: ",".join(loose)},
    )
    run.t += 1_000_000_000
    second = calls(run, 150)
    root = run.root(**{conventions.TASK_ALLOWED_TOOLS: ",".join(strict)})
    findings, _ = analyse([*first, midway, *second, root], limited(limit))
    got = [f.span_id for f in findings if f.mode == "FM-1.1"]
    # As the calls came: the second half against the looser list; at close, every call not
    # yet reported against the real one, in call order; all up to the limit.
    as_they_came = [s.span_id for s in second if s.tool_name not in loose][:limit]
    at_close = [
        s.span_id
        for s in [*first, *second]
        if s.tool_name not in strict and s.span_id not in as_they_came
    ]
    assert got == (as_they_came + at_close)[:limit]
    assert any(s.tool_name == "shell" for s in first if s.span_id in got) == (limit > 40)
