"""FM-2.6 reasoning-action mismatch: its settings, the section `detectors.reasoning_action`.

The defaults of `claim_stopwords` and `inability_pattern` are constants of their own: FM-3.1
reads refusals with the same pattern and words."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

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


# The default of `inability_pattern`: the model says it is not able to look something up
# (the thing in group `object`). ("provide" only of information: "I cannot provide a refund"
# refuses no look-up).
INABILITY_PATTERN = (
    r"(?:(?:\bI(?:'m| am) (?:unable|not able) to|\bI (?:cannot|can't|can not))\s+"
    r"(?:directly\s+)?(?:look up|access|search(?: for)?|retrieve|view|check|"
    r"(?:provide|share|give)(?:\s+you)?(?:\s+with)?"
    r"(?=\s+(?:any\s+|specific\s+|the\s+)?(?:information|details|data)\b))\b"
    r"(?:\s+or\s+\w+)?|\bI (?:don't|do not) have access to)(?P<object>[^.!?\n]*)"
)


@dataclass
class ReasoningActionConfig:
    """FM-2.6 reasoning-action mismatch: the model says one thing and the agent does another."""

    # Run this detector.
    enabled: bool = True
    # Findings reported per run; the rest are not reported.
    max_findings_per_run: int = 5
    # Observations a model may state only if a tool result showed them; `|` separates
    # wordings of one observation (a result showing one supports stating another).
    observation_terms: list[str] = field(
        default_factory=lambda: [
            "CrashLoopBackOff",
            "OOMKilled|out of memory",
            "ImagePullBackOff",
            "ErrImagePull",
            "Evicted",
            "NotReady",
            "connection refused",
            "disk full|no space left on device",
            "certificate expired",
        ]
    )

    # Amounts the model may tell only if a tool result, a user message or the instructions
    # hold them (case-insensitive regular expression; the number is read from the match).
    # "" turns `unsupported_value` off.
    value_pattern: str = (
        r"(?:[$€£]|\b(?:USD|EUR|GBP)\s?)\s?\d[\d,]*(?:\.\d+)?|"
        r"\b\d[\d,]*(?:\.\d+)?\s?(?:USD|EUR|GBP|dollars|euros)\b"
    )
    # A statement that something was done: the verb (group `verb`) and the thing (group
    # `thing`) are compared with the run's successful changes. "" turns the rule off.
    claimed_action_pattern: str = (
        r"(?P<thing>(?:\b\w+\s+){0,3}?\w+)\s+(?:(?:has|have)\s+(?:now\s+)?(?:also\s+)?been\s+"
        r"(?:successfully\s+)?(?P<verb>added|removed|cancell?ed|booked|sent|issued|deleted|"
        r"created|closed|restarted|deployed|merged|submitted|scheduled|assigned|waived)|"
        # a charge let off: "the fee was waived"
        r"(?:was|were)\s+(?P<verb4>waived))\b|"
        r"\bI(?:'ve| have)\s+(?:now\s+)?(?:also\s+)?(?:successfully\s+)?(?P<verb2>added|removed|"
        r"cancell?ed|booked|sent|issued|deleted|created|closed|restarted|deployed|merged|"
        r"submitted|scheduled|assigned)\s+(?P<thing2>(?:\w+\s+){0,3}\w+)|"
        # a list item of a summary: "- **Checked Bag:** 1 checked bag added"
        r"(?m:^\s*(?:[-*•]|\d+[.)])\s+(?:\*\*[^*\n]{1,40}\*\*:?\s*)?"
        r"(?P<thing3>(?:[\w-]+\s+){0,3}?[\w-]+)\s+(?P<verb3>added|removed|cancell?ed|booked|sent|"
        r"issued|deleted|created|closed)(?=\s*(?:[.(,;]|$)))"
    )
    # Words too common to tell one change from another ("your", "the", "reservation" stays).
    claim_stopwords: list[str] = field(default_factory=lambda: list(CLAIM_STOPWORDS))
    # `inability_then_done`: the model says it is not able to look something up (the thing in
    # group `object`); a later result naming it belies that. "" turns the rule off.
    # ("provide" only of information: "I cannot provide a refund" refuses no look-up).
    inability_pattern: str = INABILITY_PATTERN
    # Words before a claim in its sentence that make it no claim ("once they have been added",
    # "if it has been sent", "not yet").
    claim_condition_pattern: str = (
        r"\b(once|if|when|whether|after|before|unless|until|not|never|cannot|can't|no|none)\b"
    )
    # Words in the thing claimed that make it a possibility, not a deed ("bags can be added").
    claim_modal_pattern: str = r"\b(be|to|will|would|can|could|may|might|should|must|being)\b"
    # A sentence telling the user money moved; an amount in it is compared with the numbers
    # of the items a change added to its record. "" turns `report_contradicts_result` off.
    charge_statement_pattern: str = (
        r"\b(charged|processed|paid|billed|debited|deducted|refunded|credited|collected)\b"
    )
    # Records (by id) whose list items are remembered per run for that comparison.
    max_tracked_records: int = 256
    # `refund_told_as_charge`: a sentence telling the user they pay an amount; compared with
    # money going back (a calculation that came out negative, a negative payment line a
    # change added). "" turns the rule off.
    user_pays_pattern: str = (
        r"\b(?:charged|additional (?:cost|charge|fee|payment|amount)|extra (?:cost|charge|fee)|"
        r"costs? (?:you )?an? (?:additional|extra)|you (?:will|'ll) (?:need to )?pay|owe)\b"
    )
    # Words of money going back that make such a sentence no charge ("a credit card" is none).
    money_back_pattern: str = (
        r"\b(?:refund\w*|credit(?!\s+card)\w*|back|returned|reimburs\w*|sav(?:e|es|ed|ing|ings)|"
        r"lower|less|cheaper|reduc\w*|decreas\w*|negative)\b"
    )
    # `report_contradicts_change`: words telling a field took a value ("upgraded to", "set
    # to"); the value after "to" is compared with the field's value in the change's result.
    # "" turns that half of the rule off (the other compares the field's name and value).
    changed_to_pattern: str = (
        r"\b(?:changed|updated|upgraded|downgraded|switched|moved|set|converted|"
        r"promoted|escalated|lowered|raised)\b[^.\n]{0,40}?\bto\s+(?:the\s+|an?\s+)?"
    )
    # Longest string value of a change's field compared with the report (ids and free text
    # are longer).
    max_field_value_length: int = 40
    # Field values remembered per run to know the values a field may take (a bound on
    # memory: past it no more are learnt).
    max_field_values: int = 2048
    # A call argument that is a calculation; "" turns `unsupported_operand` off.
    expression_pattern: str = r"^[\d\s.,+\-*/()%]*\d\s*[+\-*/%]\s*[\d(][\d\s.,+\-*/()%]*$"
    # `told_other_than_error_figure`: a failed call's error stating the figure of a quantity
    # (its words in group `what`, the number in group `value`), compared with the amounts the
    # model tells next in sentences naming that quantity. "" turns the rule off.
    error_figure_pattern: str = (
        r"\b(?P<what>(?:total|amount|price|cost|balance|fare|fee)(?:\s+(?:price|amount|cost|"
        r"due|fare))?)\s+(?:is|was|of|=|:)\s*[$€£]?\s?(?P<value>\d[\d,]*(?:\.\d+)?)"
    )
    # Report a figure told beside a calculation's operands that is not what it returned
    # (`told_other_than_calculated`).
    check_calculations: bool = True
    # Whole numbers up to this may appear in a calculation unsupported (counts, multipliers).
    small_integer_max: int = 12
    # `unsupported_value`: a source (a tool result, a message) with more values than this
    # gives no sums or differences of its pairs.
    max_source_values: int = 64
    # `unsupported_value`: the longest list of records in a result whose length is a count
    # an amount may be a multiple of (two passengers, three flights).
    max_count: int = 9
    # Values remembered per run for `unsupported_value` (a bound on memory: past it the rule
    # stops for the run, counted in the finding-free `values_dropped`).
    max_values_per_run: int = 20_000

    def validate(self) -> None:
        """Every value of this section is valid."""
        for name in (
            "value_pattern",
            "claimed_action_pattern",
            "claim_condition_pattern",
            "claim_modal_pattern",
            "expression_pattern",
            "charge_statement_pattern",
            "user_pays_pattern",
            "money_back_pattern",
            "changed_to_pattern",
            "inability_pattern",
            "error_figure_pattern",
        ):
            try:
                re.compile(getattr(self, name))
            except re.error as exc:
                raise ValueError(
                    f"detectors.reasoning_action.{name}: invalid regular expression ({exc})"
                ) from exc
        if self.error_figure_pattern and not {"what", "value"} <= set(
            re.compile(self.error_figure_pattern).groupindex
        ):
            raise ValueError(
                "detectors.reasoning_action.error_figure_pattern needs the groups `what` "
                "(the quantity's words) and `value` (its figure)"
            )
        if self.max_source_values < 0 or self.max_count < 2:
            raise ValueError(
                "detectors.reasoning_action.max_source_values must be >= 0 and max_count >= 2"
            )
        if self.max_values_per_run < 0:
            raise ValueError("detectors.reasoning_action.max_values_per_run must be >= 0")
        if self.max_field_value_length < 1 or self.max_field_values < 1:
            raise ValueError(
                "detectors.reasoning_action.max_field_value_length and max_field_values "
                "must be >= 1"
            )
        if self.max_tracked_records < 1:
            raise ValueError("detectors.reasoning_action.max_tracked_records must be >= 1")
