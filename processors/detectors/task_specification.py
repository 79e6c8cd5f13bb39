"""FM-1.1 Disobey task specification: the run does what its task forbids.

Rules, against the task's policy (the run's `mast.task.*` attributes, else the configured
defaults):
- `tool_not_allowed`: a tool call outside `mast.task.allowed_tools`;
- `mutation_in_read_only_task`: a mutating call (see `classification`) in a read-only task;
- `step_budget` / `time_budget` / `token_budget`: the run passes its budget of steps (model
  calls plus tool calls), seconds or tokens; reported once, at the step that crosses it.

Policy attributes usually sit on the root span, which arrives last; calls are therefore
checked as they come against what is known, and again at close against the whole policy, so
a violation is reported whichever arrived first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from processors import conventions
from processors.classify import ActionKind
from processors.detectors.base import Detector, DetectorFactory, short
from processors.detectors.policy import KeptCalls
from processors.model import Finding, Step, StepKind, StepRef
from processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_MUTATING = ActionKind.MUTATING
_TOOL = StepKind.TOOL


@dataclass(slots=True)
class Policy:
    allowed_tools: frozenset[str] | None
    read_only: bool
    max_steps: int
    max_seconds: float
    max_tokens: int


def task_policy(config: TaskSpecificationConfig, attributes: dict[str, Any]) -> Policy:
    """The run's policy: its own `mast.task.*` attributes over the configured defaults."""
    allowed: Any = attributes.get(conventions.TASK_ALLOWED_TOOLS, config.allowed_tools)
    if isinstance(allowed, str):
        allowed = [t.strip() for t in allowed.split(",")]
    tools = frozenset(str(t) for t in allowed if str(t)) if isinstance(allowed, list) else None
    read_only = attributes.get(conventions.TASK_READ_ONLY, config.read_only)
    max_steps = attributes.get(conventions.TASK_MAX_STEPS, config.max_steps)
    return Policy(
        allowed_tools=tools or None,
        read_only=read_only is True or str(read_only).lower() == "true",
        max_steps=max_steps if isinstance(max_steps, int) and max_steps > 0 else 0,
        max_seconds=config.max_seconds,
        max_tokens=config.max_tokens,
    )


@dataclass
class TaskSpecificationConfig:
    """FM-1.1 disobey task specification: tools outside the task's list, changes in a read-only
    task, budgets overrun."""

    # Run this detector.
    enabled: bool = True
    # Defaults for every run; a run's own `mast.task.*` attributes take precedence.
    allowed_tools: list[str] = field(default_factory=list)
    # Every run is read-only unless it says otherwise (`mast.task.read_only`).
    read_only: bool = False
    # Budgets; 0 means none. Steps are model calls plus tool calls.
    max_steps: int = 0
    # Wall-clock budget of a run in seconds; 0 means none.
    max_seconds: float = 0.0
    # Token budget of a run (input plus output); 0 means none.
    max_tokens: int = 0
    # Findings reported per run; the rest are not reported.
    max_findings_per_run: int = 5

    def validate(self) -> None:
        """Every value of this section is valid."""


class TaskSpecification(Detector):
    mode = "FM-1.1"
    name = "task_specification"
    version = "1.0"
    config: TaskSpecificationConfig

    def open(self, run: Run) -> DetectorRun:
        return _TaskSpecificationRun(self)


