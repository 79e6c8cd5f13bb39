"""FM-2.5's `instruction_reissued`: in a team's run (`signals.is_team`), an agent gives the
same instruction again and again (the same words, naming a teammate: an instruction is
addressed; `reissued_instruction_count` times) while no other agent makes a single tool call:
the teammates it instructs answer it without acting on it. Reported once per instruction, at
the message that repeats it the last time counted."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.signals import is_team
from mast_otel.processors.model import Step, StepKind, StepRef
from mast_otel.processors.run import Run

_LLM = StepKind.LLM
_TOOL = StepKind.TOOL
# Shorter messages ("OK.", "Continue.") are no instruction.
_MIN_WORDS = 4


@dataclass(slots=True)
class _Instruction:
    """An agent's instruction while it keeps being given: where, how often, who answered."""

    words: str
    text: str
    given: list[StepRef] = field(default_factory=list)
    answered_by: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Reissued:
    """An instruction given `len(given)` times with no teammate acting on it."""

    agent: str
    text: str
    given: list[StepRef]
    answered_by: list[str]


class ReissuedInstructions:
    """Per run: each agent's instruction being repeated, until someone else calls a tool."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.current: dict[str, _Instruction] = {}
        self.reported: set[str] = set()

    def step(self, step: Step, run: Run) -> Reissued | None:
        if self.count < 2:
            return None
        if step.kind is _TOOL:
            # Someone acted: every other agent's instruction was carried out, or tried.
            for agent in [a for a in self.current if a != step.agent]:
                del self.current[agent]
            return None
        if step.kind is not _LLM or step.tool_calls or not step.agent:
            return None
        for agent, given in self.current.items():
            if agent != step.agent and step.agent not in given.answered_by:
                given.answered_by.append(step.agent)
        words = " ".join(re.findall(r"\w+", step.output_text.lower()))
        if len(words.split()) < _MIN_WORDS:
            return None
        instruction = self.current.get(step.agent)
        if instruction is None or instruction.words != words:
            self.current[step.agent] = _Instruction(words, step.output_text, [run.ref(step)])
            return None
        instruction.given.append(run.ref(step))
        key = f"{step.agent}\x1f{words}"
        if len(instruction.given) < self.count or key in self.reported or not is_team(run):
            return None
        if not _addressed(instruction.text, step.agent, run):
            return None
        self.reported.add(key)
        return Reissued(
            step.agent, short(instruction.text, 120), instruction.given, instruction.answered_by
        )


def _addressed(text: str, agent: str, run: Run) -> bool:
    """The text names another agent of the run: it is addressed to a teammate."""
    lowered = text.lower()
    root = run.root.agent if run.root is not None else ""
    return any(
        other not in (agent, root) and len(other) > 2 and other.lower() in lowered
        for other in run.speakers | set(run.agents)
    )
