"""FM-3.1 Premature termination: the run stops before the task is done.

Decided when the run closes:
- `after_failed_call`: the run's last tool call failed and nothing after it recovered (no
  successful tool call followed);
- `pending_steps`: the final answer itself says work remains (`signals.pending_pattern`:
  "next steps:", "still need to", "not yet verified", ...);
- `no_deliverable`: the task requires a deliverable (`required_final_pattern`, e.g. "root
  cause") and the final answer does not contain it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from processors.detectors.base import Detector, DetectorContext, DetectorFactory, short
from processors.detectors.signals import is_final_answer
from processors.model import Finding, Step, StepKind
from processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL


@dataclass
class PrematureTerminationConfig:
    """FM-3.1 premature termination: the run ends after a failure, with work announced, or without
    its deliverable."""

    # Run this detector.
    enabled: bool = True
    # When set, a run whose final answer does not match this is missing its deliverable
    # (for example "root cause" for incident triage).
    required_final_pattern: str = ""

    def validate(self) -> None:
        if self.required_final_pattern:
            try:
                re.compile(self.required_final_pattern)
            except re.error as exc:
                raise ValueError(
                    f"detectors.premature_termination.required_final_pattern: invalid "
                    f"regular expression ({exc})"
                ) from exc


class PrematureTermination(Detector):
    mode = "FM-3.1"
    name = "premature_termination"
    version = "1.0"
    config: PrematureTerminationConfig

    def __init__(self, config: Any, context: DetectorContext) -> None:
        super().__init__(config, context)
        self.required = (
            re.compile(self.config.required_final_pattern, re.IGNORECASE)
            if self.config.required_final_pattern
            else None
        )

    def open(self, run: Run) -> DetectorRun:
        return _PrematureRun(self)


class _PrematureRun(DetectorRun):
    __slots__ = ("config", "detector", "last_model", "last_tool", "required")
    kinds = frozenset({StepKind.LLM, StepKind.TOOL})

    def __init__(self, detector: PrematureTermination) -> None:
        self.detector = detector
        self.config = detector.config
        self.required = detector.required
        self.last_tool: Step | None = None
        self.last_model: Step | None = None

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        if step.kind is _TOOL and step.tool_name:
            self.last_tool = step
        elif step.kind is _LLM:
            self.last_model = step
        return ()

    def on_close(self, run: Run) -> Iterable[Finding]:
        tool, model = self.last_tool, self.last_model
        final = model if model is not None and is_final_answer(model) else None
        if tool is not None and tool.failed and (model is None or model.start_ns >= tool.start_ns):
            return [
                self.detector.finding(
                    at=tool,
                    rule="after_failed_call",
                    confidence=0.75,
                    message=f"the run ended right after {tool.tool_name} failed, with no recovery",
                    evidence=[tool, *([final] if final else [])],
                    values={"tool": tool.tool_name, "error": short(tool.error or tool.tool_result)},
                    run=run,
                )
            ]
        if final is None or (tool is not None and tool.start_ns > final.start_ns):
            return ()
        if self.detector.signals.pending.found(final.output_text):
            return [
                self.detector.finding(
                    at=final,
                    rule="pending_steps",
                    confidence=0.7,
                    message="the final answer says work remains, and the run ended there",
                    evidence=[final],
                    values={"final_answer": short(final.output_text, 300)},
                    run=run,
                )
            ]
        if self.required is not None and not self.required.search(final.output_text):
            return [
                self.detector.finding(
                    at=final,
                    rule="no_deliverable",
                    confidence=0.7,
                    message="the final answer lacks what the task requires",
                    evidence=[final],
                    values={
                        "final_answer": short(final.output_text, 300),
                        "required": self.config.required_final_pattern,
                    },
                    run=run,
                )
            ]
        return ()


FACTORY = DetectorFactory(
    type="premature_termination",
    mode="FM-3.1",
    config=PrematureTerminationConfig,
    create=PrematureTermination,
)
