"""FM-1.1's detector and its per-run state: the context its rules read, built once, and the
run as the rules follow it: the calls kept for the policy check at close, the conversation
(user turns, the agent's words), each rule's own watch, and the findings held until the run's
instructions are known. Every finding goes through `_once`: one per rule and step, at most
`max_findings_per_run` a run."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mast_otel.processors import conventions
from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory, short
from mast_otel.processors.detectors.policy import KeptCalls
from mast_otel.processors.detectors.task_specification.budgets import Budgets
from mast_otel.processors.detectors.task_specification.change_after_own_refusal import (
    RefusalWatch,
)
from mast_otel.processors.detectors.task_specification.change_before_prerequisites import (
    PrerequisiteWatch,
)
from mast_otel.processors.detectors.task_specification.change_outside_window import WindowWatch
from mast_otel.processors.detectors.task_specification.change_to_past_resource import PastWatch
from mast_otel.processors.detectors.task_specification.change_with_unlisted_detail import (
    DetailWatch,
    unlisted_detail,
)
from mast_otel.processors.detectors.task_specification.change_without_confirmation import (
    ConfirmationWatch,
)
from mast_otel.processors.detectors.task_specification.config import TaskSpecificationConfig
from mast_otel.processors.detectors.task_specification.context import (
    TaskSpecificationContext,
    task_specification_context,
)
from mast_otel.processors.detectors.task_specification.escalation import EscalationWatch
from mast_otel.processors.detectors.task_specification.offer_before_request import (
    OfferWatch,
    sentence,
)
from mast_otel.processors.detectors.task_specification.task_policy import (
    Policy,
    breaches,
    task_policy,
)
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_MUTATING = ActionKind.MUTATING
_ESCALATION = ActionKind.ESCALATION
_TOOL = StepKind.TOOL
_LLM = StepKind.LLM
_HUMAN = StepKind.HUMAN
_HANDOFF = StepKind.HANDOFF


class TaskSpecification(Detector):
    mode = "FM-1.1"
    name = "task_specification"
    version = "1.0"
    config: TaskSpecificationConfig

    def __init__(self, config: Any, context: DetectorContext) -> None:
        super().__init__(config, context)
        self.context = task_specification_context(self.config, context, self.report)

    def open(self, run: Run) -> DetectorRun:
        return TaskSpecificationRun(self.context)


@dataclass(slots=True)
class _Pending:
    """A call that breaks the run's instructions if they hold the clause its rule names;
    decided at close, when the instructions (on the root span) are known."""

    rule: str
    ref: StepRef
    message: str
    values: dict[str, Any]


class TaskSpecificationRun(DetectorRun):
    """One run's state for the rules of FM-1.1 (see the family's package)."""

    __slots__ = (
        "budgets",
        "classifier",
        "config",
        "confirmation",
        "context",
        "details",
        "escalation",
        "findings",
        "kept",
        "offers",
        "past",
        "pending",
        "policy",
        "policy_version",
        "prerequisites",
        "refusals",
        "report",
        "reported",
        "steps",
        "tokens",
        "user_text",
        "user_turns",
        "window",
    )
    kinds = frozenset({StepKind.LLM, StepKind.TOOL, StepKind.HUMAN, StepKind.HANDOFF})

    def __init__(self, context: TaskSpecificationContext) -> None:
        self.context = context
        self.config = config = context.config
        self.classifier = context.classifier
        self.report = context.report
        self.reported: set[tuple[str, str]] = set()  # (rule, span id)
        # The calls kept for the check at close: those of each tool and the changes it can
        # still report.
        self.kept = KeptCalls(
            config.max_findings_per_run,
            self.reported,
            "tool_not_allowed",
            "mutation_in_read_only_task",
        )
        self.budgets = Budgets()
        self.steps = 0
        self.tokens = 0
        self.findings = 0
        # The policy read from the run's attributes, kept until they change.
        self.policy: Policy | None = None
        self.policy_version = -1
        # The user's last turn, and how many turns the user took.
        self.user_text = ""
        self.user_turns = 0
        self.confirmation = ConfirmationWatch(context)
        self.escalation = EscalationWatch(context)
        self.refusals = RefusalWatch(context)
        self.prerequisites = PrerequisiteWatch(context)
        self.past = PastWatch(context)
        self.window = WindowWatch(context)
        self.details = DetailWatch(context)
        self.offers = OfferWatch(context)
        # The findings held until the run's instructions are known.
        self.pending: list[_Pending] = []

    def _policy(self, run: Run) -> Policy:
        if self.policy is None or self.policy_version != run.attributes_version:
            self.policy = task_policy(self.config, run.attributes)
            self.policy_version = run.attributes_version
        return self.policy

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        policy = self._policy(run)
        findings: list[Finding] = []
        if step.kind is not _HUMAN:  # a user's turn is not a step the agent took
            self.steps += 1
        self.tokens += (step.input_tokens or 0) + (step.output_tokens or 0)
        if policy.max_steps or policy.max_tokens or policy.max_seconds:
            for rule, message, values in self.budgets.passed(
                step, run, policy, self.steps, self.tokens
            ):
                findings.extend(self._once(step, rule, 0.95, message, values, run))
        if step.kind is _TOOL and step.tool_name:
            action = self.classifier.classify(step.tool_name, step.tool_arguments)
            mutating = action.kind is _MUTATING
            if policy.allowed_tools is not None or (policy.read_only and mutating):
                findings.extend(self._check_call(step, mutating, step.tool_arguments, run, policy))
            self.kept.keep(step, mutating, run, step.tool_name, None)
            escalation = self.escalation
            escalation.read = escalation.read or (
                not step.failed and bool(step.tool_result.strip())
            )
            self.prerequisites.called(step.tool_arguments)
            if mutating:
                call = f"{step.tool_name}({short(step.tool_arguments, 200)})"
                self._change(step, call, run)
                findings.extend(self._refused(step, run))
                self.past.change(run.ref(step), step.tool_name, call, step.tool_arguments)
                self.window.change(run.ref(step), step, call)
            if not step.failed:
                self.past.read(step.tool_name, step.tool_arguments, step.tool_result)
            if not mutating:
                self.window.read(step)
                held = escalation.escalated(step, self.user_text, action.kind is _ESCALATION)
                if held is not None:
                    self._hold("escalation_after_refusal", step, run, *held)
                self.details.looked_up(step.tool_arguments)
                self.details.result(step.tool_result)
        elif step.kind is _HANDOFF and step.tool_name:
            held = self.escalation.escalated(step, self.user_text)
            if held is not None:
                self._hold("escalation_after_refusal", step, run, *held)
        elif step.kind is _HUMAN:
            self._user_turn(step.input_text or step.output_text)
        elif step.kind is _LLM:
            if step.input_text and step.input_text != self.user_text:
                self._user_turn(step.input_text)
            if step.output_text:
                text = step.output_text
                self.prerequisites.said(text)
                self.details.spoken(text, agent=True)
                self.refusals.spoken(text)
                if not step.tool_calls:
                    self.confirmation.proposal = True
                escalation = self.escalation
                if not escalation.refusal:
                    escalation.agent_said(text)
                held = escalation.offer(text, self.user_text)
                if held is not None:
                    self._hold("escalation_offered_after_refusal", step, run, *held)
                if not step.tool_calls and (made := self.offers.agent_said(text)):
                    why = OfferWatch.message(made)
                    self._hold("offer_before_request", step, run, why, {"offer": made})
        return findings

    def _refused(self, step: Step, run: Run) -> list[Finding]:
        """A change of what the agent itself told the user is not allowed."""
        found = self.refusals.refused(step.tool_name, step.tool_arguments)
        rule = "change_after_own_refusal"
        return [] if found is None else self._once(step, rule, 0.75, *found, run)

    def _user_turn(self, text: str) -> None:
        if not text:
            return
        self.user_text = text
        self.user_turns += 1
        self.offers.user_turn(text)
        self.details.user_turn(text)
        self.prerequisites.said(text)
        self.confirmation.user_turn()

    def _change(self, step: Step, call: str, run: Run) -> None:
        """A mutating call: held for the confirmation rule when nothing confirmed it, or for
        the unlisted-detail rule when the user's yes did not list a detail it carries."""
        self.prerequisites.change(run.ref(step), step.tool_name, call)
        said = short(self.user_text, 200)
        unconfirmed = self.confirmation.change(step, call, self.user_text, said)
        found = self.details.unlisted(step.tool_arguments, step.tool_result, step.failed)
        if unconfirmed is None and found:
            self._hold(
                "change_with_unlisted_detail", step, run, *unlisted_detail(call, found, said)
            )
        if unconfirmed is not None:
            self._hold("change_without_confirmation", step, run, *unconfirmed)

    def _hold(self, rule: str, step: Step, run: Run, message: str, values: dict[str, Any]) -> None:
        if len(self.pending) < self.config.max_findings_per_run:
            self.pending.append(_Pending(rule, run.ref(step), message, values))

    def on_close(self, run: Run) -> Iterable[Finding]:
        policy = task_policy(self.config, run.attributes)
        findings: list[Finding] = []
        for call in self.kept.calls:
            findings.extend(self._check_call(call.ref, call.mutating, call.arguments, run, policy))
        if self.pending:
            instructions = str(run.attributes.get(conventions.TASK_DESCRIPTION) or "")
            context = self.context
            clauses = {
                "change_without_confirmation": context.confirmation_required,
                "change_with_unlisted_detail": context.confirmation_required,
                "escalation_after_refusal": context.escalate_only,
                "escalation_offered_after_refusal": context.escalate_only,
                "offer_before_request": context.no_proactive_offer,
            }
            one_shot = self.config.confirmation_needs_conversation and self.user_turns < 2
            for held in self.pending:
                if one_shot and held.rule.startswith("change_with"):
                    continue
                clause = clauses[held.rule]
                found = clause.search(instructions) if clause is not None else None
                if found is None:
                    continue
                values = {**held.values, "instruction": sentence(instructions, found)}
                findings.extend(self._once(held.ref, held.rule, 0.8, held.message, values, run))
        instructions = str(run.attributes.get(conventions.TASK_DESCRIPTION) or "")
        for change, lacking, said in self.prerequisites.missing(instructions):
            why = f"{change.call} was made before the agent obtained what the instructions say "
            why += f"to obtain first: {', '.join(lacking)}"
            values = {"call": change.call, "missing": lacking, "instruction": said}
            rule = "change_before_prerequisites"
            findings.extend(self._once(change.ref, rule, 0.7, why, values, run))
        for ref, why, values in self.past.past(instructions):
            findings.extend(self._once(ref, "change_to_past_resource", 0.7, why, values, run))
        for ref, why, values in self.window.outside(instructions):
            findings.extend(self._once(ref, "change_outside_window", 0.7, why, values, run))
        passed = self.budgets.passed_at_close(run, policy, self.steps)
        if passed is not None:
            last, (rule, message, values) = passed
            findings.extend(self._once(last, rule, 0.95, message, values, run))
        return findings

    def _check_call(
        self, step: Step | StepRef, mutating: bool, arguments: str, run: Run, policy: Policy
    ) -> list[Finding]:
        out = []
        for rule, message, values in breaches(step.tool_name, mutating, arguments, policy):
            out.extend(self._once(step, rule, 0.9, message, values, run))
        return out

    def _once(
        self,
        step: Step | StepRef,
        rule: str,
        confidence: float,
        message: str,
        values: dict[str, Any],
        run: Run,
    ) -> list[Finding]:
        key = (rule, step.span_id)
        if key in self.reported or self.findings >= self.config.max_findings_per_run:
            return []
        self.reported.add(key)
        self.findings += 1
        return [self.report.finding(step, rule, confidence, message, [step], values, run)]


FACTORY = DetectorFactory(
    type="task_specification",
    mode="FM-1.1",
    config=TaskSpecificationConfig,
    create=TaskSpecification,
)