class _TaskSpecificationRun(DetectorRun):
    __slots__ = (
        "budgets_reported",
        "config",
        "detector",
        "findings",
        "kept",
        "policy",
        "policy_version",
        "reported",
        "steps",
        "tokens",
    )
    kinds = frozenset({StepKind.LLM, StepKind.TOOL})

    def __init__(self, detector: TaskSpecification) -> None:
        self.detector = detector
        self.config = detector.config
        self.reported: set[tuple[str, str]] = set()  # (rule, span id)
        # The calls kept for the check at close: those of each tool and the changes it can
        # still report.
        self.kept = KeptCalls(
            self.config.max_findings_per_run,
            self.reported,
            "tool_not_allowed",
            "mutation_in_read_only_task",
        )
        self.budgets_reported: set[str] = set()
        self.steps = 0
        self.tokens = 0
        self.findings = 0
        # The policy read from the run's attributes, kept until they change.
        self.policy: Policy | None = None
        self.policy_version = -1

    def _policy(self, run: Run) -> Policy:
        if self.policy is None or self.policy_version != run.attributes_version:
            self.policy = task_policy(self.config, run.attributes)
            self.policy_version = run.attributes_version
        return self.policy

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        policy = self._policy(run)
        findings: list[Finding] = []
        self.steps += 1
        self.tokens += (step.input_tokens or 0) + (step.output_tokens or 0)
        if policy.max_steps or policy.max_tokens or policy.max_seconds:
            findings.extend(self._budgets(step, run, policy))
        if step.kind is _TOOL and step.tool_name:
            action = self.detector.classifier.classify(step.tool_name, step.tool_arguments)
            mutating = action.kind is _MUTATING
            if policy.allowed_tools is not None or (policy.read_only and mutating):
                findings.extend(self._check_call(step, mutating, step.tool_arguments, run, policy))
            self.kept.keep(step, mutating, run, step.tool_name, None)
        return findings

    def on_close(self, run: Run) -> Iterable[Finding]:
        policy = task_policy(self.config, run.attributes)
        findings: list[Finding] = []
        for call in self.kept.calls:
            findings.extend(self._check_call(call.ref, call.mutating, call.arguments, run, policy))
        if (
            policy.max_steps
            and self.steps > policy.max_steps
            and "step_budget" not in self.budgets_reported
        ):
            last = run.window[-1] if run.window else None
            if last is not None:
                findings.extend(
                    self._budget_finding(last, run, "step_budget", self.steps, policy.max_steps)
                )
        return findings

    def _check_call(
        self, step: Step | StepRef, mutating: bool, arguments: str, run: Run, policy: Policy
    ) -> list[Finding]:
        out = []
        if policy.allowed_tools is not None and step.tool_name not in policy.allowed_tools:
            out.extend(
                self._once(
                    step,
                    "tool_not_allowed",
                    0.9,
                    f"{step.tool_name} is not among the task's allowed tools",
                    {"tool": step.tool_name, "allowed_tools": sorted(policy.allowed_tools)},
                    run,
                )
            )
        if policy.read_only and mutating:
            out.extend(
                self._once(
                    step,
                    "mutation_in_read_only_task",
                    0.9,
                    f"{step.tool_name} changed the system in a read-only task",
                    {"tool": step.tool_name, "arguments": short(arguments)},
                    run,
                )
            )
        return out

    def _budgets(self, step: Step, run: Run, policy: Policy) -> list[Finding]:
        out = []
        if policy.max_steps and self.steps > policy.max_steps:
            out.extend(self._budget_finding(step, run, "step_budget", self.steps, policy.max_steps))
        if policy.max_tokens and self.tokens > policy.max_tokens:
            out.extend(
                self._budget_finding(step, run, "token_budget", self.tokens, policy.max_tokens)
            )
        if policy.max_seconds and run.start_ns:
            elapsed = (step.end_ns - run.start_ns) / 1e9
            if elapsed > policy.max_seconds:
                out.extend(
                    self._budget_finding(
                        step, run, "time_budget", round(elapsed, 3), policy.max_seconds
                    )
                )
        return out

    def _budget_finding(
        self, step: Step, run: Run, rule: str, used: float, budget: float
    ) -> list[Finding]:
        if rule in self.budgets_reported:
            return []
        self.budgets_reported.add(rule)
        what = rule.split("_")[0]
        return self._once(
            step,
            rule,
            0.95,
            f"the run passed its {what} budget ({used} > {budget})",
            {"used": used, "budget": budget},
            run,
        )

    def _once(
        self,
        step: Step | StepRef,
        rule: str,
        confidence: float,
        message: str,
        values: dict[str, Any],
        run: Run,
    ) -> list[Finding]:
        key = (rule, step.span_id)
        if key in self.reported or self.findings >= self.config.max_findings_per_run:
            return []
        self.reported.add(key)
        self.findings += 1
        return [self.detector.finding(step, rule, confidence, message, [step], values, run)]


FACTORY = DetectorFactory(
    type="task_specification",
    mode="FM-1.1",
    config=TaskSpecificationConfig,
    create=TaskSpecification,
)
