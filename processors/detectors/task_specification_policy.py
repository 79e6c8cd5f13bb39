"""FM-1.1's policy: what a run's own `mast.task.*` attributes (over the configured defaults)
allow, what one call breaks in it, and the default patterns the conversation rules read the
run's instructions and turns with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mast_otel.processors import conventions
from mast_otel.processors.detectors.base import short

if TYPE_CHECKING:
    from mast_otel.processors.detectors.task_specification import TaskSpecificationConfig


@dataclass(slots=True)
class Policy:
    allowed_tools: frozenset[str] | None
    read_only: bool
    max_steps: int
    max_seconds: float
    max_tokens: int


def task_policy(config: TaskSpecificationConfig, attributes: dict[str, Any]) -> Policy:
    """The run's policy: its own `mast.task.*` attributes over the configured defaults."""
    allowed: Any = attributes.get(conventions.TASK_ALLOWED_TOOLS, config.allowed_tools)
    if isinstance(allowed, str):
        allowed = [t.strip() for t in allowed.split(",")]
    tools = frozenset(str(t) for t in allowed if str(t)) if isinstance(allowed, list) else None
    read_only = attributes.get(conventions.TASK_READ_ONLY, config.read_only)
    max_steps = attributes.get(conventions.TASK_MAX_STEPS, config.max_steps)
    return Policy(
        allowed_tools=tools or None,
        read_only=read_only is True or str(read_only).lower() == "true",
        max_steps=max_steps if isinstance(max_steps, int) and max_steps > 0 else 0,
        max_seconds=config.max_seconds,
        max_tokens=config.max_tokens,
    )


def breaches(
    tool: str, mutating: bool, arguments: str, policy: Policy
) -> list[tuple[str, str, dict[str, Any]]]:
    """The (rule, message, values) of what one call breaks in the run's policy: a tool outside
    its allowed tools, a change in a read-only task."""
    out: list[tuple[str, str, dict[str, Any]]] = []
    if policy.allowed_tools is not None and tool not in policy.allowed_tools:
        allowed = sorted(policy.allowed_tools)
        message = f"{tool} is not among the task's allowed tools"
        out.append(("tool_not_allowed", message, {"tool": tool, "allowed_tools": allowed}))
    if policy.read_only and mutating:
        message = f"{tool}({short(arguments, 120)}) changed the system in a read-only task"
        values = {"tool": tool, "arguments": short(arguments)}
        out.append(("mutation_in_read_only_task", message, values))
    return out


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
