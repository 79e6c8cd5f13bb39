"""FM-2.6 reasoning-action mismatch: "I can't look that up", and then a call does.

- `inability_then_done`: the model tells the user it is not able to look something up ("I'm
  unable to look up reservations using just the user ID", "I don't have access to your
  gift card balances": `inability_pattern`, the thing refused in its group `object`; "I
  cannot find X" reports a search that failed, no inability), and
  a later successful call (a read or a change) returns a result naming at least half of the
  thing's words (`claim_stopwords` and vague words left out; "gift card" matches a result's
  `gift_card`): what it said it could not do, the agent did. A refusal of a way of looking
  ("using just a name", "by email") is belied only by a call whose argument names hold a
  word of that way (a `user_id` for "using just the user ID"): asking for another identifier
  and looking up by it is consistent. One finding per refusal.
  Fires: "I'm unable to look up invoices by email address.", and after the user insists,
  `search_invoices(email=...)` returns the customer's invoices.
  Near miss: "I'm unable to look up invoices using just a name. Your email?" and then the
  same look-up by email (another way than the one refused); "I cannot find invoices for that
  email address yet." (a search that failed); "I cannot cancel invoices by email address."
  (no look-up refused).

FM-3.1 reads refusals with these same classes (its own pattern, things refused outright
only), so they are given the compiled pattern (`InabilityRules`) rather than FM-2.6's
context."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from mast_otel.processors.detectors.base import json_doc, short
from mast_otel.processors.detectors.reasoning_common import Emit, around, stem
from mast_otel.processors.model import Finding, Step, StepRef
from mast_otel.processors.run import Run

# Words that name no thing of their own in what was refused.
_VAGUE = frozenset(
    [
        "about",
        "information",
        "info",
        "details",
        "detail",
        "specific",
        "real",
        "time",
        "current",
        "exact",
        "any",
        "more",
        "other",
        "using",
        "just",
        "directly",
        "with",
        "from",
        "without",
        "only",
        "such",
        "some",
        "data",
        "status",
    ]
)
_WORD = re.compile(r"[a-z]{3,}")
# Where the thing refused ends and the way of looking for it begins.
_MEANS = re.compile(r"\b(?:using|by|with|from|via|based on|through)\b", re.IGNORECASE)
# Refusals waiting for a result, and the characters of a result read for its words.
_MAX_PENDING = 32
_MAX_RESULT = 50_000


class InabilityRules:
    """The rule's pattern and words, compiled once per detector. With `thing_only`, a refusal
    of a way of looking ("using just the user ID") is not remembered: only a thing refused
    outright ("information about your gift card balances")."""

    def __init__(self, pattern: str, stopwords: Iterable[str], thing_only: bool = False) -> None:
        self.pattern = re.compile(pattern, re.IGNORECASE) if pattern else None
        self.stopwords = frozenset(w.lower() for w in stopwords) | _VAGUE
        self.thing_only = thing_only


class Belied(NamedTuple):
    """A refusal a later result belied: where it was said, the words said, the call that
    returned the thing, and the thing's words the result names."""

    where: StepRef
    said: str
    call: str
    step: Step
    shown: list[str]


class Inabilities:
    """One run's refusals not yet belied: (where, the words said, the thing's stems, the
    stems of the way of looking it named)."""

    __slots__ = ("pending", "rules")

    def __init__(self, rules: InabilityRules) -> None:
        self.rules = rules
        self.pending: list[tuple[StepRef, str, frozenset[str], frozenset[str]]] = []

    def model(self, step: Step, run: Run) -> None:
        """Remember what the model says it is not able to look up."""
        pattern = self.rules.pattern
        if pattern is None or not step.output_text or len(self.pending) >= _MAX_PENDING:
            return
        text = step.output_text
        for match in pattern.finditer(text):
            parts = _MEANS.split(match.group("object") or "", maxsplit=1)
            thing, means = parts[0], parts[1] if len(parts) > 1 else ""
            stems, ways = self._stems(thing), self._stems(means)
            if ways and self.rules.thing_only:
                continue
            if stems and len(self.pending) < _MAX_PENDING:
                said = around(text, match.start(), match.end())
                self.pending.append((run.ref(step), said, stems, ways))

    def _stems(self, words: str) -> frozenset[str]:
        return frozenset(
            stem(w) for w in _WORD.findall(words.lower()) if w not in self.rules.stopwords
        )

    def tool(self, step: Step, acts: bool, run: Run, emit: Emit) -> list[Finding]:
        """A successful read or change (`acts`) whose result names a refused thing."""
        findings: list[Finding] = []
        for where, said, call, _, shown in self.belied(step, acts):
            findings.extend(
                emit(
                    where,
                    "inability_then_done",
                    0.7,
                    f"the model said {said!r}, and then {call} returned it (its result names "
                    f"{', '.join(shown)})",
                    [where, step],
                    {"said": said, "call": call, "named": shown},
                    run,
                )
            )
        return findings

    def belied(self, step: Step, acts: bool) -> list[Belied]:
        """The refusals a successful read or change (`acts`) belies: its result names at least
        half of the thing's words (and, for a refused way of looking, an argument name holds
        a word of that way). Each refusal is belied once."""
        if not self.pending or not acts or step.failed or not step.tool_result:
            return []
        # Each stem of the result's words, with the first word that has it (for the message).
        words: dict[str, str] = {}
        for word in _WORD.findall(step.tool_result[:_MAX_RESULT].lower()):
            words.setdefault(stem(word), word)
        keys = {stem(w) for w in _WORD.findall(_keys(step.tool_arguments))}
        belied: list[Belied] = []
        left = []
        for refusal in self.pending:
            where, said, stems, ways = refusal
            shown = sorted(words[s] for s in stems & words.keys())
            if 2 * len(shown) < len(stems) or (ways and not ways & keys):
                left.append(refusal)
                continue
            call = f"{step.tool_name}({short(step.tool_arguments, 120)})"
            belied.append(Belied(where, said, call, step, shown))
        self.pending = left
        return belied


def _keys(arguments: str) -> str:
    """The argument names of a call, as words ("user_id" is "user id")."""
    doc = json_doc(arguments)
    if not isinstance(doc, dict):
        return ""
    return " ".join(str(k) for k in list(doc)[:64]).lower().replace("_", " ")
