"""FM-1.1's rules `escalation_after_refusal` and `escalation_offered_after_refusal`, which
share the agent's first refusal.

`escalation_after_refusal`: the instructions say to escalate to a person only when a request
cannot be handled (`escalate_only_pattern`), and the agent escalates (a call the classifier
calls an escalation, or a call or hand-off whose tool name matches `escalation_tool_pattern`)
after it told the user the request is not allowed (`refusal_pattern`): a request the
instructions say to deny is not one it cannot handle. `escalation_offered_after_refusal`: the
same, where the agent offers the escalation in its words (`escalation_offer_pattern`) rather
than making it; once a run. Neither is reported when the refusal came before any tool returned
anything (it is about the kind of request, not a rule applied to what was read) and the user's
last turn asked for a person (`person_request_pattern`). Both are held and decided at close,
when the instructions are known.

Fires: under "Escalate to a human agent only if the request cannot be handled with your
tools", the user asks "Refund my annual licence, I bought it 14 months ago.", the agent answers
"I'm sorry, licences older than 12 months are not eligible for a refund.", the user says "Then
get me someone who can.", and it calls `escalate_to_human_agent`. The same refusal followed by
"I can transfer you to a human agent if you like." is the offer.

Near miss: "My laptop screen is cracked." escalated with no refusal before it (a request the
tools cannot handle); a data-centre migration refused before anything was read, then "Could I
speak to a supervisor about this?" and the escalation (the person the user asked for).
"""

from __future__ import annotations

from typing import Any

from mast_otel.processors.detectors.task_specification.context import TaskSpecificationContext
from mast_otel.processors.detectors.task_specification.offer_before_request import sentence
from mast_otel.processors.model import Step


class EscalationWatch:
    """The agent's first refusal (its words), whether a tool had returned anything before it,
    and whether the offer rule has given its one finding."""

    __slots__ = (
        "escalation_offer",
        "escalation_tool",
        "offered",
        "person_request",
        "read",
        "refusal",
        "refusal_checked",
        "refusal_pattern",
    )

    def __init__(self, context: TaskSpecificationContext) -> None:
        self.refusal_pattern = context.refusal
        self.person_request = context.person_request
        self.escalation_tool = context.escalation_tool
        self.escalation_offer = context.escalation_offer
        self.refusal = ""
        # Whether a tool had returned anything before the agent's first refusal: a refusal
        # with nothing read is about the kind of request, not a rule applied to a case.
        # `read` is set by the run's state as results come.
        self.read = False
        self.refusal_checked = False
        self.offered = False

    def agent_said(self, text: str) -> None:
        """The agent's words to the user, while it has refused nothing: its first refusal, if
        this is it."""
        found = self.refusal_pattern.search(text)
        if found:
            self.refusal = sentence(text, found)
            self.refusal_checked = self.read

    def _refusing(self, user_text: str) -> bool:
        """The agent refused a request it may not escalate: not when the refusal came before
        any tool returned anything and the user then asked for a person (a request the agent
        has no action for, handed to the person the user asked for)."""
        if not self.refusal:
            return False
        person = self.person_request
        return self.refusal_checked or person is None or not person.search(user_text)

    def escalated(
        self, step: Step, user_text: str, escalation: bool = False
    ) -> tuple[str, dict[str, Any]] | None:
        """A call that escalates to a person (so classified, or by its tool name), after the
        agent's own refusal: the message and values of a finding to hold for the
        escalate-only clause."""
        if not self._refusing(user_text):
            return None
        if escalation or self.escalation_tool.search(step.tool_name):
            message = (
                f"{step.tool_name} escalated to a person after the agent had told the user "
                f"the request is not allowed ({self.refusal!r}); the "
                "instructions allow escalating only what cannot be handled"
            )
            return message, {"tool": step.tool_name, "refusal": self.refusal}
        return None

    def offer(self, text: str, user_text: str) -> tuple[str, dict[str, Any]] | None:
        """An escalation offered in the agent's words after its own refusal (once per run):
        the message and values of a finding to hold for the escalate-only clause."""
        offer = self.escalation_offer
        if offer is None or self.offered or not self._refusing(user_text):
            return None
        found = offer.search(text)
        if found is None:
            return None
        self.offered = True
        said = sentence(text, found)
        message = (
            f"the agent offered to escalate to a person ({said!r}) after telling the user the "
            f"request is not allowed ({self.refusal!r}); the instructions allow escalating "
            "only what cannot be handled"
        )
        return message, {"offer": said, "refusal": self.refusal}
