"""FM-1.1's settings: the `detectors.task_specification` section, its defaults (the patterns
the rules read the run's instructions and turns with) and their checks."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mast_otel.processors.detectors.clarification_records import REUSE

# Default patterns of the rules (see TaskSpecificationConfig for what each decides).

# Instructions that require the user's explicit confirmation before a change
# (case-insensitive regular expression over `mast.task.description`); "" turns the
# `change_without_confirmation` rule off.
CONFIRMATION_REQUIRED = (
    r"explicit(ly)?\s+(\w+\s+){0,2}(confirm|confirmation|approv\w*|consent)|"
    r"confirm(ation)?\s+(from the user\s+)?before\s+(taking|making|any|performing|executing)|"
    r"(ask|wait)\s+for\s+(the user'?s?\s+)?(explicit\s+)?(approval|confirmation)\s+before|"
    r"(must|always)\s+(first\s+)?(get|obtain|ask for|request)\s+(the user'?s?\s+)?"
    r"(explicit\s+)?(approval|confirmation|consent)"
)

# A user turn that agrees to what the agent proposed.
AFFIRMATIVE = (
    r"\b(yes|yeah|yep|yup|confirm(ed)?|go ahead|proceed|approved?|do it|"
    r"(looks|sounds) (good|right|correct|fine)|that'?s (right|correct|fine))\b"
)

# A user turn that holds back ("no", "wait", "don't"): not an agreement even with a "yes"
# further on ("no, I don't confirm").
NEGATIVE = (
    r"^\W*(no|nope|not yet|wait|hold on|stop)\b|\b(do not|don'?t) (proceed|go ahead|do it|"
    r"confirm)\b"
)

# Instructions that allow escalating to a person only when a request cannot be handled;
# "" turns the `escalation_after_refusal` rule off.
ESCALATE_ONLY = (
    r"(transfer|escalat|hand\s*off|hand\s+over)\w*[^.\n]{0,120}\b(if and only if|only if|"
    r"only when|only in case)\b"
)

# Tool names of an escalation to a person, besides the calls the classifier calls
# escalations.
ESCALATION_TOOL = (
    r"(transfer|escalat|handoff|hand_off|route)\w*(human|person|operator|live|supervisor|"
    r"representative|staff)|(human|person|operator)\w*(transfer|escalat|handoff)"
)

# The agent offering to escalate to a person in its words; "" turns the offer rule off.
ESCALATION_OFFER = (
    r"\b(transfer|escalate|connect|hand)\w*\s+(you|this|your (request|case|issue))\s+"
    r"(over\s+)?(to|with)\s+(a|an|our)\s+(human|live|real|person|supervisor|"
    r"representative|specialist)"
)

# Instructions stating the current time (its first ISO date is the current day); "" turns
# the `change_to_past_resource` rule off.
CURRENT_TIME = r"\b(current|today'?s?)\s+(date|time|day)\b[^.\n]{0,40}?\d{4}-\d{2}-\d{2}"

# Keys of a read result whose dates are the resource's schedule (not birth, creation or
# update stamps).
SCHEDULE_KEY = (
    r"^(?!.*(birth|dob|creat|updat|modif|expir|issued|paid|purchas))"
    r"(date|\w+_date|start\w*|end\w*|scheduled\w*|depart\w*|arriv\w*|due\w*)$"
)

# A user turn asking to be put through to a person.
PERSON_REQUEST = (
    r"\b(supervisor|manager|human|(real|live) person|representative|someone (else|above))\b|"
    r"\b(speak|talk)\s+(to|with)\s+(someone|somebody|a person)\b"
)

# The agent telling the user a request is not allowed (its own refusal, by policy).
REFUSAL = (
    r"\b(i(?:'m| am) (unable|not able) to (cancel|change|modify|process|remove|refund|"
    r"issue|update|offer|grant|approve|do)|i can(not|'t|not) (cancel|change|modify|process|"
    r"remove|refund|issue|update|offer|grant|approve)|(cannot|can't|can not) be (cancel\w*|"
    r"added|changed|modified|refunded|removed|processed|updated)|(is|are) not (eligible|allowed|"
    r"permitted)|(isn't|aren't) (eligible|allowed|permitted)|(does not|doesn't) cover|"
    r"not (allowed|permitted) (by|under|according to)|against (the |our )?polic\w*|"
    r"polic(y|ies) (does not|doesn't|do not|don't) (allow|permit)|"
    r"i (can|am able to) only [^.!?\n]{0,80}\bnot\b)"
)

# Instructions that forbid offering something unless the user asks for it; "" turns the
# `offer_before_request` rule off.
NO_PROACTIVE_OFFER = (
    r"\b(do not|don't|never|should not|must not)\s+(proactively|voluntarily|"
    r"pre-?emptively)\s+(offer|suggest|propose|give|mention)|\b(offer|give)\w*\s[^.\n]{0,80}"
    r"\bonly\s+(if|when)\s+(the\s+)?(user|customer|client|patient|caller)s?\s+"
    r"(explicitly\s+)?(asks?|requests?)"
)

# Instructions listing what the agent must obtain before a kind of change ("must first
# obtain the user id and the reason for cancellation"); "" turns the
# `change_before_prerequisites` rule off. The group `items` holds the list.
PREREQUISITE = (
    r"\bmust\s+first\s+(?:obtain|collect|get|gather|ask\s+for|request)\s+(?P<items>[^.;\n]+)"
)

# The agent offering such a thing in its words to the user (not when negated: "I cannot
# offer ...").
OFFER = (
    r"\b(offer|issu|provid|giv|grant|receiv|eligible\s+for)\w*\s+(you\s+)?((a|an|the|some)\s+)?"
    r"(\$\s?\d[\d,.]*\s+)?([\w-]+\s+){0,2}(certificate|voucher|coupon|credit(?!\s*card)|"
    r"discount|compensation|goodwill|gesture)s?\b"
)

# A user turn asking for such a thing (after which an offer is an answer).
OFFER_REQUEST = (
    r"\b(compensat\w*|certificates?|vouchers?|coupons?|credit(?!\s*card)|discounts?|"
    r"reimburs\w*|refund\w*|money back|make (it|this|that) up|goodwill|gesture)\b"
)

# Instructions allowing a kind of change only within a time of the resource's creation ("can
# be cancelled within 24 hours of booking"); "" turns the `change_outside_window` rule off.
# Groups: `verb` (held by the tool names of such changes), `amount` and `unit`.
CHANGE_WINDOW = (
    r"\b(?:can|may)\s+(?:only\s+)?be\s+(?P<verb>cancel|refund|return|modif|chang|amend|delet)"
    r"\w*\s+(?:\w+\s+){0,3}?within\s+(?P<amount>\d+)\s+(?P<unit>hours?|days?)\s+(?:of|after)\s+"
    r"(?:the\s+)?(?:booking|purchase|order\w*|creation|reservation|sign-?up|placement|delivery)"
)

# Keys of a record whose value is its creation stamp.
CREATION_KEY = (
    r"^(?:created|creation|booked|purchased|ordered|placed|opened)(?:_?(?:at|on|date|time))?$|"
    r"^(?:creation|booking|purchase|order)_(?:date|time)$"
)


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
