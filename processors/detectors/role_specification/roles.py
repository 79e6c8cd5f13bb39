"""FM-1.2's two rules, on the roles a run's spans declared (or the configuration gives): which
tools each agent's role may use, and which agents' roles only investigate. Each finding is
made once per (rule, call), and at most `max_findings_per_run` per run.

`tool_outside_role`
- Fires: `agent_tools` gives triage the tools kubectl and get_alerts; triage calls
  get_alerts, then run_shell: run_shell is outside its role, reported at that call. The same
  when the agent's own span says `mast.agent.allowed_tools: "kubectl_get,get_logs"`, even if
  the span ends (and so arrives) after the calls: they are checked again at close.
- Near miss: fixer, with no tools listed for it anywhere, calls kubectl: a role that lists no
  tools restricts none.

`read_only_role_mutates`
- Fires: `read_only_agents: ["^triage$"]`, and triage runs `kubectl set resources ...` (a
  mutating call): reported with the call's arguments.
- Near miss: fixer makes the same change: its name does not match a read-only pattern and no
  span of its says `mast.agent.read_only`. A read by triage is no change.
"""

from __future__ import annotations

from typing import Any

from mast_otel.processors import conventions
from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.role_specification.context import RoleSpecificationContext
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_AGENT = StepKind.AGENT


def _tool_list(value: Any) -> frozenset[str] | None:
    if isinstance(value, str):
        value = [t.strip() for t in value.split(",")]
    if isinstance(value, list):
        tools = frozenset(str(t) for t in value if str(t))
        return tools or None
    return None


class Roles:
    """Per run: the roles declared so far, and the findings made."""

    __slots__ = ("config", "context", "read_only", "reported", "role_tools")

    def __init__(self, context: RoleSpecificationContext) -> None:
        self.context = context
        self.config = context.config
        self.role_tools: dict[str, frozenset[str]] = {}
        self.read_only: set[str] = set()
        # The (rule, span id) of the findings made.
        self.reported: set[tuple[str, str]] = set()

    def learn(self, step: Step) -> None:
        """Read the role attributes of a step of an agent that carries some."""
        tools = _tool_list(step.run_attributes.get(conventions.AGENT_ALLOWED_TOOLS))
        # The agent's own span says it best; any other span's word is taken until then.
        if tools is not None and (step.kind is _AGENT or step.agent not in self.role_tools):
            self.role_tools[step.agent] = tools
        if step.run_attributes.get(conventions.AGENT_READ_ONLY) is True:
            self.read_only.add(step.agent)

    def _allowed(self, agent: str) -> frozenset[str] | None:
        if agent in self.role_tools:
            return self.role_tools[agent]
        configured = self.config.agent_tools.get(agent)
        return frozenset(configured) if configured else None

    def _is_read_only(self, agent: str) -> bool:
        return agent in self.read_only or any(p.search(agent) for p in self.context.read_only_names)

    def check(
        self, step: Step | StepRef, mutating: bool, arguments: str, run: Run
    ) -> list[Finding]:
        """The findings on a tool call of an agent, by the roles known now."""
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
        return [self.context.report.finding(step, rule, 0.9, message, [step], values, run)]
