"""FM-2.6 reasoning-action mismatch: what its rules read, built once per detector.

The config, the classifier and the signals the detectors share, the reporter that words the
findings, and what each rule compiles from the config (its patterns and word lists): a rule is
given this context, never the detector, and its per-run state keeps the part it reads."""

from __future__ import annotations

import re
from dataclasses import dataclass, fields

from mast_otel.processors.classify import ActionClassifier
from mast_otel.processors.detectors.base import DetectorContext, Reporter
from mast_otel.processors.detectors.reasoning_action.config import ReasoningActionConfig
from mast_otel.processors.detectors.reasoning_action.inability import InabilityRules
from mast_otel.processors.detectors.reasoning_action.observations import ObservationTerms
from mast_otel.processors.detectors.signals import Signals

# Every match of the default `claimed_action_pattern` holds one of its verbs (the same
# letters, under the same IGNORECASE): a model output with none skips that pattern, whose
# leading words are tried at every position. A configured pattern always runs.
_DEFAULT_VERBS = re.compile(
    r"added|removed|cancel|booked|sent|issued|deleted|created|closed|restarted|deployed|"
    r"merged|submitted|scheduled|assigned|waived",
    re.IGNORECASE,
)


class AmountRules:
    """`unsupported_value` and `unsupported_operand`: their patterns, compiled once per
    detector."""

    def __init__(self, config: ReasoningActionConfig) -> None:
        self.config = config
        self.value = (
            re.compile(config.value_pattern, re.IGNORECASE) if config.value_pattern else None
        )
        self.expression = (
            re.compile(config.expression_pattern) if config.expression_pattern else None
        )


class ClaimRules:
    """`claimed_unperformed_action`: its patterns and words, compiled once per detector."""

    def __init__(self, config: ReasoningActionConfig) -> None:
        self.claimed = (
            re.compile(config.claimed_action_pattern, re.IGNORECASE)
            if config.claimed_action_pattern
            else None
        )
        default = next(f.default for f in fields(config) if f.name == "claimed_action_pattern")
        self.verbs = _DEFAULT_VERBS if config.claimed_action_pattern == default else None
        self.stopwords = frozenset(w.lower() for w in config.claim_stopwords)
        self.condition = re.compile(config.claim_condition_pattern, re.IGNORECASE)
        self.modal = re.compile(config.claim_modal_pattern, re.IGNORECASE)


class ReportRules:
    """`report_contradicts_result`: its patterns, compiled once per detector, and the
    classifier that finds the record a call asked for."""

    def __init__(self, config: ReasoningActionConfig, classifier: ActionClassifier) -> None:
        self.config = config
        self.classifier = classifier
        self.value = (
            re.compile(config.value_pattern, re.IGNORECASE) if config.value_pattern else None
        )
        self.charge = (
            re.compile(config.charge_statement_pattern, re.IGNORECASE)
            if config.charge_statement_pattern and self.value is not None
            else None
        )


class FieldRules:
    """`report_contradicts_change`: its pattern, compiled once per detector."""

    def __init__(self, config: ReasoningActionConfig) -> None:
        self.config = config
        self.changed_to = (
            re.compile(config.changed_to_pattern, re.IGNORECASE)
            if config.changed_to_pattern
            else None
        )


class SignRules:
    """`refund_told_as_charge`: its patterns, compiled once per detector."""

    def __init__(self, config: ReasoningActionConfig) -> None:
        on = bool(config.user_pays_pattern and config.value_pattern)
        self.pays = re.compile(config.user_pays_pattern, re.IGNORECASE) if on else None
        self.back = re.compile(config.money_back_pattern or r"(?!)", re.IGNORECASE)
        self.value = re.compile(config.value_pattern, re.IGNORECASE) if on else None


class CalculationRules:
    """`told_other_than_calculated`: its patterns, compiled once per detector."""

    def __init__(self, config: ReasoningActionConfig) -> None:
        on = bool(config.check_calculations and config.expression_pattern and config.value_pattern)
        self.expression = re.compile(config.expression_pattern) if on else None
        self.value = re.compile(config.value_pattern, re.IGNORECASE) if on else None
        self.small = config.small_integer_max


class ErrorFigureRules:
    """`told_other_than_error_figure`: its patterns, compiled once per detector."""

    def __init__(self, config: ReasoningActionConfig) -> None:
        on = bool(config.error_figure_pattern and config.value_pattern)
        self.figure = re.compile(config.error_figure_pattern, re.IGNORECASE) if on else None
        self.value = re.compile(config.value_pattern, re.IGNORECASE) if on else None


@dataclass(frozen=True, slots=True)
class ReasoningActionContext:
    """What FM-2.6's rules read: the config, the shared services, the findings' reporter, and
    each rule's compiled patterns (a rule whose pattern is "" holds None and stays silent)."""

    config: ReasoningActionConfig
    classifier: ActionClassifier
    signals: Signals
    report: Reporter
    # `unsupported_observation`: the observation terms and which of them a text states.
    observations: ObservationTerms
    # `verb_mismatch`: the verbs of tool names that change something (the classifier's).
    change_verbs: frozenset[str]
    amounts: AmountRules
    claims: ClaimRules
    reports: ReportRules
    fields: FieldRules
    inability: InabilityRules
    sign: SignRules
    calculation: CalculationRules
    error_figure: ErrorFigureRules


def reasoning_context(
    config: ReasoningActionConfig, context: DetectorContext, report: Reporter
) -> ReasoningActionContext:
    """The context of a detector created with `config` in `context`, its findings worded by
    `report`."""
    classifier = context.classifier
    return ReasoningActionContext(
        config=config,
        classifier=classifier,
        signals=context.signals,
        report=report,
        observations=ObservationTerms(config.observation_terms),
        change_verbs=frozenset(v.lower() for v in classifier.config.mutating_verbs),
        amounts=AmountRules(config),
        claims=ClaimRules(config),
        reports=ReportRules(config, classifier),
        fields=FieldRules(config),
        inability=InabilityRules(config.inability_pattern, config.claim_stopwords),
        sign=SignRules(config),
        calculation=CalculationRules(config),
        error_figure=ErrorFigureRules(config),
    )
