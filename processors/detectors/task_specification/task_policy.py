"""FM-1.1's rules `tool_not_allowed` and `mutation_in_read_only_task`, which share the run's
policy: what a run's own `mast.task.*` attributes (over the configured defaults) allow, and
what one call breaks in it.

`tool_not_allowed`: a tool call outside the task's allowed tools (`mast.task.allowed_tools`,
else `allowed_tools`). `mutation_in_read_only_task`: a mutating call (see `classification`) in
a read-only task (`mast.task.read_only`, else `read_only`). The policy usually sits on the root
span, which arrives last: calls are checked as they come against what is known, and the calls
kept are checked again at close against the whole policy, so a breach is reported whichever
arrived first.

Fires: `run_shell({"command": "curl checkout"})` in a run whose root says
`mast.task.allowed_tools: ["kubectl"]`. `kubectl set resources deployment/checkout
--limits=memory=256Mi -n shop` in a run whose root, arriving after it, says
`mast.task.read_only: true`: reported at close.

Near miss: a read-only task allowed `kubectl` that runs `kubectl get pods -n shop` and `kubectl
logs deployment/checkout -n shop`: every call reads, with an allowed tool.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mast_otel.processors import conventions
from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.task_specification.config import TaskSpecificationConfig


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


def breaches(
    tool: str, mutating: bool, arguments: str, policy: Policy
) -> list[tuple[str, str, dict[str, Any]]]:
    """The (rule, message, values) of what one call breaks in the run's policy: a tool outside
    its allowed tools, a change in a read-only task."""
    out: list[tuple[str, str, dict[str, Any]]] = []
    if policy.allowed_tools is not None and tool not in policy.allowed_tools:
        allowed = sorted(policy.allowed_tools)
        message = f"{tool} is not among the task's allowed tools"
        out.append(("tool_not_allowed", message, {"tool": tool, "allowed_tools": allowed}))
    if policy.read_only and mutating:
        message = f"{tool}({short(arguments, 120)}) changed the system in a read-only task"
        values = {"tool": tool, "arguments": short(arguments)}
        out.append(("mutation_in_read_only_task", message, values))
    return out
