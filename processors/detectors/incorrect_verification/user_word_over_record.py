"""FM-3.3's `user_word_over_record`: the agent repeats the user's description of a field that the
record it read gives another value.

The user describes something of theirs with a value and a field's name ("as a Gold member", "my
premium plan", "the express shipping"); the agent read a record (a JSON object a read-only call
returned) one of whose top-level fields has that name (a one-word name: `membership`, `plan`,
`shipping`; the user's word is the name or its start) and holds a word-like value that says
which, not whether ("regular"; not "yes"); and the agent then gives the user's words as the
reason for a conclusion ("since you are a Gold member, I can offer ..."; a courtesy such as "as a
valued Gold member" concludes nothing; no question, no supposition: "if", "would"), although no
record read in the run gave that field the user's value and the agent has not told the user the
record's (in that reply or before). It read the record and concluded what the user said. Decided
as the run goes; one finding per run, at the reply.

    Fires: the user writes "I'm on the premium plan, acct-118. I want priority support.";
    `get_account {"account_id": "acct-118"}` returns `{"plan": "basic", ...}`; the agent says
    "Since you're on the Premium plan, I've opened a priority ticket."
    Near miss: "As a valued premium plan customer, thank you for waiting." (a courtesy, no
    reason given); "Since you're on the premium plan you would get priority." (a
    supposition); the same reply after the agent told the user the account is on the basic
    plan; or with no account read at all.
"""

from __future__ import annotations

import re

from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import json_doc, short
from mast_otel.processors.detectors.incorrect_verification.context import (
    IncorrectVerificationContext,
)
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import Run

_READ = ActionKind.READ
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL
_HUMAN = StepKind.HUMAN
# A value that is a word or two (`regular`, `basic_economy`), not a number, date or id.
_WORD_VALUE = re.compile(r"^[a-z]+(?:[ _-][a-z]+){0,2}$")
# Two words in a row; the second is looked ahead at, so that pairs overlap ("a gold member").
_PAIR = re.compile(r"\b([a-z]+)[ -](?=([a-z]+)\b)")
_SENTENCE = re.compile(r"(?:[^.!?\n]|[.!?](?=\d))+(?:[.!?]|\n|$)")
# Field names shorter than this are too common a word to be read as a field ("id", "name").
_MIN_FIELD = 4
# A user's word naming a field by its start ("member" for `membership`) is at least this long.
_MIN_STEM = 5
_MAX_FIELDS = 256
# A sentence that gives the user's word as the reason for a conclusion ("since you are a Gold
# member, you are eligible"); a courtesy ("as a valued Gold member, ...") concludes nothing.
_PREMISE = re.compile(r"\b(?:since|because|given that|as you are|as you're)\b")
# A sentence that supposes rather than states ("as a Gold member you would get ...").
_SUPPOSING = re.compile(r"\b(?:if|would|could|might|were|suppose|assuming|whether)\b")
# Values that say whether, not which: a user's word against them is no other value.
_YES_NO = frozenset({"yes", "no", "true", "false", "none", "null", "unknown", "n", "y"})
_MAX_PAIRS = 4096
# Words that describe nothing ("your plan", "the membership", "new plan").
_FUNCTION_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "my",
        "your",
        "our",
        "their",
        "his",
        "her",
        "its",
        "this",
        "that",
        "these",
        "those",
        "any",
        "some",
        "no",
        "each",
        "every",
        "new",
        "old",
        "current",
        "same",
        "other",
        "another",
        "which",
        "what",
        "whose",
    ]
)


class UserWords:
    """Per run: the fields of the records read (name -> the read, every value seen), the
    user's two-word phrases, and the first reply that repeats one against the record."""

    __slots__ = ("context", "fields", "found", "pairs", "stems", "told")

    def __init__(self, context: IncorrectVerificationContext) -> None:
        self.context = context
        self.fields: dict[str, tuple[StepRef, set[str]]] = {}
        # A word naming a field (its name, or a start of it) -> the field's name.
        self.stems: dict[str, str] = {}
        self.pairs: set[tuple[str, str]] = set()
        self.found: Finding | None = None
        self.told: set[str] = set()

    def observe(self, step: Step, run: Run) -> list[Finding]:
        if self.found is not None:
            return []
        if step.kind is _HUMAN:
            text = (step.input_text or step.output_text)[:4000].lower()
            if len(self.pairs) < _MAX_PAIRS:
                self.pairs.update(_PAIR.findall(text))
        elif step.kind is _TOOL and step.tool_name and not step.failed:
            self._read(step, run)
        elif step.kind is _LLM and step.output_text and self.fields and self.pairs:
            return self._reply(step, run)
        return []

    def _read(self, step: Step, run: Run) -> None:
        context = self.context
        text = step.tool_result
        if not text.lstrip().startswith("{") or len(text.strip()) > 100_000:
            return
        if context.classifier.classify(step.tool_name, step.tool_arguments).kind is not _READ:
            return
        record = json_doc(text)
        if not isinstance(record, dict):
            return
        for name, value in record.items():
            field = str(name).lower()
            if len(field) < _MIN_FIELD or not field.isalpha() or not isinstance(value, str):
                continue
            value = value.strip().lower()
            if not _WORD_VALUE.match(value) or value in _YES_NO:
                continue
            known = self.fields.get(field)
            if known is not None:
                known[1].add(value)
            elif len(self.fields) < _MAX_FIELDS:
                self.fields[field] = (run.ref(step), {value})
                for end in range(max(_MIN_STEM, 1), len(field)):
                    self.stems.setdefault(field[:end], field)
                self.stems[field] = field

    def _reply(self, step: Step, run: Run) -> list[Finding]:
        text = step.output_text[:20_000]
        lowered = text.lower()
        # Fields whose recorded value the agent has told the user: it knows, and a later
        # sentence in the user's words is a courtesy or a supposition.
        for field, (_, values) in self.fields.items():
            if any(v in lowered or v.replace("_", " ") in lowered for v in values):
                self.told.add(field)
        same = len(lowered) == len(text)
        for match in _SENTENCE.finditer(lowered):
            sentence = match.group()
            if (
                sentence.rstrip().endswith("?")
                or _SUPPOSING.search(sentence)
                or not _PREMISE.search(sentence)
            ):
                continue
            for word, named in _PAIR.findall(sentence):
                field = self.stems.get(named, "")
                if (
                    not field
                    or field in self.told
                    or word in _FUNCTION_WORDS
                    or (word, named) not in self.pairs
                ):
                    continue
                read, values = self.fields[field]
                # The record agrees.
                if word in {w for v in values for w in re.split(r"[ _-]", v)}:
                    continue
                said = short((text[match.start() : match.end()] if same else sentence).strip(), 200)
                value = sorted(values)[0]
                self.found = self.context.report.finding(
                    at=step,
                    rule="user_word_over_record",
                    confidence=0.7,
                    message=(
                        f"the agent said {said!r}, the user's {word!r} {named!r}, while "
                        f"{read.tool_name} showed {field} {value!r}"
                    ),
                    evidence=[read, step],
                    values={
                        "said": said,
                        "user_value": word,
                        "field": field,
                        "record_value": value,
                    },
                    run=run,
                )
                return [self.found]
        return []
