"""FM-2.2's rule `unmentioned_count`: a change that sets a number nobody spoke of.

`unmentioned_count`: in a conversation (the user spoke at least `counts_min_user_turns` times;
0 turns the rule off), a change that sets a positive count (an integer argument: `seats`,
`total_baggages`, `nights`) whose subject (the argument name's words other than count words
such as `total` or `number`: `count_qualifier_words`) no user turn mentioned, nor any agent
message that asks the user something (one with a question mark), was set on an assumption: the
agent never asked how many, and the user never said. The agent's own statements ("Checked bag
allowance: 2 free bags", a summary to confirm) put nothing to the user: a number it states
there is still its own, and the message says so. The call's outcome does not matter: a change
refused for another reason carried the guess too. Words sharing `count_subject_prefix` first
letters speak of one subject ("bag", "baggage"); each (argument, value) is reported once a run,
one finding per call.

Fires: a guest says "I need a room in Lisbon from 4 June." and "A double room, please.", and
the agent calls `book_room({"city": "lisbon", "nights": 3})`. A ticket desk's agent says "Your
membership includes 2 seats at the member rate. Please confirm and I will book it.", the user
says "Go ahead.", and it books `seats: 2` (only the agent's own statement named seats).

Near miss: "I need a room in Lisbon for three nights." (the guest spoke of nights); `extra_beds:
0` (zero is no assumption); one turn of the user only (a one-shot task is no conversation); the
agent asked "How many seats do you need?" and the user answered "Two, please.".
"""

from __future__ import annotations

import json
import re

from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.clarification.context import MAX_WORDS, ClarificationContext
from mast_otel.processors.model import Finding, Step
from mast_otel.processors.run import Run

_WORD = re.compile(r"[a-z]+")


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


class UnmentionedCount:
    """The words of the conversation, to tell a count no turn spoke of."""

    __slots__ = (
        "min_turns",
        "prefix",
        "qualifiers",
        "report",
        "reported",
        "stated",
        "turns",
        "words",
    )

    def __init__(self, context: ClarificationContext) -> None:
        config = context.config
        self.report = context.report
        self.min_turns = config.counts_min_user_turns
        self.qualifiers = frozenset(q.lower() for q in config.count_qualifier_words)
        # Two words are one subject when they share this many first letters ("bag",
        # "baggage"), or are the same when shorter.
        self.prefix = config.count_subject_prefix
        self.words: set[str] = set()
        # Words only the agent's statements held: no one asked or answered about them.
        self.stated: set[str] = set()
        self.turns = 0
        # (argument, value) already reported: a retry with the same guess is the same guess.
        self.reported: set[tuple[str, int]] = set()

    def change(self, step: Step, run: Run) -> Finding | None:
        """A change (whatever its outcome) that no other rule reported: the finding when it
        sets a count nobody spoke of."""
        turns = self.min_turns
        if not turns or not (count := self.unmentioned(step.tool_arguments, turns)):
            return None
        why, (key, value, *_) = _message(step.tool_name, *count), count
        values = {"argument": key, "value": value, "action": short(step.tool_arguments)}
        return self.report.finding(step, "unmentioned_count", 0.6, why, [step], values, run)

    def user_turn(self, text: str) -> None:
        self.turns += 1
        self.spoken(text)

    def spoken(self, text: str) -> None:
        if text and len(self.words) < MAX_WORDS:
            self.words |= {_stem(w) for w in _WORD.findall(text.lower())}

    def agent_said(self, text: str) -> None:
        """The agent's words: a message that asks the user something speaks of what it names;
        a statement only tells."""
        if "?" in text:
            self.spoken(text)
        elif text and len(self.stated) < MAX_WORDS:
            self.stated |= {_stem(w) for w in _WORD.findall(text.lower())}

    def unmentioned(
        self, arguments: str, min_turns: int
    ) -> tuple[str, int, list[str], bool] | None:
        """The first (argument, value, subject words, whether only the agent's statements named
        the subject) of a positive count whose subject neither a user turn nor a question of
        the agent mentioned, once the user has spoken `min_turns` times; each (argument,
        value) once per run."""
        if self.turns < min_turns or not arguments.lstrip().startswith("{"):
            return None
        try:
            parsed = json.loads(arguments)
        except (ValueError, RecursionError):
            return None
        if not isinstance(parsed, dict):
            return None
        found: list[tuple[str, int, list[str], bool]] = []
        for key, value in list(parsed.items())[:64]:
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                continue
            subject = [_stem(w) for w in _WORD.findall(str(key).lower().replace("_", " "))]
            subject = [w for w in subject if w not in self.qualifiers]
            if (str(key), value) in self.reported:
                continue
            if subject and not any(self._mentioned(w, self.words) for w in subject):
                stated = any(self._mentioned(w, self.stated) for w in subject)
                found.append((str(key), value, subject, stated))
        # The call's other guesses are reported with its first: one finding per call.
        if len(self.reported) < 64:
            self.reported.update((key, value) for key, value, *_ in found)
        return found[0] if found else None

    def _mentioned(self, word: str, words: set[str]) -> bool:
        head = word[: self.prefix]
        return any(w == word or (len(head) == self.prefix and w.startswith(head)) for w in words)


def _message(tool: str, key: str, value: int, subject: list[str], stated: bool = False) -> str:
    """What an `unmentioned_count` finding says (`stated`: only the agent's statements named
    the subject)."""
    said = (
        f"though the user never spoke of {' '.join(subject)} (only the agent's own "
        f"statements did; it never asked)"
        if stated
        else f"though no turn of the conversation spoke of {' '.join(subject)}"
    )
    return f"{tool} set {key}={value}, {said}: the agent assumed the number instead of asking"
