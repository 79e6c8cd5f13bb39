"""FM-1.1's rule `change_without_confirmation`: a change the user did not say yes to, under
instructions that require their explicit confirmation.

`change_without_confirmation`: the run's instructions (`mast.task.description`) require
explicit confirmation before changes (`confirmation_required_pattern`), and a mutating call
comes with no user turn before it, or follows a user turn that does not affirm
(`affirmative_pattern`; one that holds back, `negative_pattern`, does not affirm even with a
"yes" further on), or follows the agent's own new proposal that no user turn answered, or
retries a failed change with other arguments in the same user turn (the user agreed to the
first details, not these; arguments compare as values, key order and spacing aside). Held as
the change is made and decided at close, when the instructions are known; with
`confirmation_needs_conversation`, only in runs where the user spoke at least twice.

Fires: under "Before you update or delete a ticket you must obtain explicit approval from the
customer", the agent asks "I will set T-1042 to closed. Shall I proceed?", the user answers
"Hmm, what about the scanner ticket?", and it calls `update_ticket({"ticket_id": "T-1042",
"status": "closed"})`; the answer "No, don't proceed yet." does not confirm either. After "Yes,
charge the card ending 4242.", `update_invoice` with `amount: 120` fails and the agent retries
it with `amount: 135`.

Near miss: the user answers "Yes, please go ahead."; the same unconfirmed change under
instructions that ask for no confirmation; a coding agent's one-shot run under "Ask for
explicit approval before running commands that write outside cwd." (its harness approves, not a
user turn in the transcript).
"""

from __future__ import annotations

from typing import Any

from mast_otel.processors.detectors.task_specification.context import TaskSpecificationContext
from mast_otel.processors.model import Step


class ConfirmationWatch:
    """What the user's last turn agreed to: whether the agent proposed something new since,
    and the change that failed in this user turn."""

    __slots__ = ("affirmative", "classifier", "failed_change", "negative", "proposal")

    def __init__(self, context: TaskSpecificationContext) -> None:
        self.classifier = context.classifier
        self.affirmative = context.affirmative
        self.negative = context.negative
        # Whether the agent proposed something new since the user's last turn (a text turn
        # with no call); a change that failed in this user turn (its tool, and its call with
        # key order and spacing aside).
        self.proposal = False
        self.failed_change: tuple[str, str] | None = None

    def user_turn(self) -> None:
        self.proposal = False
        self.failed_change = None

    def affirms(self, text: str) -> bool:
        """A user turn that agrees to what was proposed."""
        return bool(self.affirmative.search(text)) and not self.negative.search(text)

    def change(
        self, step: Step, call: str, user_text: str, said: str
    ) -> tuple[str, dict[str, Any]] | None:
        """A mutating call (`call` as quoted, after the user's last turn `user_text`, `said` as
        quoted): the message and values of a finding to hold when nothing confirmed it."""
        same = self.classifier.canonical_call(step.tool_name, step.tool_arguments)
        why = ""
        if not user_text:
            why = "no user turn came before it"
        elif self.proposal:
            why = f"the agent proposed something new after the user's last turn ({said!r})"
        elif self.failed_change is not None and self.failed_change != (step.tool_name, same):
            why = (
                f"it retries a failed {self.failed_change[0]} with other arguments, which the "
                f"user's last turn ({said!r}) did not see"
            )
        elif not self.affirms(user_text):
            why = f"the user's last turn does not confirm it: {said!r}"
        if step.failed:
            self.failed_change = (step.tool_name, same)
        if not why:
            return None
        message = (
            f"{call} changed the system without the user's explicit confirmation, which the "
            f"instructions require: {why}"
        )
        return message, {"call": call, "last_user_turn": said}
