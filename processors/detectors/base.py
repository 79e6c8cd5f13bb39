"""What every detector shares: its identity, how it opens per-run state, how it words a
finding and what the failing stretch cost."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from processors.classify import ActionClassifier
from processors.detectors.signals import Signals
from processors.model import KIND_LLM, KIND_TOOL, Cost, Finding, Step, StepRef
from processors.run import DetectorRun, Run


class Detector(ABC):
    """One failure mode's detector. Subclasses set `mode`, `name` and `version` and return
    fresh per-run state from `open`; the state sees each step as it is released (`on_step`)
    and the run as it closes (`on_close`)."""

    mode: ClassVar[str]
    name: ClassVar[str]
    version: ClassVar[str]

    def __init__(self, config: Any, classifier: ActionClassifier, signals: Signals) -> None:
        self.config = config
        self.classifier = classifier
        self.signals = signals

    @abstractmethod
    def open(self, run: Run) -> DetectorRun: ...

    def finding(
        self,
        at: Step | StepRef,
        rule: str,
        confidence: float,
        message: str,
        evidence: Sequence[Step | StepRef],
        values: dict[str, Any],
        run: Run,
    ) -> Finding:
        """A finding shown at step `at`, supported by the `evidence` steps (the steps
        themselves, or the digests a detector kept of them)."""
        evidence_ids = tuple(dict.fromkeys(s.span_id for s in evidence))
        return Finding(
            trace_id=run.trace_id,
            span_id=at.span_id,
            mode=self.mode,
            detector=self.name,
            detector_version=self.version,
            rule=rule,
            confidence=confidence,
            message=message,
            evidence_span_ids=evidence_ids,
            evidence={"rule": rule, **values},
            time_ns=at.start_ns,
            cost=stretch_cost(run, evidence),
            service=at.service,
            agent=at.agent,
            model=at.model,
        )


def stretch_cost(run: Run, evidence: Sequence[Step | StepRef]) -> Cost:
    """What the run spent from the first to the last evidence step: wall time, and the model
    and tool calls and tokens of the steps still in the window over that stretch."""
    if not evidence:
        return Cost()
    first = min(s.start_ns for s in evidence)
    last = max(s.end_ns for s in evidence)
    cost = Cost(seconds=max(0, last - first) / 1e9)
    for step in run.window:
        if step.start_ns < first or step.end_ns > last:
            continue
        if step.kind is KIND_LLM:
            cost.llm_calls += 1
            cost.input_tokens += step.input_tokens or 0
            cost.output_tokens += step.output_tokens or 0
        elif step.kind is KIND_TOOL:
            cost.tool_calls += 1
    return cost


def short(text: str, limit: int = 160) -> str:
    """Text cut for a message or evidence value."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
