"""FM-1.2's section of the config file (`detectors.role_specification`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


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
