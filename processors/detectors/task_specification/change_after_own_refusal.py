"""FM-1.1's rule `change_after_own_refusal`: a change the agent itself said is not allowed.

`change_after_own_refusal`: the agent tells the user, in a paragraph that names a resource
("Reservation XEHM4B cannot be cancelled: ..."), that an action is not allowed
(`refusal_pattern`, whose words include a word of the action's family: "cancelled" of
`cancel`). A later change whose tool's verb is of that family (`cancel_reservation`) and whose
arguments name that resource does what the agent had ruled out. A paragraph is a block of text
between blank lines or a list item. Reported as the change is made, whatever the instructions
say.

Fires: the agent writes "1. **payments-db** is under the production change freeze. It cannot
be updated before the freeze ends on Friday.", the user says "Please just do it.", and it calls
`update_service({"service": "payments-db", "config": "v42"})`.

Near miss: the same words, then `update_service` on search-api (its own list item, "can be
updated now", refuses nothing); `restart_service` on payments-db (it was refused an update, and
restarting is another action).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mast_otel.processors.classify import name_words
from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.clarification_offers import string_arguments
from mast_otel.processors.detectors.task_specification.context import TaskSpecificationContext
from mast_otel.processors.detectors.task_specification.offer_before_request import sentence

_PARAGRAPH = re.compile(r"\n\s*\n|\n(?=\s*(?:\d+[.)]|[-*•])\s)")
_WORD = re.compile(r"[a-z]+")
# Refusals remembered per run, and characters kept of each paragraph (bounds on memory).
MAX_REFUSALS = 64
_MAX_PARAGRAPH = 2000


@dataclass(slots=True)
class Refusal:
    paragraph: str
    words: frozenset[str]
    said: str


def _same(word: str, verb: str) -> bool:
    """A word of the verb's family: `cancel` and `cancelled`, `modify` and `modified`."""
    short = min(len(word), len(verb), 5)
    return short >= 4 and word[:short] == verb[:short]


class RefusalWatch:
    """The agent's refusals that name something, to check each change against."""

    __slots__ = ("pattern", "refusals")

    def __init__(self, context: TaskSpecificationContext) -> None:
        self.pattern = context.refusal
        self.refusals: list[Refusal] = []

    def spoken(self, text: str) -> None:
        """The agent's words: each paragraph that holds a refusal."""
        for paragraph in _PARAGRAPH.split(text[:20_000]):
            found = self.pattern.search(paragraph)
            if found and len(self.refusals) < MAX_REFUSALS:
                words = frozenset(_WORD.findall(found.group(0).lower()))
                said = " ".join(sentence(paragraph, found).split())
                self.refusals.append(Refusal(paragraph[:_MAX_PARAGRAPH], words, said))

    def refused(self, tool_name: str, arguments: str) -> tuple[str, dict[str, Any]] | None:
        """(the message, the values) of a change the agent had said, of this resource, is not
        allowed."""
        verbs = [w for w in name_words(tool_name) if len(w) >= 4]
        if not verbs or not self.refusals:
            return None
        values = [v for _, v in string_arguments(arguments) if len(v) >= 4]
        for refusal in self.refusals:
            if not any(_same(w, verb) for w in refusal.words for verb in verbs):
                continue
            for value in values:
                if value in refusal.paragraph:
                    call = f"{tool_name}({short(arguments, 200)})"
                    message = f"{call} changes {value}, of which the agent had told the user "
                    message += repr(refusal.said)
                    return message, {"call": call, "resource": value, "refusal": refusal.said}
        return None
