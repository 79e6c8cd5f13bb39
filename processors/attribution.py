"""Attribution on a team's turns: which agent, at which step, caused a failed run.

The rules are structural, tried in order; the first that applies names the decisive step:
1. an instruction not carried out: an agent instructed (`A (-> B)`) whose turn is followed by
   the same instruction to it again (the instructing agent re-issued it): B is responsible, and
   its first turn, which every later instruction to it built on, is the decisive step;
2. the code whose failure the others built on: the first message whose code the executor ran
   and that exited non-zero, when no later message of its writer fixed it before others went on;
3. the unverified claim later steps relied on: the first message after the opening one that
   states results without running anything (no code, no instruction), by an agent other than
   the executor;
4. the first instructed agent's first turn (what every later step was built on);
5. otherwise the opening message.
No model is called.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mast_otel.processors.code_execution import CODE_BLOCK, EXIT_CODE, is_executor

HUMANS = frozenset({"human", "user", "user_proxy"})
WORD = re.compile(r"[a-z0-9]+")
SAME_INSTRUCTION = 0.6


@dataclass(frozen=True)
class Turn:
    """One message of a team: its agent, the agent it instructs ("" for none), its text; where
    the run's spans say it rather than the text, whether it asked for something to be run
    (`code`) and, for a tool's result, its exit status (`exit_code`, 0 for success)."""

    agent: str
    addressee: str
    text: str
    code: bool | None = None
    exit_code: int | None = None


@dataclass
class Attribution:
    """The decisive step (index into the turns), the responsible agent and how it was found."""

    agent: str
    step: int
    rule: str
    chain: list[int] = field(default_factory=list)


def _executor_turn(turn: Turn) -> bool:
    if turn.exit_code is not None:
        return True
    return is_executor(turn.agent, turn.text)


def _ran_code(turn: Turn) -> bool:
    return turn.code if turn.code is not None else bool(CODE_BLOCK.search(turn.text))


def _failed(turn: Turn) -> bool:
    if turn.exit_code is not None:
        return turn.exit_code != 0
    code = EXIT_CODE.search(turn.text[:200])
    return code is not None and code["code"] != "0"


def _words(text: str) -> set[str]:
    return set(WORD.findall(text.lower()))


def _similar(a: str, b: str) -> bool:
    wa, wb = _words(a), _words(b)
    return bool(wa and wb) and len(wa & wb) / len(wa | wb) >= SAME_INSTRUCTION


def attribute(turns: list[Turn]) -> Attribution:
    """The decisive step and responsible agent of a failed run (see the module's rules)."""
    actors = [
        i
        for i, t in enumerate(turns)
        if t.agent.lower() not in HUMANS and not _executor_turn(t) and t.text.strip()
    ]
    if not actors:
        return Attribution("", -1, "none")
    found = _instruction_not_carried_out(turns)
    if found is not None:
        return found
    found = _failed_code(turns)
    if found is not None:
        return found
    instructed = next((i for i, t in enumerate(turns) if t.addressee), None)
    if instructed is None:
        found = _unverified_claim(turns, actors)
        if found is not None:
            return found
    else:
        target = turns[instructed].addressee
        reply = next(
            (j for j in range(instructed + 1, len(turns)) if turns[j].agent == target), None
        )
        if reply is not None:
            return Attribution(target, reply, "first hand-off", [instructed, reply])
    first = actors[0]
    return Attribution(turns[first].agent, first, "opening message", [first])


def _instruction_not_carried_out(turns: list[Turn]) -> Attribution | None:
    for i, turn in enumerate(turns):
        if not turn.addressee:
            continue
        reply = next(
            (j for j in range(i + 1, len(turns)) if turns[j].agent == turn.addressee), None
        )
        if reply is None:
            continue
        target = turn.addressee
        for k in range(reply + 1, len(turns)):
            later = turns[k]
            if later.addressee == turn.addressee and later.agent == turn.agent:
                if _similar(later.text, turn.text):
                    # The agent's work went wrong from its first turn: every later
                    # instruction to it builds on what that turn brought back.
                    first = next(j for j in range(1, len(turns)) if turns[j].agent == target)
                    return Attribution(
                        target, first, "instruction not carried out", [first, i, reply, k]
                    )
                break
    return None


def _failed_code(turns: list[Turn]) -> Attribution | None:
    writer = None
    for i, turn in enumerate(turns):
        if _executor_turn(turn):
            if writer is not None and _failed(turn):
                return Attribution(turns[writer].agent, writer, "failed code", [writer, i])
            writer = None
        elif _ran_code(turn):
            writer = i
    return None


def _unverified_claim(turns: list[Turn], actors: list[int]) -> Attribution | None:
    for i in actors[1:]:
        turn = turns[i]
        if _ran_code(turn) or turn.addressee:
            continue
        following = turns[i + 1] if i + 1 < len(turns) else None
        if (
            following is not None
            and _executor_turn(following)
            and (following.exit_code is not None or EXIT_CODE.search(following.text[:200]))
        ):
            continue
        return Attribution(turn.agent, i, "unverified claim", [i])
    return None
