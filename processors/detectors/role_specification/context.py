"""What FM-1.2's rules read: the section, the classifier, the read-only agent names compiled
once, and how a finding is worded."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mast_otel.processors.classify import ActionClassifier
from mast_otel.processors.detectors.base import DetectorContext, Reporter
from mast_otel.processors.detectors.role_specification.config import RoleSpecificationConfig


@dataclass(frozen=True, slots=True)
class RoleSpecificationContext:
    """Made once per detector and shared by the state of every run."""

    config: RoleSpecificationConfig
    classifier: ActionClassifier
    # `read_only_agents`, compiled (case-insensitive).
    read_only_names: tuple[re.Pattern[str], ...]
    report: Reporter


def build_context(
    config: RoleSpecificationConfig, context: DetectorContext, report: Reporter
) -> RoleSpecificationContext:
    """The context of a detector created with `config` in `context`."""
    return RoleSpecificationContext(
        config=config,
        classifier=context.classifier,
        read_only_names=tuple(re.compile(p, re.IGNORECASE) for p in config.read_only_agents),
        report=report,
    )
