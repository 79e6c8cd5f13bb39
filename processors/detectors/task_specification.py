"""FM-1.1 Disobey task specification: the run does what its task forbids.

Rules, against the task's policy (the run's `mast.task.*` attributes, else the configured
defaults):
- `tool_not_allowed`: a tool call outside `mast.task.allowed_tools`;
- `mutation_in_read_only_task`: a mutating call (see `classification`) in a read-only task;
- `step_budget` / `time_budget` / `token_budget`: the run passes its budget of steps (model
  calls plus tool calls), seconds or tokens; reported once, at the step that crosses it.
- `change_without_confirmation`: the run's instructions (`mast.task.description`) require
  explicit confirmation before changes (`confirmation_required_pattern`), and a mutating call
  follows a user turn that does not affirm (`affirmative_pattern`), or follows the agent's own
  new proposal that no user turn answered, or retries a failed change with other arguments in
  the same user turn (the user agreed to the first details, not these; arguments compare as
  values, key order and spacing aside);
- `escalation_after_refusal`: the instructions say to escalate to a person only when a request
  cannot be handled (`escalate_only_pattern`), and the agent escalates (a call whose tool name
  matches `escalation_tool_pattern`) after it told the user the request is not allowed
  (`refusal_pattern`): a request the instructions say to deny is not one it cannot handle;
  `escalation_offered_after_refusal`: the same, where the agent offers the escalation in its
  words (`escalation_offer_pattern`) rather than making it (reported once per run). Neither
  is reported when the refusal came before any tool returned anything (it is about the kind
  of request, not a rule applied to what was read) and the user's last turn asked for a
  person (`person_request_pattern`);
- `offer_before_request`: the instructions forbid offering something unless the user asks
  (`no_proactive_offer_pattern`), and the agent offers it (`offer_pattern`: compensation, a
  voucher, a credit) before any user turn asked for one (`offer_request_pattern`); once a run;
- `change_with_unlisted_detail`: under the same instructions, a change the user did confirm
  carries an identifier (`detail_value_pattern`) no turn named before, and not one the user's
  words chose (the changed record's own value kept as asked, `detail_reuse_pattern`, or as
  the proposal they said yes to put it; one of the kind their yes named; see
  task_specification_details.py);
- `change_before_prerequisites`: a change made before the agent obtained what the instructions
  say to obtain first for changes of its verb (`prerequisite_pattern`; see
  task_specification_prerequisites.py);
- `change_to_past_resource`: the instructions state the current time
  (`current_time_pattern`), and a change names a resource whose scheduled dates, as a call
  last read them (`schedule_key_pattern`), all lie before the current day (see
  task_specification_past.py);
- `change_outside_window`: the instructions allow a kind of change only within a time of the
  resource's creation (`change_window_pattern`), and a change of that kind names a resource
  whose record, as read, was created longer ago than that before the current time and shows
  none of the exceptions they name (see task_specification_window.py);
- `change_after_own_refusal`: a change whose tool's verb the agent had refused, in words
  (`refusal_pattern`), for the very resource the change names (see
  task_specification_refused.py).

Policy attributes usually sit on the root span, which arrives last; calls are therefore
checked as they come against what is known, and again at close against the whole policy, so
a violation is reported whichever arrived first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from mast_otel.processors.detectors.base import Detector, DetectorFactory
from mast_otel.processors.detectors.clarification_records import REUSE
from mast_otel.processors.detectors.task_specification_offer import optional
from mast_otel.processors.detectors.task_specification_policy import (
    AFFIRMATIVE,
    CHANGE_WINDOW,
    CONFIRMATION_REQUIRED,
    CREATION_KEY,
    CURRENT_TIME,
    ESCALATE_ONLY,
    ESCALATION_OFFER,
    ESCALATION_TOOL,
    NEGATIVE,
    NO_PROACTIVE_OFFER,
    OFFER,
    OFFER_REQUEST,
    PERSON_REQUEST,
    PREREQUISITE,
    REFUSAL,
    SCHEDULE_KEY,
)
from mast_otel.processors.detectors.task_specification_run import TaskSpecificationRun
from mast_otel.processors.run import DetectorRun, Run


@dataclass
class TaskSpecificationConfig:
    """FM-1.1 disobey task specification: tools outside the task's list, changes in a read-only
    task, budgets overrun."""

    # Run this detector.
    enabled: bool = True
    # Defaults for every run; a run's own `mast.task.*` attributes take precedence.
    allowed_tools: list[str] = field(default_factory=list)
    # Every run is read-only unless it says otherwise (`mast.task.read_only`).
    read_only: bool = False
    # Budgets; 0 means none. Steps are model calls plus tool calls.
    max_steps: int = 0
    # Wall-clock budget of a run in seconds; 0 means none.
    max_seconds: float = 0.0
    # Token budget of a run (input plus output); 0 means none.
    max_tokens: int = 0
    # Findings reported per run; the rest are not reported.
    max_findings_per_run: int = 5
    # Instructions that require the user's explicit confirmation before a change
    # (case-insensitive regular expression over `mast.task.description`); "" turns the
    # `change_without_confirmation` rule off.
    confirmation_required_pattern: str = CONFIRMATION_REQUIRED
    # Apply the confirmation rule only to conversations: runs where the user spoke again after
    # the task (a one-shot run, such as a coding agent's, is approved by its harness, if at
    # all, not in the transcript).
    confirmation_needs_conversation: bool = True
    # A user turn that agrees to what the agent proposed.
    affirmative_pattern: str = AFFIRMATIVE
    # A user turn that holds back ("no", "wait", "don't"): not an agreement even with a "yes"
    # further on ("no, I don't confirm").
    negative_pattern: str = NEGATIVE
    # Instructions that allow escalating to a person only when a request cannot be handled;
    # "" turns the `escalation_after_refusal` rule off.
    escalate_only_pattern: str = ESCALATE_ONLY
    # Tool names of an escalation to a person, besides the calls the classifier calls
    # escalations.
    escalation_tool_pattern: str = ESCALATION_TOOL
    # The agent offering to escalate to a person in its words; "" turns the offer rule off.
    escalation_offer_pattern: str = ESCALATION_OFFER
    # The agent telling the user a request is not allowed (its own refusal, by policy).
    refusal_pattern: str = REFUSAL
    # A user turn asking to be put through to a person: after a refusal the agent made
    # before any tool returned anything, escalating to that person is not reported; ""
    # reports it.
    person_request_pattern: str = PERSON_REQUEST
    # Instructions that forbid offering something unless the user asks for it; "" turns the
    # `offer_before_request` rule off.
    no_proactive_offer_pattern: str = NO_PROACTIVE_OFFER
    # Instructions listing what the agent must obtain before a kind of change ("must first
    # obtain the user id and the reason for cancellation"); "" turns the
    # `change_before_prerequisites` rule off. The group `items` holds the list.
    prerequisite_pattern: str = PREREQUISITE
    # An argument value that is a detail the user must have been told of before agreeing to a
    # change (an identifier: a name and a number, such as a payment method's id); "" turns the
    # `change_with_unlisted_detail` rule off.
    detail_value_pattern: str = r"\b(?P<kind>[a-z][a-z_.-]{2,40}?)[_.-]?\d{3,}\b"
    # A user's words asking to keep what a record has ("the original payment method"), or the
    # agent's proposal they said yes to saying so: the changed record's own value for the
    # argument the sentence names is then no unlisted detail; "" turns it off.
    detail_reuse_pattern: str = REUSE
    # A changed record's own value that the change's result shows the record holding as often
    # as before (nothing charged to it, nothing moved) is no unlisted detail.
    detail_unchanged: bool = True
    # Argument names whose values are the agent's own to write (a summary, a note).
    free_argument_pattern: str = r"summary|note|comment|reason|message|description|title|body"
    # The agent offering such a thing in its words to the user (not when negated: "I cannot
    # offer ...").
    offer_pattern: str = OFFER
    # Instructions stating the current time (its first ISO date is the current day); "" turns
    # the `change_to_past_resource` rule off.
    current_time_pattern: str = CURRENT_TIME
    # Keys of a read result whose dates are the resource's schedule (not birth, creation or
    # update stamps).
    schedule_key_pattern: str = SCHEDULE_KEY
    # A user turn asking for such a thing (after which an offer is an answer).
    offer_request_pattern: str = OFFER_REQUEST
    # Instructions allowing a kind of change only within a time of the resource's creation
    # ("can be cancelled within 24 hours of booking"; groups `verb`, held by the tool names of
    # such changes, `amount` and `unit`); "" turns the `change_outside_window` rule off. It
    # also needs `current_time_pattern`.
    change_window_pattern: str = CHANGE_WINDOW
    # Keys of a read record whose value is the resource's creation stamp.
    creation_key_pattern: str = CREATION_KEY

    def validate(self) -> None:
        """Every value of this section is valid."""
        for name in (
            "confirmation_required_pattern",
            "affirmative_pattern",
            "negative_pattern",
            "escalate_only_pattern",
            "escalation_tool_pattern",
            "escalation_offer_pattern",
            "refusal_pattern",
            "person_request_pattern",
            "no_proactive_offer_pattern",
            "offer_pattern",
            "offer_request_pattern",
            "current_time_pattern",
            "schedule_key_pattern",
            "prerequisite_pattern",
            "detail_value_pattern",
            "detail_reuse_pattern",
            "free_argument_pattern",
            "change_window_pattern",
            "creation_key_pattern",
        ):
            try:
                re.compile(getattr(self, name))
            except re.error as exc:
                raise ValueError(
                    f"detectors.task_specification.{name}: invalid regular expression ({exc})"
                ) from exc
        if self.max_findings_per_run < 0:
            raise ValueError("detectors.task_specification.max_findings_per_run must be >= 0")


class TaskSpecification(Detector):
    mode = "FM-1.1"
    name = "task_specification"
    version = "1.0"
    config: TaskSpecificationConfig

    def __init__(self, config: Any, context: Any) -> None:
        super().__init__(config, context)
        flags = re.IGNORECASE
        c = self.config
        self.confirmation_required = optional(c.confirmation_required_pattern)
        self.affirmative = re.compile(c.affirmative_pattern, flags)
        self.negative = re.compile(c.negative_pattern, flags)
        self.escalate_only = optional(c.escalate_only_pattern)
        self.escalation_tool = re.compile(c.escalation_tool_pattern, flags)
        self.escalation_offer = optional(c.escalation_offer_pattern)
        self.refusal = re.compile(c.refusal_pattern, flags)
        self.person_request = optional(c.person_request_pattern)
        self.no_proactive_offer = optional(c.no_proactive_offer_pattern)
        self.offer = optional(c.offer_pattern)
        self.offer_request = re.compile(c.offer_request_pattern, flags)
        self.prerequisite = optional(c.prerequisite_pattern)
        self.current_time = optional(c.current_time_pattern)
        self.schedule_key = re.compile(c.schedule_key_pattern, flags)
        self.detail_value = optional(c.detail_value_pattern)
        self.detail_reuse = optional(c.detail_reuse_pattern)
        self.free_argument = re.compile(c.free_argument_pattern, flags)
        self.change_window = optional(c.change_window_pattern)
        self.creation_key = re.compile(c.creation_key_pattern, flags)

    def affirms(self, text: str) -> bool:
        """A user turn that agrees to what was proposed."""
        return bool(self.affirmative.search(text)) and not self.negative.search(text)

    def open(self, run: Run) -> DetectorRun:
        return TaskSpecificationRun(self)


FACTORY = DetectorFactory(
    type="task_specification",
    mode="FM-1.1",
    config=TaskSpecificationConfig,
    create=TaskSpecification,
)
