"""What FM-1.1's rules read, built once per detector: the section, the classifier, the
patterns the section's settings compile to (None for a pattern set to "", its rule turned off)
and the reporter that words their findings. The rules are given this, never the detector."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mast_otel.processors.classify import ActionClassifier
from mast_otel.processors.detectors.base import DetectorContext, Reporter
from mast_otel.processors.detectors.task_specification.config import TaskSpecificationConfig

Pattern = re.Pattern[str]


def optional(pattern: str) -> Pattern | None:
    """A case-insensitive pattern, or None for "" (its rule turned off)."""
    return re.compile(pattern, re.IGNORECASE) if pattern else None


@dataclass(frozen=True, slots=True)
class TaskSpecificationContext:
    """The section, the classifier, the reporter, and each `<name>_pattern` of the section
    compiled as `<name>`."""

    config: TaskSpecificationConfig
    classifier: ActionClassifier
    report: Reporter
    confirmation_required: Pattern | None
    affirmative: Pattern
    negative: Pattern
    escalate_only: Pattern | None
    escalation_tool: Pattern
    escalation_offer: Pattern | None
    refusal: Pattern
    person_request: Pattern | None
    no_proactive_offer: Pattern | None
    offer: Pattern | None
    offer_request: Pattern
    prerequisite: Pattern | None
    current_time: Pattern | None
    schedule_key: Pattern
    detail_value: Pattern | None
    detail_reuse: Pattern | None
    free_argument: Pattern
    change_window: Pattern | None
    creation_key: Pattern


def task_specification_context(
    config: TaskSpecificationConfig, context: DetectorContext, report: Reporter
) -> TaskSpecificationContext:
    flags = re.IGNORECASE
    c = config
    return TaskSpecificationContext(
        config=config,
        classifier=context.classifier,
        report=report,
        confirmation_required=optional(c.confirmation_required_pattern),
        affirmative=re.compile(c.affirmative_pattern, flags),
        negative=re.compile(c.negative_pattern, flags),
        escalate_only=optional(c.escalate_only_pattern),
        escalation_tool=re.compile(c.escalation_tool_pattern, flags),
        escalation_offer=optional(c.escalation_offer_pattern),
        refusal=re.compile(c.refusal_pattern, flags),
        person_request=optional(c.person_request_pattern),
        no_proactive_offer=optional(c.no_proactive_offer_pattern),
        offer=optional(c.offer_pattern),
        offer_request=re.compile(c.offer_request_pattern, flags),
        prerequisite=optional(c.prerequisite_pattern),
        current_time=optional(c.current_time_pattern),
        schedule_key=re.compile(c.schedule_key_pattern, flags),
        detail_value=optional(c.detail_value_pattern),
        detail_reuse=optional(c.detail_reuse_pattern),
        free_argument=re.compile(c.free_argument_pattern, flags),
        change_window=optional(c.change_window_pattern),
        creation_key=re.compile(c.creation_key_pattern, flags),
    )
