"""Hand-offs between agents, whatever dialect carried them.

Frameworks spell a hand-off in a few ways: a tool whose name is `transfer_to_<agent>` (the
OpenAI Agents SDK's default hand-off tool), a span named "handoff from A to B" or with
`gen_ai.operation.name` "handoff" (Sentry's OpenAI Agents integration). Each becomes a HANDOFF
step whose `agent` is the sender and `target_agent` the receiver; the message handed over is
the step's input text (or the tool call's arguments).

A transfer to a person (`transfer_to_human_agents`, `handoff_to_support`, `transfer_to_operator`)
is an escalation, not a hand-off between agents: it stays a tool call (the classifier names it
an escalation).
"""

from __future__ import annotations

import re

from mast_otel.processors.classify import DEFAULT_PERSON_WORDS, name_words
from mast_otel.processors.model import Step, StepKind

_TRANSFER_TOOL = re.compile(r"^(?:transfer_to|handoff_to|delegate_to|hand_off_to)_(?P<to>.+)$")
_PERSON_WORDS = frozenset(DEFAULT_PERSON_WORDS)
_HANDOFF_NAME = re.compile(
    r"^handoff(?:\s+from\s+(?P<from>.+?))?(?:\s+to\s+(?P<to>.+))?$", re.IGNORECASE
)


def mark_handoff(step: Step) -> Step:
    """Turn a step that is a hand-off into a HANDOFF step (in place); others are unchanged."""
    match = _TRANSFER_TOOL.match(step.tool_name)
    if match and _PERSON_WORDS.intersection(name_words(match["to"])):
        return step  # an escalation to a person, not a hand-off between agents
    if match:
        step.kind = StepKind.HANDOFF
        step.target_agent = match["to"]
        step.input_text = step.input_text or step.tool_arguments
        return step
    named = _HANDOFF_NAME.match(step.name.strip())
    if named or step.operation == "handoff":
        step.kind = StepKind.HANDOFF
        if named and named["to"]:
            step.target_agent = step.target_agent or named["to"].strip()
        if named and named["from"] and not step.agent:
            step.agent = named["from"].strip()
    return step
