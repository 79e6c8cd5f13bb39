"""FM-2.6 reasoning-action mismatch: changes claimed that no call made.

- `claimed_unperformed_action`: the model says it has done something ("one bag has been
  added", "I have cancelled ...", "the change fee was waived": `claimed_action_pattern`) and
  no successful change before it is of that kind: no successful mutating call names the verb
  or the thing claimed in its tool name or argument names."""

from __future__ import annotations

import json
import re
from dataclasses import fields
from typing import TYPE_CHECKING

from mast_otel.processors.detectors.reasoning_common import Emit, around, stem
from mast_otel.processors.model import Finding, Step
from mast_otel.processors.run import Run

_MAX_CHANGES = 50_000

# The default of `claim_stopwords`.
CLAIM_STOPWORDS = (
    "the",
    "a",
    "an",
    "your",
    "my",
    "our",
    "all",
    "and",
    "also",
    "one",
    "two",
    "three",
    "it",
    "this",
    "that",
    "these",
    "those",
    "has",
    "have",
    "been",
    "now",
    "successfully",
    "additionally",
    "new",
    "same",
    "both",
    "each",
    "i",
    "we",
    "you",
    "for",
    "to",
    "of",
)

if TYPE_CHECKING:
    from mast_otel.processors.detectors.reasoning_action import ReasoningActionConfig

# Every match of the default `claimed_action_pattern` holds one of its verbs (the same
# letters, under the same IGNORECASE): a model output with none skips that pattern, whose
# leading words are tried at every position. A configured pattern always runs.
_DEFAULT_VERBS = re.compile(
    r"added|removed|cancel|booked|sent|issued|deleted|created|closed|restarted|deployed|"
    r"merged|submitted|scheduled|assigned|waived",
    re.IGNORECASE,
)


class ClaimRules:
    """The rule's patterns and words, compiled once per detector."""

    def __init__(self, config: ReasoningActionConfig) -> None:
        self.claimed = (
            re.compile(config.claimed_action_pattern, re.IGNORECASE)
            if config.claimed_action_pattern
            else None
        )
        default = next(f.default for f in fields(config) if f.name == "claimed_action_pattern")
        self.verbs = _DEFAULT_VERBS if config.claimed_action_pattern == default else None
        self.stopwords = frozenset(w.lower() for w in config.claim_stopwords)
        self.condition = re.compile(config.claim_condition_pattern, re.IGNORECASE)
        self.modal = re.compile(config.claim_modal_pattern, re.IGNORECASE)


class Claims:
    """One run's successful changes (the stems of each one's tool name and argument names)."""

    __slots__ = ("changes", "rules")

    def __init__(self, rules: ClaimRules) -> None:
        self.rules = rules
        self.changes: list[frozenset[str]] = []

    def changed(self, step: Step) -> None:
        """A successful mutating call."""
        if len(self.changes) < _MAX_CHANGES:
            self.changes.append(call_stems(step.tool_name, step.tool_arguments))

    def model(self, step: Step, run: Run, emit: Emit) -> list[Finding]:
        """Things the model says were done that no successful change before did."""
        pattern = self.rules.claimed
        if pattern is None or not step.output_text:
            return []
        text = step.output_text
        if self.rules.verbs is not None and not self.rules.verbs.search(text):
            return []
        for match in pattern.finditer(text):
            verb = (
                match.group("verb")
                or match.group("verb2")
                or match.group("verb3")
                or match.group("verb4")
                or ""
            )
            thing = match.group("thing") or match.group("thing2") or match.group("thing3") or ""
            wanted = {
                stem(w)
                for w in re.findall(r"[a-z]+", thing.lower())
                if w not in self.rules.stopwords
            }
            if not wanted:
                continue
            cut = max(text.rfind(". ", 0, match.start()), text.rfind("\n", 0, match.start()), 0)
            sentence = text[cut : match.start()]
            if self.rules.condition.search(sentence + " " + thing) or self.rules.modal.search(
                thing
            ):
                continue
            verb_stem = stem(verb)
            if any(verb_stem in change or wanted & change for change in self.changes):
                continue
            said = around(text, match.start(), match.end())
            done = ", ".join(sorted({c for change in self.changes for c in change})) or "none"
            return emit(
                step,
                "claimed_unperformed_action",
                0.7,
                f"the model said {said!r}, and no successful change before it did that "
                f"(successful changes named: {done})",
                [step],
                {"said": said, "verb": verb, "thing": thing.strip()},
                run,
            )
        return []


def call_stems(tool: str, arguments: str) -> frozenset[str]:
    """The stems of a call's tool name and argument names: what kind of change it is."""
    names = re.findall(r"[a-z]+", tool.lower())
    try:
        parsed = json.loads(arguments) if arguments else {}
    except (ValueError, RecursionError):
        parsed = {}
    if isinstance(parsed, dict):
        for key in parsed:
            names += re.findall(r"[a-z]+", str(key).lower())
    return frozenset(stem(n) for n in names if len(n) > 2)
