"""FM-2.6 Reasoning-action mismatch: what the model says and what the agent does disagree.

Rules of this module, on a model call's output:
- `claims_done_then_acts`: the output says the task is done and, in the same turn, asks for
  more tool calls;
- `unsupported_observation`: the reasoning states an observation (`observation_terms`, such
  as CrashLoopBackOff or OOMKilled) that no tool result so far has shown.

Rules of their own modules, run from here: `other_tool_executed`, `verb_mismatch`,
`target_mismatch` and `announced_then_stopped` (reasoning_compare.py); `unsupported_value`
and `unsupported_operand` (reasoning_amounts.py); `claimed_unperformed_action`
(reasoning_claims.py); `report_contradicts_result` (reasoning_report.py);
`report_contradicts_change` (reasoning_fields.py); `call_differs_from_announced`
(reasoning_promise.py); `group_told_as_member` (reasoning_groups.py); `inability_then_done`
(reasoning_inability.py); `refund_told_as_charge` (reasoning_sign.py);
`told_other_than_calculated` (reasoning_calculation.py); `told_other_than_error_figure`
(reasoning_error.py). Their settings are this module's config class.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory, short
from mast_otel.processors.detectors.reasoning_amounts import AmountRules, Amounts
from mast_otel.processors.detectors.reasoning_calculation import CalculationRules, Calculations
from mast_otel.processors.detectors.reasoning_claims import CLAIM_STOPWORDS, ClaimRules, Claims
from mast_otel.processors.detectors.reasoning_compare import announced, compare
from mast_otel.processors.detectors.reasoning_error import ErrorFigureRules, ErrorFigures
from mast_otel.processors.detectors.reasoning_fields import FieldRules, Fields
from mast_otel.processors.detectors.reasoning_groups import Groups
from mast_otel.processors.detectors.reasoning_inability import (
    INABILITY_PATTERN,
    Inabilities,
    InabilityRules,
)
from mast_otel.processors.detectors.reasoning_observations import ObservationTerms
from mast_otel.processors.detectors.reasoning_promise import Promises
from mast_otel.processors.detectors.reasoning_report import ReportRules, Reports
from mast_otel.processors.detectors.reasoning_sign import Refunds, SignRules
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_MUTATING = ActionKind.MUTATING
_READ = ActionKind.READ
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL
_HUMAN = StepKind.HUMAN

_MAX_WORDS = 50_000


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


class ReasoningAction(Detector):
    mode = "FM-2.6"
    name = "reasoning_action"
    version = "1.0"
    config: ReasoningActionConfig

    def __init__(self, config: Any, context: DetectorContext) -> None:
        super().__init__(config, context)
        self.observations = ObservationTerms(self.config.observation_terms)
        self.change_verbs = frozenset(v.lower() for v in self.classifier.config.mutating_verbs)
        self.amounts = AmountRules(self.config)
        self.claims = ClaimRules(self.config)
        self.reports = ReportRules(self.config, self.classifier)
        self.fields = FieldRules(self.config)
        self.inability = InabilityRules(self.config.inability_pattern, self.config.claim_stopwords)
        self.sign = SignRules(self.config)
        self.calculation = CalculationRules(self.config)
        self.error_figure = ErrorFigureRules(self.config)

    def open(self, run: Run) -> DetectorRun:
        return _ReasoningRun(self)


class _ReasoningRun(DetectorRun):
    __slots__ = (
        "amounts",
        "calculations",
        "claims",
        "config",
        "detector",
        "errors",
        "fields",
        "findings",
        "groups",
        "inabilities",
        "names",
        "promises",
        "reasoning",
        "refunds",
        "reports",
        "unobserved",
    )

    def __init__(self, detector: ReasoningAction) -> None:
        self.detector = detector
        self.config = detector.config
        # The last model output with tool calls, per agent, and the resources the run has
        # named so far.
        self.reasoning: dict[str, Step] = {}
        self.names: set[str] = set()
        # Observation terms no tool result has shown yet: the detector's own list, shared
        # with the detector until the first one is seen.
        self.unobserved: list[str] = detector.observations.terms
        self.findings = 0
        self.amounts = Amounts(detector.amounts)
        self.claims = Claims(detector.claims)
        self.reports = Reports(detector.reports)
        self.fields = Fields(detector.fields)
        self.promises = Promises(self.fields)
        self.groups = Groups(detector.amounts.value)
        self.inabilities = Inabilities(detector.inability)
        self.refunds = Refunds(detector.sign)
        self.calculations = Calculations(detector.calculation)
        self.errors = ErrorFigures(detector.error_figure)

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        if step.kind is _LLM:
            self.amounts.user(step.input_text)
            self.promises.said(step, run)
            return self._on_model(step, run)
        if step.kind is _TOOL and step.tool_name:
            self.amounts.tool(step, run)
            return self._on_tool(step, run)
        if step.kind is _HUMAN:
            self.promises.said(step, run)
            self.amounts.user(step.input_text or step.output_text)
        return ()

    def on_close(self, run: Run) -> Iterable[Finding]:
        findings = self.amounts.close(run, self._emit)
        findings.extend(announced(run, self.names, self.detector.signals, self._emit))
        return findings

    def _on_model(self, step: Step, run: Run) -> list[Finding]:
        findings: list[Finding] = []
        text = step.output_text
        findings.extend(self.reports.model(step, run, self._emit))
        findings.extend(self.refunds.model(step, run, self._emit))
        findings.extend(self.calculations.model(step, run, self._emit))
        findings.extend(self.errors.model(step, run, self._emit))
        findings.extend(self.fields.model(step, run, self._emit))
        findings.extend(self.groups.model(step, run, self._emit))
        self.amounts.model(step, run)
        findings.extend(self.claims.model(step, run, self._emit))
        self.inabilities.model(step, run)
        if step.tool_calls:
            self.reasoning[step.agent] = step
            if self.detector.signals.claims_success(text):
                findings.extend(
                    self._emit(
                        step,
                        "claims_done_then_acts",
                        0.75,
                        f"the model said the task is done ({short(text, 100)!r}) and asked for "
                        f"more tool calls: {', '.join(c.name for c in step.tool_calls)}",
                        [step],
                        {"said": short(text), "calls": [c.name for c in step.tool_calls]},
                        run,
                    )
                )
        else:
            self.reasoning.pop(step.agent, None)
        unsupported = []
        if self.unobserved:
            present = self.detector.observations.found(text)
            if present:
                unsupported = [t for t in self.unobserved if t in present]
        if unsupported and not self.detector.signals.negation.found(text):
            findings.extend(
                self._emit(
                    step,
                    "unsupported_observation",
                    0.6,
                    f"the model stated {self.detector.observations.wording(unsupported[0], text)}, "
                    "which no tool result had shown",
                    [step],
                    {"said": short(text), "unsupported": unsupported},
                    run,
                )
            )
        return findings

    def _on_tool(self, step: Step, run: Run) -> list[Finding]:
        action = self.detector.classifier.classify(step.tool_name, step.tool_arguments)
        reasoning = self.reasoning.pop(step.agent, None)
        findings: list[Finding] = []
        if reasoning is not None:
            findings.extend(
                compare(
                    reasoning,
                    step,
                    action.kind,
                    action.targets,
                    self.names,
                    run,
                    self._emit,
                    self.detector.change_verbs,
                )
            )
        self.refunds.tool(step, run, self.reports.tool(step, action.kind, run))
        self.groups.tool(step)
        self.calculations.tool(step, run)
        self.errors.tool(step, run)
        acts = action.kind is _MUTATING or action.kind is _READ
        findings.extend(self.inabilities.tool(step, acts, run, self._emit))
        findings.extend(self.promises.acted(step, action.kind is _MUTATING, run, self._emit))
        self.fields.tool(step, action.kind is _MUTATING and not step.failed, run)
        if len(self.names) < _MAX_WORDS:
            self.names |= action.targets
        if action.kind is _MUTATING and not step.failed:
            self.claims.changed(step)
        if self.unobserved:
            present = self.detector.observations.found(step.tool_result or step.error)
            if present:
                shown = [t for t in self.unobserved if t in present]
                if shown:
                    self.unobserved = [t for t in self.unobserved if t not in shown]
        return findings

    def _emit(
        self,
        at: Step | StepRef,
        rule: str,
        confidence: float,
        message: str,
        evidence: list[Step | StepRef],
        values: dict[str, object],
        run: Run,
    ) -> list[Finding]:
        if self.findings >= self.config.max_findings_per_run:
            return []
        self.findings += 1
        return [self.detector.finding(at, rule, confidence, message, evidence, dict(values), run)]


FACTORY = DetectorFactory(
    type="reasoning_action", mode="FM-2.6", config=ReasoningActionConfig, create=ReasoningAction
)
