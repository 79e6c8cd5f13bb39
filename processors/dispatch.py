"""Between a run and its detectors: which detectors each step goes to, which act at the close,
and the run-level context stamped on what they find.

The plans are computed once per set of detector classes (the same for every run of one factory)
and read for every step, so a step is handed only to the detectors that take its kind.
"""

from __future__ import annotations

from collections.abc import Iterable

from mast_otel.processors.model import Finding, StepKind
from mast_otel.processors.run import DetectorRun, DispatchPlan, Run, most_common


def dispatch_plan(detectors: Iterable[DetectorRun]) -> DispatchPlan:
    """Which detectors each kind of step goes to, in the detectors' order."""
    listed = list(detectors)
    return {
        kind: tuple(i for i, d in enumerate(listed) if d.kinds is None or kind in d.kinds)
        for kind in StepKind
    }


def closing_plan(detectors: Iterable[DetectorRun]) -> tuple[int, ...]:
    """The positions of the detectors that decide anything when a run closes."""
    return tuple(i for i, d in enumerate(detectors) if type(d).on_close is not DetectorRun.on_close)


def stamp_findings(run: Run, findings: Iterable[Finding]) -> list[Finding]:
    """Fill in the run-level context of findings and keep them for the signature."""
    stamped = []
    for finding in findings:
        if not finding.service:
            finding.service = most_common(run.services)
        if not finding.model:
            finding.model = most_common(run.models)
        if not finding.agent:
            finding.agent = most_common(run.agents)
        run.mode_counts[finding.mode] += 1
        run.trail.on_finding(finding)
        stamped.append(finding)
    return stamped
