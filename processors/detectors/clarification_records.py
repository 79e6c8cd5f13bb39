"""What FM-2.2's `unasked_choice` knows of the record a change is made to: a value that
record already holds is no free pick when the user asked to keep it ("refund to the original
payment method"), or answered the agent's proposal to keep it ("your original payment method
will be used ... Please confirm"), or when the change's own result shows the record holding it
just as before (nothing was charged or moved: there was nothing to ask about).

A record is a JSON object a tool result returned (a reservation, an order, a ticket), known
by its scalar values (its id among them): a change whose arguments name one of those is made
to that record."""

from __future__ import annotations

import re
from collections import Counter

from mast_otel.processors.detectors.base import json_doc
from mast_otel.processors.detectors.clarification_offers import argument_words, sentence_words

# A user's words asking to keep what a record has ("the original payment method").
REUSE = r"\b(?:original(?:ly)?|same|existing|previous(?:ly)?|usual(?:ly)?)\b"

# Records remembered per run (a bound on memory: past it, older records are not replaced).
_MAX_RECORDS = 5_000
_MAX_ASKS = 200


def records_of(text: str, choice: re.Pattern[str]) -> list[tuple[set[str], Counter[str]]]:
    """For a JSON result: each top-level object (or each object of a top-level list) as the
    keys that name it (its scalar values, lower-cased, three characters or more) and how often
    each identifier (`choice`) occurs anywhere inside it."""
    doc = json_doc(text)
    if doc is None:
        return []
    tops = doc if isinstance(doc, list) else [doc]
    out: list[tuple[set[str], Counter[str]]] = []
    for top in tops[:100]:
        if not isinstance(top, dict):
            continue
        keys = {
            str(v).lower()
            for v in top.values()
            if isinstance(v, str | int) and not isinstance(v, bool) and len(str(v)) >= 3
        }
        held: Counter[str] = Counter()
        todo: list[object] = [top]
        while todo and sum(held.values()) < 1000:
            node = todo.pop()
            if isinstance(node, dict):
                todo.extend(node.values())
            elif isinstance(node, list):
                todo.extend(node)
            elif isinstance(node, str) and choice.fullmatch(node):
                held[node.lower()] += 1
        if keys and held:
            out.append((keys, held))
    return out


class TargetRecords:
    """The records tool results returned, and the user's requests to keep a record's value."""

    __slots__ = ("asks", "choice", "listed", "proposed", "records", "reuse", "unchanged")

    def __init__(
        self, choice: re.Pattern[str] | None, reuse: re.Pattern[str] | None, unchanged: bool
    ) -> None:
        self.choice = choice
        self.reuse = reuse
        self.unchanged = unchanged
        # A record's identifiers (with how often each occurs), by each key that names it.
        self.records: dict[str, Counter[str]] = {}
        # The words of the user's sentences asking to keep something as it is; of the agent's
        # last words before the user's last turn (the proposal that turn answered) that
        # propose to keep it; the agent's words since the user's last turn.
        self.asks: list[set[str]] = []
        self.listed: list[set[str]] = []
        self.proposed = ""

    def agent_said(self, text: str) -> None:
        if self.reuse is not None and text:
            self.proposed = text

    def user_turn(self, text: str) -> None:
        if self.reuse is None or not text:
            return
        reuse, proposed, self.proposed = self.reuse, self.proposed, ""
        self.listed = [w for s, w in sentence_words(proposed) if reuse.search(s)][:_MAX_ASKS]
        if len(self.asks) < _MAX_ASKS:
            self.asks.extend(w for s, w in sentence_words(text) if reuse.search(s))

    def learn(self, result: str) -> None:
        """Remember the records of a successful result (the latest of each wins)."""
        if self.choice is None or (self.reuse is None and not self.unchanged):
            return
        for keys, held in records_of(result[:100_000], self.choice):
            for key in keys:
                if key in self.records or len(self.records) < _MAX_RECORDS:
                    self.records[key] = held

    def kept(self, arguments: list[tuple[str, str]], key: str, value: str, result: str) -> bool:
        """Whether `value`, passed as `key` of a change, is a value the changed record already
        held and either the user asked to keep it for that argument (or answered the agent's
        proposal to) or the change's result shows the record holding it as often as before."""
        value = value.lower()
        targets = [
            v.lower()
            for k, v in arguments
            if k != key and value in self.records.get(v.lower(), Counter())
        ]
        if not targets or self.choice is None:
            return False
        wanted = argument_words(key)
        if wanted and any(wanted <= words for words in (*self.asks, *self.listed)):
            return True
        for keys, held in records_of(result[:100_000], self.choice) if self.unchanged else ():
            for target in targets:
                if target in keys and held[value] == self.records[target][value]:
                    return True
        return False
