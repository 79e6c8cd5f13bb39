"""FM-2.6 reasoning-action mismatch: changes claimed that no call made.

- `claimed_unperformed_action`: the model says it has done something ("one bag has been
  added", "I have cancelled ...", "the change fee was waived": `claimed_action_pattern`) and
  no successful change before it is of that kind: no successful mutating call names the verb
  or the thing claimed in its tool name or argument names.
  Fires: after `update_ticket(ticket_id="T-9", status="closed")` succeeded, "Ticket T-9 has
  been closed. Your refund has been issued to the card on file.": no change issued or
  refunded anything (the closing is backed by the ticket's update). So does "Your refund has
  been issued." after `create_refund` failed.
  Near miss: "The refund R-1 has been issued." after `create_refund` succeeded; "Once a
  refund has been issued it cannot be changed" and "The late fee was not waived.": a word of
  condition or negation before the claim (`claim_condition_pattern`) makes it no claim, as
  a modal in the thing does ("bags can be added": `claim_modal_pattern`)."""

from __future__ import annotations

import json
import re

from mast_otel.processors.detectors.reasoning_action.context import ReasoningActionContext
from mast_otel.processors.detectors.reasoning_common import Emit, around, stem
from mast_otel.processors.model import Finding, Step
from mast_otel.processors.run import Run

_MAX_CHANGES = 50_000


class Claims:
    """One run's successful changes (the stems of each one's tool name and argument names)."""

    __slots__ = ("changes", "rules")

    def __init__(self, context: ReasoningActionContext) -> None:
        self.rules = context.claims
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
