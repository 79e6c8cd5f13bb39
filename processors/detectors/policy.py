"""What the two policy detectors (FM-1.1 task, FM-1.2 role) share: the tool calls each keeps
for its check at close, when the run's final policy is known."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from mast_otel.processors.model import Step, StepRef
from mast_otel.processors.run import Run

# Tool calls checked again at close (the first ones of a run).
MAX_TRACKED_CALLS = 4096


@dataclass(slots=True)
class KeptCall:
    """A tool call kept for the check at close: its digest, whether it changed the system,
    and (only then) its arguments, the one text a finding about it quotes."""

    ref: StepRef
    mutating: bool
    arguments: str


@dataclass(slots=True)
class KeptCalls:
    """The calls kept for the check at close, in call order. Whether a call breaks the final
    policy depends only on which tool it called (by the key `tool`: the tool, or the agent and
    the tool) or on its changing the system (counted by the key `changer`: the run, or the
    agent), and at most `limit` findings are made, in call order: so the first `limit` calls
    of each tool key not yet reported, and the first `limit` changes of each changer, are all
    the check at close can report."""

    limit: int
    # The (rule, span id) of the findings already made, and the rules of the two checks.
    reported: set[tuple[str, str]]
    tool_rule: str
    change_rule: str
    calls: list[KeptCall] = field(default_factory=list)
    per_tool: dict[Hashable, int] = field(default_factory=dict)
    changes: dict[Hashable, int] = field(default_factory=dict)
    tracked: int = 0

    def keep(self, step: Step, mutating: bool, run: Run, tool: Hashable, changer: Hashable) -> None:
        """Keep this call if the check at close could still report it."""
        if self.tracked >= MAX_TRACKED_CALLS:
            return
        self.tracked += 1
        limit = self.limit
        for_tool = (self.tool_rule, step.span_id) not in self.reported and (
            self.per_tool.get(tool, 0) < limit
        )
        for_change = (
            mutating
            and self.changes.get(changer, 0) < limit
            and (self.change_rule, step.span_id) not in self.reported
        )
        if not (for_tool or for_change):
            return
        if for_tool:
            self.per_tool[tool] = self.per_tool.get(tool, 0) + 1
        if for_change:
            self.changes[changer] = self.changes.get(changer, 0) + 1
        self.calls.append(
            KeptCall(run.ref(step), mutating, step.tool_arguments if mutating else "")
        )
