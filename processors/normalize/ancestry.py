"""Which agent took a step, when only an ancestor span names it.

OpenInference (and hand-written agents on GenAI conventions) name the agent on the agent span
only: its model and tool spans carry no agent. A step's agent is then that of its nearest
ancestor that names one. A root span that names no agent (`sre_agent.run`, a graph's root)
stands for the run itself: its agent is its service, or its own name. A span that hands work
to another agent (a step naming a `target_agent`: a CrewAI delegation, whose coworker works
under the tool call) names that agent to the steps under it, not to itself.

Spans are exported when they end, so children arrive before their parents: `missing_parent`
tells the caller a step's agent may still be named by a span yet to come. A step released
before the span naming its agent arrived has no agent; that span is then marked late, and the
steps under it released after it arrived have none either: the detectors, which keep their
state per agent, read one agent however late its span came (a run's `invoke_agent` root is
exported when the run ends).
"""

from __future__ import annotations

from mast_otel.processors.model import Step

# Dialects that name the agent on agent spans only, never on their model and tool spans: their
# steps are worth waiting for an ancestor (other dialects' steps usually name their agent, and
# are resolved from whatever ancestors have arrived when they are released).
AGENT_ON_ANCESTORS_ONLY = frozenset({"openinference"})

# Parent links followed at most, against cycles and runaway depth.
MAX_DEPTH = 64


def root_agent(step: Step) -> str:
    """The agent a root span with no agent name stands for."""
    return step.service or step.name


class Ancestry:
    """The parent and the agent of every span of one trace seen so far."""

    __slots__ = ("agents", "late", "parents", "receivers")

    def __init__(self) -> None:
        self.parents: dict[str, str] = {}
        self.agents: dict[str, str] = {}
        # Spans handing work to another agent → that agent, for the steps under them.
        self.receivers: dict[str, str] = {}
        # Spans some step under them was released before: they name no agent to their steps.
        self.late: set[str] = set()

    def add(self, step: Step) -> None:
        self.parents[step.span_id] = step.parent_span_id
        if step.target_agent:
            self.receivers[step.span_id] = step.target_agent
        if step.agent:
            self.agents[step.span_id] = step.agent
        elif not step.parent_span_id:
            self.agents[step.span_id] = root_agent(step)

    def resolve(self, step: Step) -> str:
        """The step's agent: its own, else its nearest ancestor's ("" if none is known)."""
        if step.agent:
            return step.agent
        span = step.span_id
        late, receivers = self.late, self.receivers
        for _ in range(MAX_DEPTH):
            if span in late:
                return ""
            agent = (span != step.span_id and receivers.get(span)) or self.agents.get(span)
            if agent:
                return agent
            parent = self.parents.get(span)
            if not parent:
                return ""
            span = parent
        return ""

    def worth_waiting(self, step: Step) -> bool:
        """Whether the step has no agent, comes from a dialect that names agents on ancestor
        spans only, and its chain of ancestors reaches a span not seen yet."""
        return (
            not step.agent and step.dialect in AGENT_ON_ANCESTORS_ONLY and self.missing_parent(step)
        )

    def missing_parent(self, step: Step) -> bool:
        """Whether the step's chain of ancestors reaches a span not seen yet."""
        span = step.span_id
        for _ in range(MAX_DEPTH):
            if span in self.agents or (span != step.span_id and span in self.receivers):
                return False
            parent = self.parents.get(span)
            if parent is None:
                return True
            if not parent:
                return False
            span = parent
        return False

    def fill(self, step: Step) -> None:
        """Give the step its agent, from its ancestors, if it names none (as it is released:
        an ancestor not arrived yet is marked late)."""
        if step.agent:
            return
        step.agent = self.resolve(step)
        if step.agent:
            self.agents.setdefault(step.span_id, step.agent)
            return
        span = step.span_id
        for _ in range(MAX_DEPTH):
            parent = self.parents.get(span)
            if not parent:
                return
            if parent not in self.parents:
                self.late.add(parent)
                return
            span = parent
