"""FM-1.1's rule `change_before_prerequisites`: a change made before what the instructions
say to obtain first.

`change_before_prerequisites`: instructions may list what the agent must obtain before a kind
of change ("Cancel flight: the agent must first obtain the user id, the reservation id, and the
reason for cancellation": `prerequisite_pattern`, its group `items`). A clause applies to a tool
when the tool's verb (`cancel` of `cancel_reservation`) is a word of the clause's sentence or of
the heading above it. Each item of its list (up to "then", a semicolon or the sentence's end; a
parenthesis dropped) counts as obtained once its head word (its first word that is not an
article: "reason" of "the reason for cancellation") was said in the conversation (the user's
turns or the agent's words) or is a word of an argument name of a call so far (`user_id`
obtains "user id"). The watch keeps the words said and the argument names seen, and the first
changes with what was known then; the clause is read at close, when the instructions are known.

Fires: under "## Cancel appointment - The agent must first obtain the patient id, the
appointment id, and the reason for cancelling (illness, travel, other).", the patient says "I
am patient P-77, cancel appointment AP-310." and "Yes, cancel it.", and the agent calls
`cancel_appointment({"patient_id": "P-77", "appointment_id": "AP-310"})`: the reason is missing.

Near miss: the patient said "The reason is that I am travelling." first; `move_appointment`
under the same instructions (the clause covers cancelling only); instructions with no such
clause.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from mast_otel.processors.classify import name_words
from mast_otel.processors.detectors.task_specification.context import TaskSpecificationContext
from mast_otel.processors.model import StepRef

_WORD = re.compile(r"[a-z0-9]+")
_HEADING = re.compile(r"^\s*#+\s*(.+)$", re.MULTILINE)
_ITEM_SPLIT = re.compile(r",\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+")
_ARTICLES = frozenset({"the", "a", "an", "their", "his", "her", "its", "user's", "users"})
# Words remembered per run (a bound on memory; past it, nothing more is learnt).
MAX_WORDS = 50_000


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def _same(word: str, verb: str) -> bool:
    """A word of the verb's family: `cancel` and `cancellation`, `book` and `booking`."""
    short = min(len(word), len(verb))
    return short >= 4 and word[:short] == verb[:short] and abs(len(word) - len(verb)) <= 8


@dataclass(slots=True)
class HeldChange:
    ref: StepRef
    call: str
    verb: str
    known: frozenset[str]


class PrerequisiteWatch:
    """What was said and which argument names were seen, and the changes made, to check at
    close against the instructions' "must first obtain" clauses."""

    __slots__ = ("changes", "clause", "known", "limit")

    def __init__(self, context: TaskSpecificationContext) -> None:
        self.clause = context.prerequisite
        self.limit = context.config.max_findings_per_run
        self.known: set[str] = set()
        self.changes: list[HeldChange] = []

    def said(self, text: str) -> None:
        if self.clause is not None and text and len(self.known) < MAX_WORDS:
            self.known |= _words(text)

    def called(self, arguments: str) -> None:
        """A call's argument names (`reservation_id` gives reservation, id)."""
        if self.clause is None or not arguments.lstrip().startswith("{"):
            return
        try:
            parsed = json.loads(arguments)
        except (ValueError, RecursionError):
            return
        if isinstance(parsed, dict) and len(self.known) < MAX_WORDS:
            for key in list(parsed)[:64]:
                self.known |= _words(str(key).replace("_", " "))

    def change(self, ref: StepRef, tool_name: str, call: str) -> None:
        words = name_words(tool_name)
        if self.clause is None or not words or len(self.changes) >= self.limit:
            return
        self.changes.append(HeldChange(ref, call, words[0], frozenset(self.known)))

    def missing(self, instructions: str) -> list[tuple[HeldChange, list[str], str]]:
        """Each held change with the items its verb's clause lists that were not obtained
        before it, and the clause's sentence."""
        if self.clause is None or not self.changes or not instructions:
            return []
        clauses = self._clauses(instructions[:100_000])
        out = []
        for held in self.changes:
            for verb_words, items, said in clauses:
                if not any(_same(w, held.verb) for w in verb_words):
                    continue
                lacking = [item for item, head in items if head not in held.known]
                if lacking:
                    out.append((held, lacking, said))
                    break
        return out

    def _clauses(self, text: str) -> list[tuple[set[str], list[tuple[str, str]], str]]:
        """(the words of the clause's sentence and heading, its items with their head words,
        the sentence) for every "must first obtain" clause of the instructions."""
        assert self.clause is not None
        out = []
        for found in self.clause.finditer(text):
            start = max(text.rfind("\n", 0, found.start()), text.rfind(". ", 0, found.start()))
            ends = [
                i for i in (text.find("\n", found.end()), text.find(". ", found.end())) if i >= 0
            ]
            said = text[start + 1 : min([*ends, len(text)])].strip()
            headings = list(_HEADING.finditer(text, 0, found.start()))
            heading = headings[-1].group(1) if headings else ""
            listed = re.sub(r"\([^)]*\)", " ", found.group("items"))
            listed = re.split(r"\bthen\b|;", listed)[0]
            items = []
            for item in _ITEM_SPLIT.split(listed):
                words = [w for w in _WORD.findall(item.lower()) if w not in _ARTICLES]
                if words:
                    items.append((" ".join(words), words[0]))
            if items:
                plain = re.sub(r"\([^)]*\)", " ", said)  # "(change of plan, ...)" names no verb
                out.append((_words(plain) | _words(heading), items, said))
        return out
