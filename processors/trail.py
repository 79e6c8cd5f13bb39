"""The turns of a run as attribution reads them, kept as its steps are released, and the
attribution its signature carries.

Each released step adds to the trail: a model call is its agent's turn (what it said, whether
it asked for anything to be run), the tool steps after it one result turn (failed if any of
them failed), a hand-off span names the agent its sender's last turn instructed, a user's turn
is the human's. At close, `processors.attribution` names the decisive turn and the responsible
agent; the signature stores the decisive turn's span and its position among the run's steps,
the agent, and the chain: the earliest finding at or after the decisive step (or the run's
first), then each step the rule traced it back through, as JSON.

Bounds: the first `MAX_TURNS` turns and `MAX_FINDINGS` findings of a run are kept; a turn's
text to `TEXT_CHARS`. No model is called.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from mast_otel.processors.attribution import Turn, attribute
from mast_otel.processors.model import Finding, Step, StepKind

MAX_TURNS = 1024
MAX_FINDINGS = 64
TEXT_CHARS = 2048
RESULT_AGENT = "tool"

_LLM = StepKind.LLM
_TOOL = StepKind.TOOL
_HANDOFF = StepKind.HANDOFF
_HUMAN = StepKind.HUMAN


@dataclass(slots=True)
class _Mark:
    turn: Turn
    span_id: str
    position: int


@dataclass(slots=True, frozen=True)
class RunAttribution:
    """What the signature stores: the decisive step's span and position among the run's
    steps (-1 when none), the responsible agent, and the chain as JSON ("" when none)."""

    span_id: str = ""
    step: int = -1
    agent: str = ""
    chain: str = ""


@dataclass(slots=True)
class Trail:
    """One run's turns and findings, bounded."""

    marks: list[_Mark] = field(default_factory=list)
    findings: list[tuple[int, str, str, str, str]] = field(default_factory=list)
    position: int = -1
    result_open: bool = False

    def add(self, step: Step) -> None:
        """A released step (counted: its position is the run's step index, a root agent or
        workflow span not counted: it arrives first from a file and last from a live agent)."""
        if step.is_root and step.kind not in (_LLM, _TOOL, _HUMAN):
            return
        self.position += 1
        kind = step.kind
        if kind is _TOOL and self.marks and self.result_open:
            last = self.marks[-1]
            if step.failed and last.turn.exit_code == 0:
                last.turn = Turn(RESULT_AGENT, "", last.turn.text, exit_code=1)
            return
        if kind is _HANDOFF:
            target = step.target_agent
            if target and self.marks and self.marks[-1].turn.agent == step.agent:
                last = self.marks[-1]
                turn = last.turn
                last.turn = Turn(turn.agent, target, turn.text, turn.code, turn.exit_code)
            return
        if len(self.marks) >= MAX_TURNS:
            return
        if kind is _LLM:
            # An unnamed agent (its name came after its steps) is one agent: named at the end.
            text = step.output_text[:TEXT_CHARS]
            turn = Turn(step.agent, "", text, code=bool(step.tool_calls))
        elif kind is _TOOL:
            result = (step.tool_result or step.error or "")[:TEXT_CHARS]
            turn = Turn(RESULT_AGENT, "", result, exit_code=1 if step.failed else 0)
        elif kind is _HUMAN:
            turn = Turn("human", "", step.input_text[:TEXT_CHARS])
        else:
            return
        self.result_open = kind is _TOOL
        self.marks.append(_Mark(turn, step.span_id, self.position))

    def on_finding(self, finding: Finding) -> None:
        if len(self.findings) < MAX_FINDINGS:
            self.findings.append(
                (self.position, finding.finding_id, finding.mode, finding.rule, finding.span_id)
            )

    def attribution(self, unnamed: str = "") -> RunAttribution:
        """The decisive step, the responsible agent and the chain that led there; turns of an
        agent whose name came only after them are `unnamed`'s (the run's root agent)."""
        if not self.marks:
            return RunAttribution()
        found = attribute([mark.turn for mark in self.marks])
        if found.step < 0:
            return RunAttribution()
        decisive = self.marks[found.step]
        links: list[dict[str, object]] = []
        after = [f for f in self.findings if f[0] >= decisive.position]
        finding = after[0] if after else (self.findings[0] if self.findings else None)
        if finding is not None:
            _, finding_id, mode, rule, span_id = finding
            links.append({"finding": finding_id, "mode": mode, "rule": rule, "span_id": span_id})
        for index in sorted(set(found.chain), reverse=True):
            mark = self.marks[index]
            links.append(
                {
                    "step": mark.position,
                    "span_id": mark.span_id,
                    "agent": mark.turn.agent or unnamed,
                    "why": found.rule if index == found.step else _role(mark.turn),
                }
            )
        chain = json.dumps(links, separators=(",", ":"), ensure_ascii=False)
        agent = found.agent or unnamed
        return RunAttribution(decisive.span_id, decisive.position, agent, chain)


def _role(turn: Turn) -> str:
    if turn.exit_code is not None:
        return "failed result" if turn.exit_code else "result"
    if turn.addressee:
        return f"instruction to {turn.addressee}"
    return "turn"
