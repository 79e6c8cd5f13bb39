"""FM-2.5's `instruction_reissued`: in a team's run (`signals.is_team`), an agent gives the
same instruction again and again (the same words, naming a teammate: an instruction is
addressed; `reissued_instruction_count` times) while no other agent makes a single tool call:
the teammates it instructs answer it without acting on it. Reported once per instruction, at
the message that repeats it the last time counted.

- Fires: the planner says "Data_Expert: count the rows of data.csv with code." three times,
  and each time Data_Expert answers "Sure, I will do that." without running anything:
  "Planner_Expert gave the same instruction 3 times (...); Data_Expert answered without a
  single tool call".
- Near miss: the same instruction three times, but after each one Data_Expert writes code and
  the executor runs it (41, 42, 43 rows): a tool call in between carried the instruction out.
  Nor does a message of fewer than four words ("OK.", "Continue.") count, nor one that names
  no other agent of the run, nor any of it in a single agent's run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.ignored_input.context import IgnoredInputContext
from mast_otel.processors.detectors.signals import is_team
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
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


class ReissuedInstructions:
    """Per run: each agent's instruction being repeated, until someone else calls a tool."""

    __slots__ = ("context", "count", "current", "reported")

    def __init__(self, context: IgnoredInputContext) -> None:
        self.context = context
        self.count = context.config.reissued_instruction_count
        self.current: dict[str, _Instruction] = {}
        self.reported: set[str] = set()

    def step(self, step: Step, run: Run) -> Finding | None:
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
        return self._finding(
            step.agent,
            short(instruction.text, 120),
            instruction.given,
            instruction.answered_by,
            run,
        )

    def _finding(
        self, agent: str, text: str, given: list[StepRef], answered_by: list[str], run: Run
    ) -> Finding:
        others = ", ".join(answered_by) or "no teammate"
        return self.context.report.finding(
            at=given[-1],
            rule="instruction_reissued",
            confidence=0.7,
            message=(
                f"{agent} gave the same instruction {len(given)} times "
                f"({text!r}); {others} answered without a single tool call"
            ),
            evidence=given,
            values={
                "sender": agent,
                "receivers": list(answered_by),
                "instruction": text,
                "times": len(given),
            },
            run=run,
        )


def _addressed(text: str, agent: str, run: Run) -> bool:
    """The text names another agent of the run: it is addressed to a teammate."""
    lowered = text.lower()
    root = run.root.agent if run.root is not None else ""
    return any(
        other not in (agent, root) and len(other) > 2 and other.lower() in lowered
        for other in run.speakers | set(run.agents)
    )
