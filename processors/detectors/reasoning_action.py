"""FM-2.6 Reasoning-action mismatch: what the model says and what the agent does disagree.

Rules, comparing a model call's output with what follows it:
- `target_mismatch`: the reasoning right before a tool call names resources, and the call acts
  on others (none of the named ones among its targets);
- `verb_mismatch`: the reasoning says it will only look (check, inspect, describe, ...) and the
  call changes the system;
- `other_tool_executed`: the model asked for one tool and the agent ran another;
- `claims_done_then_acts`: the output says the task is done and, in the same turn, asks for
  more tool calls;
- `unsupported_observation`: the reasoning states an observation (`observation_terms`, such
  as CrashLoopBackOff or OOMKilled) that no tool result so far has shown;
- `announced_then_stopped`: the run's last model output announces a tool call ("I will run
  ...") and asks for none, and nothing follows.

Rules of their own modules, run from here: `unsupported_value` and `unsupported_operand`
(reasoning_amounts.py), `claimed_unperformed_action` (reasoning_claims.py),
`report_contradicts_result` (reasoning_report.py), `report_contradicts_change`
(reasoning_fields.py), `call_differs_from_announced` (reasoning_promise.py).
Settings: reasoning_config.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory, short
from mast_otel.processors.detectors.reasoning_amounts import AmountRules, Amounts
from mast_otel.processors.detectors.reasoning_claims import ClaimRules, Claims
from mast_otel.processors.detectors.reasoning_common import SENTENCE
from mast_otel.processors.detectors.reasoning_config import ReasoningActionConfig
from mast_otel.processors.detectors.reasoning_fields import FieldRules, Fields
from mast_otel.processors.detectors.reasoning_promise import Promises
from mast_otel.processors.detectors.reasoning_report import ReportRules, Reports
from mast_otel.processors.detectors.signals import words
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import DetectorRun, Run

__all__ = ["FACTORY", "ReasoningAction", "ReasoningActionConfig"]

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_MUTATING = ActionKind.MUTATING
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL
_HUMAN = StepKind.HUMAN

_READ_ONLY_INTENT = re.compile(
    r"\b(check|inspect|look at|describe|view|list|examine|read|investigate|query|verify)\b",
    re.IGNORECASE,
)
_CHANGE_INTENT = re.compile(
    r"\b(restart|delete|scale|patch|apply|roll ?back|rollout|set|increase|raise|update|fix|"
    r"change|modify|remove|kill|drain|cordon|upgrade|edit)\b",
    re.IGNORECASE,
)
_MAX_WORDS = 50_000
_LET_ME_KNOW = re.compile(r"\blet me know\b", re.IGNORECASE)


class ReasoningAction(Detector):
    mode = "FM-2.6"
    name = "reasoning_action"
    version = "1.0"
    config: ReasoningActionConfig

    def __init__(self, config: Any, context: DetectorContext) -> None:
        super().__init__(config, context)
        self.terms = [t.lower() for t in self.config.observation_terms]
        # The terms a text contains, remembered: the same answers and results recur.
        self.terms_in: Callable[[str], frozenset[str]] = lru_cache(maxsize=4096)(self._terms_in)
        self.amounts = AmountRules(self.config)
        self.claims = ClaimRules(self.config)
        self.reports = ReportRules(self.config, self.classifier)
        self.fields = FieldRules(self.config)

    def _terms_in(self, text: str) -> frozenset[str]:
        lowered = text.lower()
        return frozenset(t for t in self.terms if t in lowered)

    def open(self, run: Run) -> DetectorRun:
        return _ReasoningRun(self)


class _ReasoningRun(DetectorRun):
    __slots__ = (
        "amounts",
        "claims",
        "config",
        "detector",
        "fields",
        "findings",
        "names",
        "promises",
        "reasoning",
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
        self.unobserved: list[str] = detector.terms
        self.findings = 0
        self.amounts = Amounts(detector.amounts)
        self.claims = Claims(detector.claims)
        self.reports = Reports(detector.reports)
        self.fields = Fields(detector.fields)
        self.promises = Promises(self.fields)

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
        findings.extend(self._announced(run))
        return findings

    def _announced(self, run: Run) -> Iterable[Finding]:
        last = next((s for s in reversed(run.window) if s.kind in (_LLM, _TOOL, _HUMAN)), None)
        if last is None or last.kind is not _LLM or last.tool_calls:
            return ()  # a user turn after it: the user had the word, the agent did not stop
        text = last.output_text
        # The sentences that announce something ("let me know" asks the user, announces
        # nothing), and the tools or resources of the run they name.
        announcing = [
            sentence
            for sentence in SENTENCE.split(text)
            if self.detector.signals.announce.found(_LET_ME_KNOW.sub("", sentence))
        ]
        if not announcing:
            return ()
        mentioned = words(" ".join(announcing)) & (
            self.names | {s.tool_name.lower() for s in run.window if s.tool_name}
        )
        if not mentioned:
            return ()
        return self._emit(
            last,
            "announced_then_stopped",
            0.65,
            f"the model announced {', '.join(sorted(mentioned))} "
            f"({short(announcing[0].strip(), 120)!r}) and the run ended without it",
            [last],
            {"said": short(text), "named": sorted(mentioned)},
            run,
        )

    def _on_model(self, step: Step, run: Run) -> list[Finding]:
        findings: list[Finding] = []
        text = step.output_text
        findings.extend(self.reports.model(step, run, self._emit))
        findings.extend(self.fields.model(step, run, self._emit))
        self.amounts.model(step, run)
        findings.extend(self.claims.model(step, run, self._emit))
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
            present = self.detector.terms_in(text)
            if present:
                unsupported = [t for t in self.unobserved if t in present]
        if unsupported and not self.detector.signals.negation.found(text):
            findings.extend(
                self._emit(
                    step,
                    "unsupported_observation",
                    0.6,
                    f"the model stated {unsupported[0]}, which no tool result had shown",
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
            findings.extend(self._compare(reasoning, step, action.kind, action.targets, run))
        self.reports.tool(step, action.kind, run)
        findings.extend(self.promises.acted(step, action.kind is _MUTATING, run, self._emit))
        self.fields.tool(step, action.kind is _MUTATING and not step.failed, run)
        if len(self.names) < _MAX_WORDS:
            self.names |= action.targets
        if action.kind is _MUTATING and not step.failed:
            self.claims.changed(step)
        if self.unobserved:
            present = self.detector.terms_in(step.tool_result or step.error)
            if present:
                shown = [t for t in self.unobserved if t in present]
                if shown:
                    self.unobserved = [t for t in self.unobserved if t not in shown]
        return findings

    def _compare(
        self, reasoning: Step, step: Step, kind: ActionKind, targets: frozenset[str], run: Run
    ) -> list[Finding]:
        text = reasoning.output_text
        requested = {c.name for c in reasoning.tool_calls if c.name}
        if requested and step.tool_name not in requested:
            return self._emit(
                step,
                "other_tool_executed",
                0.8,
                f"the model asked for {', '.join(sorted(requested))} and the agent ran "
                f"{step.tool_name}",
                [reasoning, step],
                {"requested": sorted(requested), "executed": step.tool_name},
                run,
            )
        if kind is _MUTATING and _READ_ONLY_INTENT.search(text) and not _CHANGE_INTENT.search(text):
            return self._emit(
                step,
                "verb_mismatch",
                0.8,
                f"the model said it would only look ({short(text, 100)!r}), and "
                f"{step.tool_name}({short(step.tool_arguments, 100)}) changed the system",
                [reasoning, step],
                {"said": short(text), "call": short(step.tool_arguments)},
                run,
            )
        said = words(text) & self.names
        if said and targets and not (targets & said) and not (targets & words(text)):
            return self._emit(
                step,
                "target_mismatch",
                0.75,
                f"the model named {', '.join(sorted(said))} and the call acted on "
                f"{', '.join(sorted(targets))}",
                [reasoning, step],
                {"named": sorted(said), "acted_on": sorted(targets), "said": short(text)},
                run,
            )
        return []

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
