"""FM-1.5 Unaware of termination conditions: the agent does not know when to stop.

Rules:
- `limit_hit`: the run (or one of its agents) ended on a turn, step or time limit: an error
  whose message matches `signals.limit_pattern` (max turns, recursion limit, timeout, ...);
- `past_budget`: the run went on for `steps_past_budget` steps beyond its step budget
  (`mast.task.max_steps`) instead of stopping at it;
- `calls_after_final_answer`: an agent gave its final answer (a model call answering rather
  than calling a tool, with no user turn after it) and then kept calling tools itself; a
  text-only turn the user or another agent answers is a turn of the conversation, not the
  final answer; in a team's run (`signals.is_team`) the final answer is the team's last word
  (TERMINATE, the orchestrator's `FINAL ANSWER:`), and any agent's call after it is reported;
- `calls_after_success`: a check after a change (a read of the changed resource, as FM-3.2
  counts one: `classify.covers`) already showed the resource healthy, and the agent made
  `calls_after_success` more tool calls regardless, before the user spoke again;
- `ended_in_loop`: the run's last `final_loop_length` tool calls were one call repeated with
  the same result: it stopped because something else stopped it, not because it was done;
- `ended_mid_work`: the run's last step is a tool call (not an escalation to a person, not a
  hand-off) with no answer after it, after at least `ended_mid_work_min_calls` tool calls:
  the agent was cut off (a turn limit) while still working, never concluding.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mast_otel.processors import conventions
from mast_otel.processors.classify import ActionKind, Target, checks
from mast_otel.processors.detectors.base import Detector, DetectorFactory, short
from mast_otel.processors.detectors.signals import (
    Health,
    is_final_answer,
    is_team,
    may_be_team,
)
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_MUTATING = ActionKind.MUTATING
_READ = ActionKind.READ
_HEALTHY = Health.HEALTHY
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL
_HUMAN = StepKind.HUMAN
_ESCALATION = ActionKind.ESCALATION
# Where a team's last word is kept: it ends the conversation for all of its agents.
_TEAM = "\x00team"


@dataclass
class TerminationAwarenessConfig:
    """FM-1.5 unaware of termination conditions: limits hit, calls after the final answer or after
    success, ending in a loop."""

    # Run this detector.
    enabled: bool = True
    # Tool calls by the same agent after its final answer that show it did not stop.
    calls_after_final_answer: int = 1
    # Tool calls after a check showed the problem solved.
    calls_after_success: int = 3
    # Steps past the step budget (mast.task.max_steps) before the run counts as not stopping.
    steps_past_budget: int = 3
    # The run's last tool calls are all one repeated call: it ended inside a loop.
    final_loop_length: int = 3
    # A run ending on a tool call with no answer after it, after at least this many tool
    # calls, was cut off mid-work; 0 turns the rule off.
    ended_mid_work_min_calls: int = 10

    def validate(self) -> None:
        """Every value of this section is valid."""


class TerminationAwareness(Detector):
    mode = "FM-1.5"
    name = "termination_awareness"
    version = "1.0"
    config: TerminationAwarenessConfig

    def open(self, run: Run) -> DetectorRun:
        return _TerminationRun(self)


_LIMIT_KINDS = (StepKind.AGENT, StepKind.OTHER, StepKind.LLM)


class _TerminationRun(DetectorRun):
    __slots__ = (
        "after_final",
        "after_success",
        "budget",
        "budget_version",
        "changed_targets",
        "config",
        "detector",
        "final_answer",
        "healthy_check",
        "held",
        "last_step",
        "reported",
        "steps",
        "tail",
        "tool_calls",
    )
    kinds = frozenset({StepKind.LLM, StepKind.TOOL, StepKind.AGENT, StepKind.OTHER, StepKind.HUMAN})

    def __init__(self, detector: TerminationAwareness) -> None:
        self.detector = detector
        self.config = detector.config
        self.final_answer: dict[str, Step] = {}  # agent → its final answer
        # Per agent, its calls after its final answer, up to the number that is reported.
        self.after_final: dict[str, list[StepRef]] = {}
        # A finding on calls after an answer, held while the run may still turn out to be a
        # team's (`signals.may_be_team`): reported at close unless another agent speaks.
        self.held: tuple[Step, list[Step | StepRef], str, dict[str, object]] | None = None
        self.changed_targets: frozenset[Target] = frozenset()
        self.healthy_check: StepRef | None = None
        # Calls after a healthy check, up to the number that is reported.
        self.after_success: list[StepRef] = []
        # The last calls: (call, what it returned) and where.
        self.tail: deque[tuple[tuple[str, str], StepRef]] = deque(
            maxlen=max(self.config.final_loop_length, 1)
        )
        self.steps = 0
        self.tool_calls = 0
        # The last LLM, tool or user step (hand-offs and agents are not answers or calls).
        self.last_step: Step | None = None
        self.reported: set[str] = set()
        # The run's step budget (0: none), read again only when its attributes change.
        self.budget = 0
        self.budget_version = -1

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        if step.kind in (_LLM, _TOOL, _HUMAN):
            self.last_step = step
        if step.kind is _HUMAN:
            # The user answered: the text-only turns before were turns of the conversation,
            # and calls after a healthy check now serve what the user says next.
            if step.input_text.strip():
                self.final_answer.clear()
                self.healthy_check = None
                self.after_success = []
            return ()
        findings: list[Finding] = []
        signals = self.detector.signals
        if step.kind in _LIMIT_KINDS and step.failed and signals.limit.found(step.error):
            findings.extend(
                self._report(
                    "limit_hit",
                    step,
                    [step],
                    0.9,
                    f"the run ended on a limit: {step.error[:120]}",
                    {"error": step.error[:300]},
                    run,
                )
            )
        if step.kind is _LLM or step.kind is _TOOL:
            self.steps += 1
            if self.budget_version != run.attributes_version:
                self.budget_version = run.attributes_version
                budget = run.attributes.get(conventions.TASK_MAX_STEPS)
                if isinstance(budget, int) and not isinstance(budget, bool) and budget > 0:
                    self.budget = budget
                else:
                    self.budget = 0
            if self.budget and self.steps == self.budget + self.config.steps_past_budget:
                findings.extend(self._past_budget(step, run))
        if step.kind is _LLM:
            if is_team(run) and (
                self.held is not None
                or len(self.final_answer) > 1
                or (self.final_answer and _TEAM not in self.final_answer)
            ):
                # A teammate spoke: the earlier answers were turns of the team's conversation.
                self.held = None
                for agent in [a for a in self.final_answer if a != _TEAM]:
                    del self.final_answer[agent]
                    self.after_final.pop(agent, None)
            if self.final_answer and step.agent:
                # Another agent answering is a teammate's turn of the conversation: the
                # earlier text-only turns were messages to it, not final answers.
                for agent in [a for a in self.final_answer if a not in (step.agent, _TEAM)]:
                    if agent not in self.after_final:
                        del self.final_answer[agent]
            if is_final_answer(step, run):
                # A team's last word ends the conversation for every one of its agents.
                self.final_answer.setdefault(_TEAM if is_team(run) else step.agent, step)
            return findings
        if step.kind is not _TOOL or not step.tool_name:
            return findings
        self.tool_calls += 1
        classifier = self.detector.classifier
        ref = run.ref(step)
        self.tail.append(
            (
                (
                    classifier.canonical_call(step.tool_name, step.tool_arguments),
                    classifier.result_fingerprint(step.tool_result or step.error),
                ),
                ref,
            )
        )
        key = _TEAM if _TEAM in self.final_answer else step.agent
        answer = self.final_answer.get(key)
        calls_after = self.config.calls_after_final_answer
        if answer is not None:
            calls = self.after_final.setdefault(key, [])
            if len(calls) < calls_after:
                calls.append(ref)
                if len(calls) == calls_after:
                    message = (
                        f"{step.agent or 'the agent'} kept calling tools after its final answer"
                        if key != _TEAM
                        else f"{step.agent} ran {step.tool_name} after {answer.agent} had ended "
                        f"the team's conversation ({short(answer.output_text, 80)!r})"
                    )
                    values: dict[str, object] = {
                        "final_answer": answer.output_text[:200],
                        "calls_after": len(calls),
                    }
                    if key != _TEAM and may_be_team(run):
                        if self.held is None:
                            self.held = (step, [answer, *calls], message, values)
                    else:
                        findings.extend(
                            self._report(
                                "calls_after_final_answer",
                                step,
                                [answer, *calls],
                                0.75,
                                message,
                                values,
                                run,
                            )
                        )
        action = classifier.classify(step.tool_name, step.tool_arguments)
        if action.kind is _MUTATING and not step.failed:
            self.changed_targets = action.refs
            self.healthy_check = None
            self.after_success = []
        elif self.healthy_check is not None:
            if len(self.after_success) < self.config.calls_after_success:
                self.after_success.append(ref)
                if len(self.after_success) == self.config.calls_after_success:
                    findings.extend(
                        self._report(
                            "calls_after_success",
                            step,
                            [self.healthy_check, *self.after_success],
                            0.7,
                            f"{len(self.after_success)} more tool calls after a check showed "
                            f"the problem solved",
                            {
                                "check": self.healthy_check.tool_name,
                                "calls_after": len(self.after_success),
                            },
                            run,
                        )
                    )
        elif (
            self.changed_targets
            and action.kind is _READ
            and checks(self.changed_targets, action.refs)
            and self.detector.signals.health(step.tool_result) is _HEALTHY
        ):
            self.healthy_check = ref
        return findings

    def on_close(self, run: Run) -> Iterable[Finding]:
        held: list[Finding] = []
        if self.held is not None and not is_team(run):
            at, evidence, message, values = self.held
            held = self._report(
                "calls_after_final_answer", at, evidence, 0.75, message, values, run
            )
        loop = list(self._ended_in_loop(run))
        if loop:
            return held + loop
        return [*held, *self._ended_mid_work(run)]

    def _ended_mid_work(self, run: Run) -> Iterable[Finding]:
        minimum = self.config.ended_mid_work_min_calls
        if not minimum or not self.tail or self.tool_calls < minimum:
            return ()
        last = self.last_step
        if last is None or last.kind is not _TOOL or not last.tool_name:
            return ()
        action = self.detector.classifier.classify(last.tool_name, last.tool_arguments)
        if action.kind is _ESCALATION:
            return ()
        return self._report(
            "ended_mid_work",
            last,
            [last],
            0.6,
            f"the run ended on a call to {last.tool_name} after {self.tool_calls} tool calls, "
            f"with no answer after it: cut off while still working",
            {"tool": last.tool_name, "tool_calls": self.tool_calls},
            run,
        )

    def _ended_in_loop(self, run: Run) -> Iterable[Finding]:
        length = self.config.final_loop_length
        if length < 2 or len(self.tail) < length:
            return ()
        tokens = {token for token, _ in self.tail}
        last = self.tail[-1][1]
        # The last model or tool step (a framework's own chain spans may start after it).
        final = next((s for s in reversed(run.window) if s.kind in (_LLM, _TOOL)), None)
        if len(tokens) != 1 or (final and final.kind is _LLM and is_final_answer(final, run)):
            return ()
        steps = [s for _, s in self.tail]
        return self._report(
            "ended_in_loop",
            last,
            steps,
            0.8,
            f"the run ended while repeating {last.tool_name}",
            {"tool": last.tool_name, "repeats": len(steps)},
            run,
        )

    def _past_budget(self, step: Step, run: Run) -> list[Finding]:
        budget = self.budget
        return self._report(
            "past_budget",
            step,
            [step],
            0.85,
            f"the run went {self.config.steps_past_budget} steps past its budget of {budget}",
            {"budget": budget, "steps": self.steps},
            run,
        )

    def _report(
        self,
        rule: str,
        at: Step | StepRef,
        evidence: Sequence[Step | StepRef],
        confidence: float,
        message: str,
        values: dict[str, object],
        run: Run,
    ) -> list[Finding]:
        if rule in self.reported:
            return []
        self.reported.add(rule)
        return [self.detector.finding(at, rule, confidence, message, evidence, dict(values), run)]


FACTORY = DetectorFactory(
    type="termination_awareness",
    mode="FM-1.5",
    config=TerminationAwarenessConfig,
    create=TerminationAwareness,
)
