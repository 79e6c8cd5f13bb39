"""Teammates' turns in a group chat, recognised in each member's model-call inputs.

A group chat (AG2's) hands every member the others' turns as the user's messages, and its
tracing drops their authors' names: a member's model call shows the user's task, its own
answers, and then, as user messages, what its teammates said and what the executor replied.
A transcript of the same chat read by the team importer names each turn's agent. So that both
read alike, the turns of a run are remembered by their text as they are released (the answers
of its model calls; the replies its agent spans show: an executor's output, a reply no model
wrote), and a user message whose text is another agent's turn is that agent's:
- conversation recovery makes no user's turn of it, and a model call's input text is the
  user's last turn that is no teammate's;
- it makes its author one of the run's speakers, as a named turn would, unless it is an
  executor's output for code it ran (a tool's result, named for no one).

Bounds: `MAX_TURNS` turns a run; a turn is known by the start of its text (`KEY_CHARS`).
"""

from __future__ import annotations

from mast_otel.processors.model import InputMessage, Step
from mast_otel.processors.normalize import history, values

MAX_TURNS = 4096
# How much of a message identifies it when it is found again in a later input.
KEY_CHARS = 200


def words(text: str) -> str:
    """The start of a text as it identifies a message across calls (spacing and apostrophes
    as the dialects differ in them)."""
    return " ".join(values.plain_prose(text[: KEY_CHARS * 8]).split())[:KEY_CHARS]


class Turns:
    """The turns a run's agents gave, by text, and whose each was."""

    __slots__ = ("authors", "spoken")

    def __init__(self) -> None:
        # Text → (agent, whether it is an executor's output for code it ran).
        self.spoken: dict[str, tuple[str, bool]] = {}
        self.authors: set[str] = set()

    @property
    def team(self) -> bool:
        """Whether two or more agents gave turns (only then is a user message one of theirs)."""
        return len(self.authors) > 1

    def said(self, agent: str, said: str, result: bool = False) -> None:
        """A released turn of `agent`, by its `words` (`result`: an executor's output for code
        it ran)."""
        if said and agent and len(self.spoken) < MAX_TURNS:
            self.spoken.setdefault(said, (agent, result))
            if agent not in self.authors:
                self.authors.add(agent)

    def author(self, message: InputMessage, agent: str) -> tuple[str, bool] | None:
        """Who wrote a user message of `agent`'s input, if another agent did (and whether it is
        an executor's output); None for the user's own."""
        if message.role != history.USER or len(self.authors) < 2:
            return None
        found = self.spoken.get(words(message.text))
        return found if found is not None and found[0] != agent else None

    def users_turn(self, step: Step, messages: tuple[InputMessage, ...]) -> None:
        """A model call's input text is the user's last turn: where the last user message is
        another agent's turn, the last one that is not (or none)."""
        users = [m for m in messages if m.role == history.USER]
        if not users or self.author(users[-1], step.agent) is None:
            return
        said = next((m for m in reversed(users) if self.author(m, step.agent) is None), None)
        step.input_text = values.plain_prose(said.text) if said is not None else ""

    def named(self, step: Step, last: int) -> str:
        """The author of a teammate's turn among the last `last` messages of a model call's
        input, other than an executor's output ("" for none)."""
        for message in step.input_history[-last:]:
            found = self.author(message, step.agent)
            if found is not None and not found[1]:
                return found[0]
        return ""
