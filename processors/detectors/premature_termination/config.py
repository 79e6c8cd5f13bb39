"""FM-3.1's section of the config file (`detectors.premature_termination`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mast_otel.processors.detectors.reasoning_action.config import INABILITY_PATTERN


@dataclass
class PrematureTerminationConfig:
    """FM-3.1 premature termination: the run ends after a failure, with work announced, or without
    its deliverable."""

    # Run this detector.
    enabled: bool = True
    # When set, a run whose final answer does not match this is missing its deliverable
    # (for example "root cause" for incident triage).
    required_final_pattern: str = ""
    # The last sentence of a final answer that only announces a next step (case-insensitive).
    announcement_pattern: str = (
        r"^(?:ok(?:ay)?[,.!]?\s+|now,?\s+|next,?\s+)?(?:I will|I'll|I am going to|I'm going to|"
        r"let me|allow me to|I need to|I should)\b"
        r"(?!\s+(?:know|be (?:here|happy|glad|available))\b)"
    )
    # A user turn that only re-prompts the agent (a harness asking again); empty counts too.
    reprompt_pattern: str = (
        r"^\W*(?:(?:please\s+)?(?:continue|go on|keep going|proceed|answer|respond|reply|"
        r"try again|finish|complete the task)(?:\s+please)?)?\W*$"
    )
    # Answers (model responses without a call) in a run that never called a tool before it
    # counts as never acted on; 0 turns the rule off.
    min_answers_without_tools: int = 1
    # `parked_on_user`: a final answer waiting for the user to bring something back ("" turns
    # the rule off; "if you have any questions", "when you have time" wait for nothing).
    deferral_pattern: str = (
        r"\b(?:once|when|whenever|as soon as) you(?:'ve)? (?:have|find|locate|get|gather|obtain|"
        r"retrieve|provide|share|send|are ready with|have (?:located|found|gathered))\b"
        r"(?!\s+(?:any|more|further|other|additional|some|time|a (?:moment|chance|minute)|"
        r"questions)\b)"
    )

    # `refused_what_tools_return`: the agent says it cannot look up or give a thing (group
    # `object`); a later result naming it shows its tools serve it. "" turns the rule off.
    refusal_pattern: str = INABILITY_PATTERN

    def validate(self) -> None:
        for key in (
            "refusal_pattern",
            "required_final_pattern",
            "announcement_pattern",
            "reprompt_pattern",
            "deferral_pattern",
        ):
            try:
                re.compile(getattr(self, key))
            except re.error as exc:
                raise ValueError(
                    f"detectors.premature_termination.{key}: invalid regular expression ({exc})"
                ) from exc
        if self.min_answers_without_tools < 0:
            raise ValueError(
                "detectors.premature_termination.min_answers_without_tools must be >= 0"
            )
