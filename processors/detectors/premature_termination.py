"""FM-3.1 Premature termination: the run stops before the task is done.

Decided when the run closes:
- `after_failed_call`: the run's last tool call failed and nothing after it recovered (no
  successful tool call followed), and no user turn came after it (a user told of the failure
  who ends the conversation made that choice);
- `pending_steps`: the final answer itself says work remains (`signals.pending_pattern`:
  "next steps:", "still need to", "not yet verified", ...);
- `no_deliverable`: the task requires a deliverable (`required_final_pattern`, e.g. "root
  cause") and the final answer does not contain it;
- `empty_answer`: the run ended on a model response with neither text nor a tool call;
- `announced_only`: the run ended on a bare announcement of what the agent would do next
  ("I will now check the logs.", "Let me look into it."), with no call after it;
- `reprompted`: the agent gave an empty answer and went on only because a user turn that
  only re-prompts (`reprompt_pattern`: "continue", "please answer", an empty message: a
  harness) asked again;
- `no_tool_call`: the run ended after `min_answers_without_tools` answers without a single
  tool call: the request was answered from words alone, never acted on or looked up; a run
  whose agent handed work to another (a hand-off the instrumentation sent) acted through it;
- `parked_on_user`: the run changed nothing (no successful mutating call) and its final
  answer leaves the request waiting until the user comes back with something
  (`deferral_pattern`: "once you have the reservation ID", "whenever you have the order
  number", "once you provide these details"): the agent stopped instead of finding it.

Decided as the run goes:
- `refused_what_tools_return`: the agent told the user it cannot look up or give a thing
  (`refusal_pattern`: "I'm unable to provide information about your gift card balances"),
  and a later successful call returned it (its result names at least half of the thing's
  words, read as FM-2.6's `inability_then_done` reads them): it gave up on a request its
  tools serve. Refusing a way of looking ("using just the user ID") is no giving up.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory, short
from mast_otel.processors.detectors.reasoning_action.config import (
    CLAIM_STOPWORDS,
    INABILITY_PATTERN,
)
from mast_otel.processors.detectors.reasoning_action.inability import (
    Belied,
    Inabilities,
    InabilityRules,
)
from mast_otel.processors.detectors.signals import is_final_answer
from mast_otel.processors.model import Finding, Step, StepKind
from mast_otel.processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL
_HUMAN = StepKind.HUMAN
_HANDOFF = StepKind.HANDOFF
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass
class PrematureTerminationConfig:
    """FM-3.1 premature termination: the run ends after a failure, with work announced, or without
    its deliverable."""

    # Run this detector.
    enabled: bool = True
    # When set, a run whose final answer does not match this is missing its deliverable
    # (for example "root cause" for incident triage).
    required_final_pattern: str = ""
    # The last sentence of a final answer that only announces a next step (case-insensitive).
    announcement_pattern: str = (
        r"^(?:ok(?:ay)?[,.!]?\s+|now,?\s+|next,?\s+)?(?:I will|I'll|I am going to|I'm going to|"
        r"let me|allow me to|I need to|I should)\b"
        r"(?!\s+(?:know|be (?:here|happy|glad|available))\b)"
    )
    # A user turn that only re-prompts the agent (a harness asking again); empty counts too.
    reprompt_pattern: str = (
        r"^\W*(?:(?:please\s+)?(?:continue|go on|keep going|proceed|answer|respond|reply|"
        r"try again|finish|complete the task)(?:\s+please)?)?\W*$"
    )
    # Answers (model responses without a call) in a run that never called a tool before it
    # counts as never acted on; 0 turns the rule off.
    min_answers_without_tools: int = 1
    # `parked_on_user`: a final answer waiting for the user to bring something back ("" turns
    # the rule off; "if you have any questions", "when you have time" wait for nothing).
    deferral_pattern: str = (
        r"\b(?:once|when|whenever|as soon as) you(?:'ve)? (?:have|find|locate|get|gather|obtain|"
        r"retrieve|provide|share|send|are ready with|have (?:located|found|gathered))\b"
        r"(?!\s+(?:any|more|further|other|additional|some|time|a (?:moment|chance|minute)|"
        r"questions)\b)"
    )

    # `refused_what_tools_return`: the agent says it cannot look up or give a thing (group
    # `object`); a later result naming it shows its tools serve it. "" turns the rule off.
    refusal_pattern: str = INABILITY_PATTERN

    def validate(self) -> None:
        for key in (
            "refusal_pattern",
            "required_final_pattern",
            "announcement_pattern",
            "reprompt_pattern",
            "deferral_pattern",
        ):
            try:
                re.compile(getattr(self, key))
            except re.error as exc:
                raise ValueError(
                    f"detectors.premature_termination.{key}: invalid regular expression ({exc})"
                ) from exc
        if self.min_answers_without_tools < 0:
            raise ValueError(
                "detectors.premature_termination.min_answers_without_tools must be >= 0"
            )


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
        self.announcement = re.compile(self.config.announcement_pattern, re.IGNORECASE)
        self.reprompt = re.compile(self.config.reprompt_pattern, re.IGNORECASE)
        self.deferral = (
            re.compile(self.config.deferral_pattern, re.IGNORECASE)
            if self.config.deferral_pattern
            else None
        )
        self.refusal = InabilityRules(self.config.refusal_pattern, CLAIM_STOPWORDS, thing_only=True)

    def open(self, run: Run) -> DetectorRun:
        return _PrematureRun(self)


class _PrematureRun(DetectorRun):
    __slots__ = (
        "answers",
        "calls",
        "changed",
        "config",
        "content_seen",
        "delegated",
        "detector",
        "empty",
        "first_answer",
        "human_after_tool",
        "last_model",
        "last_tool",
        "refusals",
        "reprompt",
        "required",
    )
    kinds = frozenset({StepKind.LLM, StepKind.TOOL, StepKind.HUMAN, StepKind.HANDOFF})

    def __init__(self, detector: PrematureTermination) -> None:
        self.detector = detector
        self.config = detector.config
        self.required = detector.required
        self.last_tool: Step | None = None
        self.last_model: Step | None = None
        # The last model response, if it was empty (no text, no call), until something follows.
        self.empty: Step | None = None
        # The first re-prompt after an empty answer: (the empty answer, the re-prompt).
        self.reprompt: tuple[Step, Step] | None = None
        self.answers = 0
        self.calls = 0
        # Some model response of the run carried text or calls: its content is recorded (an
        # instrumentation that does not capture content leaves every response blank).
        self.content_seen = False
        self.first_answer: Step | None = None
        # Work was handed to another agent (an explicit hand-off span or transfer call).
        self.delegated = False
        self.human_after_tool = False
        # A successful change was made: the request was acted on.
        self.changed = False
        # What the agent said it cannot look up or give, until a result shows it could.
        self.refusals = Inabilities(detector.refusal)

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        if step.kind is _TOOL and step.tool_name:
            self.last_tool = step
            self.calls += 1
            self.empty = None
            self.human_after_tool = False
            if step.failed or (self.changed and not self.refusals.pending):
                return ()
            action = self.detector.classifier.classify(step.tool_name, step.tool_arguments)
            self.changed = self.changed or action.kind is ActionKind.MUTATING
            acts = action.kind is ActionKind.MUTATING or action.kind is ActionKind.READ
            return [self._refused(b, run) for b in self.refusals.belied(step, acts)]
        elif step.kind is _LLM:
            self.refusals.model(step, run)
            self.last_model = step
            blank = _blank(step)
            self.content_seen = self.content_seen or bool(
                step.output_text.strip() or step.tool_calls
            )
            self.empty = step if blank and self.content_seen else None
            if not step.tool_calls and not blank:
                self.answers += 1
                if self.first_answer is None and self.calls == 0:
                    self.first_answer = step
        elif step.kind is _HANDOFF:
            self.delegated = self.delegated or bool(step.operation or step.tool_name)
        elif step.kind is _HUMAN:
            self.human_after_tool = self.human_after_tool or bool(step.input_text.strip())
            if (
                self.empty is not None
                and self.reprompt is None
                and self.detector.reprompt.search(step.input_text.strip()[:200])
            ):
                self.reprompt = (self.empty, step)
            self.empty = None
        return ()

    def _refused(self, belied: Belied, run: Run) -> Finding:
        return self.detector.finding(
            at=belied.where,
            rule="refused_what_tools_return",
            confidence=0.65,
            message=(
                f"the agent told the user {belied.said!r}, yet {belied.call} returned it (its "
                f"result names {', '.join(belied.shown)}): it gave up on a request its tools "
                f"serve"
            ),
            evidence=[belied.where, belied.step],
            values={"said": belied.said, "call": belied.call, "named": belied.shown},
            run=run,
        )

    def on_close(self, run: Run) -> Iterable[Finding]:
        findings = list(self._ending(run))
        if self.reprompt is not None:
            empty, prompt = self.reprompt
            findings.append(
                self.detector.finding(
                    at=prompt,
                    rule="reprompted",
                    confidence=0.7,
                    message=(
                        f"the agent gave an empty answer and went on only after a re-prompt "
                        f"({short(prompt.input_text, 40) or 'an empty message'!r})"
                    ),
                    evidence=[empty, prompt],
                    values={"reprompt": short(prompt.input_text, 200)},
                    run=run,
                )
            )
        return findings

    def _ending(self, run: Run) -> Iterable[Finding]:
        tool, model = self.last_tool, self.last_model
        final = model if model is not None and is_final_answer(model, run) else None
        ended_on_model = model is not None and (tool is None or model.start_ns >= tool.start_ns)
        if ended_on_model and model is not None and self.content_seen and _blank(model):
            return [
                self.detector.finding(
                    at=model,
                    rule="empty_answer",
                    confidence=0.8,
                    message="the run ended on an empty answer: no text and no tool call",
                    evidence=[model],
                    values={"finish_reason": model.finish_reason},
                    run=run,
                )
            ]
        if (
            tool is not None
            and tool.failed
            and not self.human_after_tool
            and (model is None or model.start_ns >= tool.start_ns)
        ):
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
        last_sentence = _last_sentence(final.output_text)
        if self.detector.announcement.search(last_sentence):
            return [
                self.detector.finding(
                    at=final,
                    rule="announced_only",
                    confidence=0.7,
                    message=(
                        f"the run ended on an announcement of a next step it never took: "
                        f"{short(last_sentence, 120)!r}"
                    ),
                    evidence=[final],
                    values={"final_answer": short(final.output_text, 300)},
                    run=run,
                )
            ]
        minimum = self.config.min_answers_without_tools
        first = self.first_answer
        if (
            minimum
            and self.calls == 0
            and not self.delegated
            and self.answers >= minimum
            and first is not None
        ):
            return [
                self.detector.finding(
                    at=first,
                    rule="no_tool_call",
                    confidence=0.6,
                    message=(
                        f"the run ended after {self.answers} answers without a single tool "
                        f"call: the request was never looked up or acted on; first answer: "
                        f"{short(first.output_text, 120)!r}"
                    ),
                    evidence=[first, final],
                    values={
                        "answers": self.answers,
                        "first_answer": short(first.output_text, 300),
                        "final_answer": short(final.output_text, 300),
                    },
                    run=run,
                )
            ]
        deferral = self.detector.deferral
        waits = deferral.search(final.output_text) if deferral and not self.changed else None
        if waits is not None:
            return [
                self.detector.finding(
                    at=final,
                    rule="parked_on_user",
                    confidence=0.65,
                    message=(
                        f"the run changed nothing and ended waiting for the user to come back "
                        f"({short(_sentence_of(final.output_text, waits.start()), 140)!r}) "
                        f"after {self.calls} tool call{'s' if self.calls != 1 else ''}"
                    ),
                    evidence=[final],
                    values={"final_answer": short(final.output_text, 300), "calls": self.calls},
                    run=run,
                )
            ]
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


def _blank(step: Step) -> bool:
    """A model response with no text and no call, that produced no output tokens either (a
    response whose tokens were counted but whose content was not recorded is not blank)."""
    return not step.output_text.strip() and not step.tool_calls and not (step.output_tokens or 0)


def _sentence_of(text: str, at: int) -> str:
    """The sentence of `text` holding the character at `at`."""
    start = max(text.rfind(c, 0, at) for c in ".!?\n") + 1
    ends = [i for i in (text.find(c, at) for c in ".!?\n") if i >= 0]
    return text[start : min(ends) + 1 if ends else len(text)].strip()


def _last_sentence(text: str) -> str:
    sentences = [part.strip() for part in _SENTENCE_END.split(text.strip()) if part.strip()]
    return sentences[-1] if sentences else ""


FACTORY = DetectorFactory(
    type="premature_termination",
    mode="FM-3.1",
    config=PrematureTerminationConfig,
    create=PrematureTermination,
)
