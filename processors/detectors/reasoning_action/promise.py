"""FM-2.6 reasoning-action mismatch: a change made other than the one the user was told of.

- `call_differs_from_announced`: the model tells the user what it is about to do, the user
  answers, and the agent's very next action is a change with a field set to a value the
  message never names, while the message names another value the run knows for that field
  (a value the field held in some call or result, or a key beside such a value in a
  result's object: fields.py): "upgrading the outgoing flight to business class ... Would
  you like to proceed?", then `update(cabin="economy")`.
  Fires: after `list_agents` returned the assignees ana and omar, "I will assign T-31 to
  Ana. Shall I go ahead?", the user's "Yes, do it.", then
  `update_ticket(ticket_id="T-31", assignee="omar")`.
  Near miss: "Ana is away, so I will assign T-31 to Omar. OK?" names the value the call
  set; "Shall I reassign T-31?" names no value of the field."""

from __future__ import annotations

from mast_otel.processors.detectors.base import json_doc, short
from mast_otel.processors.detectors.reasoning_action.context import ReasoningActionContext
from mast_otel.processors.detectors.reasoning_action.fields import Fields, has, norm
from mast_otel.processors.detectors.reasoning_common import Emit
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import Run

_LLM = StepKind.LLM
_HUMAN = StepKind.HUMAN


class Promises:
    """One run's last message to the user before an answer, and whether the agent's next
    action follows the answer directly."""

    __slots__ = ("direct", "fields", "limit", "told")

    def __init__(self, context: ReasoningActionContext, fields: Fields) -> None:
        self.fields = fields
        self.limit = context.config.max_field_value_length
        self.told: tuple[StepRef, str] | None = None
        self.direct = False

    def said(self, step: Step, run: Run) -> None:
        """A model output or a user turn."""
        if step.kind is _HUMAN:
            self.direct = self.told is not None
        elif step.kind is _LLM and step.output_text.strip() and not step.tool_calls:
            self.told = (run.ref(step), step.output_text)
            self.direct = False

    def acted(self, step: Step, change: bool, run: Run, emit: Emit) -> list[Finding]:
        """A tool call: a change right after the answer is compared with the message."""
        direct, self.direct = self.direct, False
        if not change or not direct or self.told is None:
            return []
        arguments = json_doc(step.tool_arguments)
        if not isinstance(arguments, dict):
            return []
        told, text = self.told
        message = norm(text[:8000])
        limit = self.limit
        for key, value in arguments.items():
            if not isinstance(value, str) or not 0 < len(value) <= limit:
                continue
            done = norm(value)
            if not any(c.isalpha() for c in done) or has(message, done):
                continue
            named = sorted(w for w in self.fields.domain(str(key)) - {done} if has(message, w))
            if not named:
                continue
            call = f"{step.tool_name}({short(step.tool_arguments, 160)})"
            return emit(
                step,
                "call_differs_from_announced",
                0.7,
                f"the model told the user {key} {named[0]!r} ({short(text.strip(), 120)!r}) "
                f"and, on the answer, ran {call} with {key} {done!r}",
                [told, step],
                {"said": short(text), "field": str(key), "told": named, "done": done, "call": call},
                run,
            )
        return []
