"""FM-1.2 Disobey role specification: an agent acts outside its role.

Rules:
- `tool_outside_role`: an agent calls a tool its role does not list (`mast.agent.allowed_tools`
  on the agent's span, else `agent_tools` in the configuration);
- `read_only_role_mutates`: an agent whose role is to investigate (`mast.agent.read_only` on
  its span, or its name matching `read_only_agents`) performs a mutating call.

An agent's span ends after its calls, so calls are checked again when the run closes against
every role attribute seen by then.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from mast_otel.processors import conventions
from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory, short
from mast_otel.processors.detectors.policy import KeptCalls
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_MUTATING = ActionKind.MUTATING
_AGENT = StepKind.AGENT
_TOOL = StepKind.TOOL

_MAX_TRACKED_CALLS = 4096


@dataclass
class RoleSpecificationConfig:
    """FM-1.2 disobey role specification: an agent uses a tool outside its role, or a read-only
    role changes something."""

    # Run this detector.
    enabled: bool = True
    # Agent name → the tools its role may use (a `mast.agent.allowed_tools` attribute on the
    # agent's span takes precedence).
    agent_tools: dict[str, list[str]] = field(default_factory=dict)
    # Agents whose role is to investigate, not to change anything (regular expressions on the
    # agent name; `mast.agent.read_only` on the agent's span also says so).
    read_only_agents: list[str] = field(default_factory=list)
    # Findings reported per run; the rest are not reported.
    max_findings_per_run: int = 5

    def validate(self) -> None:
        for pattern in self.read_only_agents:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(
                    f"detectors.role_specification.read_only_agents: {pattern!r} is not a "
                    f"valid regular expression ({exc})"
                ) from exc


class RoleSpecification(Detector):
    mode = "FM-1.2"
    name = "role_specification"
    version = "1.0"
    config: RoleSpecificationConfig
    read_only_names: list[re.Pattern[str]]

    def __init__(self, config: Any, context: DetectorContext) -> None:
        super().__init__(config, context)
        self.read_only_names = [re.compile(p, re.IGNORECASE) for p in self.config.read_only_agents]

    def open(self, run: Run) -> DetectorRun:
        return _RoleRun(self)


def _tool_list(value: Any) -> frozenset[str] | None:
    if isinstance(value, str):
        value = [t.strip() for t in value.split(",")]
    if isinstance(value, list):
        tools = frozenset(str(t) for t in value if str(t))
        return tools or None
    return None


class _RoleRun(DetectorRun):
    __slots__ = (
        "config",
        "detector",
        "kept",
        "read_only",
        "reported",
        "role_tools",
    )

    def __init__(self, detector: RoleSpecification) -> None:
        self.detector = detector
        self.config = detector.config
        self.role_tools: dict[str, frozenset[str]] = {}
        self.read_only: set[str] = set()
        self.reported: set[tuple[str, str]] = set()
        # The calls kept for the check at close: those of each (agent, tool) and the changes
        # of each agent it can still report.
        self.kept = KeptCalls(
            self.config.max_findings_per_run,
            self.reported,
            "tool_outside_role",
            "read_only_role_mutates",
        )

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        if step.agent and step.run_attributes:
            tools = _tool_list(step.run_attributes.get(conventions.AGENT_ALLOWED_TOOLS))
            # The agent's own span says it best; any other span's word is taken until then.
            if tools is not None and (step.kind is _AGENT or step.agent not in self.role_tools):
                self.role_tools[step.agent] = tools
            if step.run_attributes.get(conventions.AGENT_READ_ONLY) is True:
                self.read_only.add(step.agent)
        if step.kind is not _TOOL or not step.tool_name or not step.agent:
            return ()
        mutating = (
            self.detector.classifier.classify(step.tool_name, step.tool_arguments).kind is _MUTATING
        )
        findings = self._check(step, mutating, step.tool_arguments, run)
        self.kept.keep(step, mutating, run, (step.agent, step.tool_name), step.agent)
        return findings

    def on_close(self, run: Run) -> Iterable[Finding]:
        findings: list[Finding] = []
        for call in self.kept.calls:
            findings.extend(self._check(call.ref, call.mutating, call.arguments, run))
        return findings

    def _allowed(self, agent: str) -> frozenset[str] | None:
        if agent in self.role_tools:
            return self.role_tools[agent]
        configured = self.config.agent_tools.get(agent)
        return frozenset(configured) if configured else None

    def _is_read_only(self, agent: str) -> bool:
        return agent in self.read_only or any(
            p.search(agent) for p in self.detector.read_only_names
        )

    def _check(
        self, step: Step | StepRef, mutating: bool, arguments: str, run: Run
    ) -> list[Finding]:
        out = []
        allowed = self._allowed(step.agent)
        if allowed is not None and step.tool_name not in allowed:
            out.extend(
                self._once(
                    step,
                    "tool_outside_role",
                    f"{step.agent} called {step.tool_name}, which its role does not include",
                    {"agent": step.agent, "tool": step.tool_name, "role_tools": sorted(allowed)},
                    run,
                )
            )
        if mutating and self._is_read_only(step.agent):
            out.extend(
                self._once(
                    step,
                    "read_only_role_mutates",
                    f"{step.agent}, a read-only role, changed the system with {step.tool_name}",
                    {
                        "agent": step.agent,
                        "tool": step.tool_name,
                        "arguments": short(arguments),
                    },
                    run,
                )
            )
        return out

    def _once(
        self, step: Step | StepRef, rule: str, message: str, values: dict[str, Any], run: Run
    ) -> list[Finding]:
        key = (rule, step.span_id)
        if key in self.reported or len(self.reported) >= self.config.max_findings_per_run:
            return []
        self.reported.add(key)
        return [self.detector.finding(step, rule, 0.9, message, [step], values, run)]


FACTORY = DetectorFactory(
    type="role_specification",
    mode="FM-1.2",
    config=RoleSpecificationConfig,
    create=RoleSpecification,
)
