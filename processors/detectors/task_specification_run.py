"""FM-1.1's per-run state: the calls kept for the policy check at close, the conversation as
the rules follow it (user turns, proposals, refusals, offers, prerequisites) and the findings
held until the run's instructions are known. The rules are described in task_specification.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mast_otel.processors import conventions
from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.policy import KeptCalls
from mast_otel.processors.detectors.task_specification_details import DetailWatch
from mast_otel.processors.detectors.task_specification_offer import OfferWatch, sentence
from mast_otel.processors.detectors.task_specification_past import PastWatch
from mast_otel.processors.detectors.task_specification_policy import (
    Policy,
    breaches,
    task_policy,
)
from mast_otel.processors.detectors.task_specification_prerequisites import PrerequisiteWatch
from mast_otel.processors.detectors.task_specification_refused import RefusalWatch
from mast_otel.processors.detectors.task_specification_window import WindowWatch
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import DetectorRun, Run

if TYPE_CHECKING:
    from mast_otel.processors.detectors.task_specification import TaskSpecification

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_MUTATING = ActionKind.MUTATING
_ESCALATION = ActionKind.ESCALATION
_TOOL = StepKind.TOOL
_LLM = StepKind.LLM
_HUMAN = StepKind.HUMAN
_HANDOFF = StepKind.HANDOFF


@dataclass(slots=True)
class _Pending:
    """A call that breaks the run's instructions if they hold the clause its rule names;
    decided at close, when the instructions (on the root span) are known."""

    rule: str
    ref: StepRef
    message: str
    values: dict[str, Any]


class TaskSpecificationRun(DetectorRun):
    """One run's state for the rules of FM-1.1 (see the detector's module)."""

    __slots__ = (
        "budgets_reported",
        "config",
        "details",
        "detector",
        "failed_change",
        "findings",
        "kept",
        "offered",
        "offers",
        "past",
        "pending",
        "policy",
        "policy_version",
        "prerequisites",
        "proposal",
        "read",
        "refusal",
        "refusal_checked",
        "refusals",
        "reported",
        "steps",
        "tokens",
        "user_text",
        "user_turns",
        "window",
    )
    kinds = frozenset({StepKind.LLM, StepKind.TOOL, StepKind.HUMAN, StepKind.HANDOFF})

    def __init__(self, detector: TaskSpecification) -> None:
        self.detector = detector
        self.config = detector.config
        self.reported: set[tuple[str, str]] = set()  # (rule, span id)
        # The calls kept for the check at close: those of each tool and the changes it can
        # still report.
        self.kept = KeptCalls(
            self.config.max_findings_per_run,
            self.reported,
            "tool_not_allowed",
            "mutation_in_read_only_task",
        )
        self.budgets_reported: set[str] = set()
        self.steps = 0
        self.tokens = 0
        self.findings = 0
        # The policy read from the run's attributes, kept until they change.
        self.policy: Policy | None = None
        self.policy_version = -1
        # The last user turn; whether the agent proposed something new since (a text turn
        # with no call); a change that failed in this user turn (tool, call with key order
        # and spacing aside); the agent's first refusal (its words); the calls held to close.
        self.user_text = ""
        self.user_turns = 0
        self.proposal = False
        self.failed_change: tuple[str, str] | None = None
        self.refusal = ""
        # Whether a tool had returned anything before the agent's first refusal: a refusal
        # with nothing read is about the kind of request, not a rule applied to a case.
        self.read = False
        self.refusal_checked = False
        self.refusals = RefusalWatch(detector.refusal)
        self.offered = False
        self.prerequisites = PrerequisiteWatch(
            detector.prerequisite, self.config.max_findings_per_run
        )
        self.past = PastWatch(
            detector.current_time, detector.schedule_key, self.config.max_findings_per_run
        )
        self.window = WindowWatch(detector, self.config.max_findings_per_run)
        self.details = DetailWatch(detector, self.config.detail_unchanged)
        self.offers = OfferWatch(
            detector.offer if detector.no_proactive_offer else None, detector.offer_request
        )
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
            findings.extend(self._budgets(step, run, policy))
        if step.kind is _TOOL and step.tool_name:
            action = self.detector.classifier.classify(step.tool_name, step.tool_arguments)
            mutating = action.kind is _MUTATING
            if policy.allowed_tools is not None or (policy.read_only and mutating):
                findings.extend(self._check_call(step, mutating, step.tool_arguments, run, policy))
            self.kept.keep(step, mutating, run, step.tool_name, None)
            self.read = self.read or (not step.failed and bool(step.tool_result.strip()))
            self.prerequisites.called(step.tool_arguments)
            if mutating:
                self._change(step, run)
                findings.extend(self._refused(step, run))
                call = f"{step.tool_name}({short(step.tool_arguments, 200)})"
                self.past.change(run.ref(step), step.tool_name, call, step.tool_arguments)
                self.window.change(run.ref(step), step, call)
            if not step.failed:
                self.past.read(step.tool_name, step.tool_arguments, step.tool_result)
            if not mutating:
                self.window.read(step)
                self._escalation(step, run, action.kind is _ESCALATION)
                self.details.looked_up(step.tool_arguments)
                self.details.result(step.tool_result)
        elif step.kind is _HANDOFF and step.tool_name:
            self._escalation(step, run)
        elif step.kind is _HUMAN:
            self._user_turn(step.input_text or step.output_text)
        elif step.kind is _LLM:
            if step.input_text and step.input_text != self.user_text:
                self._user_turn(step.input_text)
            if step.output_text:
                self.prerequisites.said(step.output_text)
                self.details.spoken(step.output_text, agent=True)
                self.refusals.spoken(step.output_text)
                if not step.tool_calls:
                    self.proposal = True
                if not self.refusal:
                    found = self.detector.refusal.search(step.output_text)
                    if found:
                        self.refusal = sentence(step.output_text, found)
                        self.refusal_checked = self.read
                self._offer(step, run)
                if not step.tool_calls and (made := self.offers.agent_said(step.output_text)):
                    why = OfferWatch.message(made)
                    self._hold("offer_before_request", step, run, why, {"offer": made})
        return findings

    def _refused(self, step: Step, run: Run) -> list[Finding]:
        """A change of what the agent itself told the user is not allowed."""
        found = self.refusals.refused(step.tool_name, step.tool_arguments)
        rule = "change_after_own_refusal"
        return [] if found is None else self._once(step, rule, 0.75, *found, run)

    def _refusing(self) -> bool:
        """The agent refused a request it may not escalate: not when the refusal came before
        any tool returned anything and the user then asked for a person (a request the agent
        has no action for, handed to the person the user asked for)."""
        if not self.refusal:
            return False
        person = self.detector.person_request
        return self.refusal_checked or person is None or not person.search(self.user_text)

    def _escalation(self, step: Step, run: Run, escalation: bool = False) -> None:
        """A call that escalates to a person (so classified, or by its tool name), after the
        agent's own refusal: held for the escalate-only clause."""
        if not self._refusing():
            return
        if escalation or self.detector.escalation_tool.search(step.tool_name):
            self._hold(
                "escalation_after_refusal",
                step,
                run,
                f"{step.tool_name} escalated to a person after the agent had told the user "
                f"the request is not allowed ({self.refusal!r}); the "
                "instructions allow escalating only what cannot be handled",
                {"tool": step.tool_name, "refusal": self.refusal},
            )

    def _offer(self, step: Step, run: Run) -> None:
        """An escalation offered in words after the agent's own refusal (once per run)."""
        offer = self.detector.escalation_offer
        if offer is None or self.offered or not self._refusing():
            return
        found = offer.search(step.output_text)
        if found is None:
            return
        self.offered = True
        said = sentence(step.output_text, found)
        self._hold(
            "escalation_offered_after_refusal",
            step,
            run,
            f"the agent offered to escalate to a person ({said!r}) after telling the user the "
            f"request is not allowed ({self.refusal!r}); the instructions allow escalating "
            "only what cannot be handled",
            {"offer": said, "refusal": self.refusal},
        )

    def _user_turn(self, text: str) -> None:
        if not text:
            return
        self.user_text = text
        self.user_turns += 1
        self.offers.user_turn(text)
        self.details.user_turn(text)
        self.prerequisites.said(text)
        self.proposal = False
        self.failed_change = None

    def _change(self, step: Step, run: Run) -> None:
        """A mutating call: held for the confirmation rule when nothing confirmed it."""
        call = f"{step.tool_name}({short(step.tool_arguments, 200)})"
        self.prerequisites.change(run.ref(step), step.tool_name, call)
        said = short(self.user_text, 200)
        same = self.detector.classifier.canonical_call(step.tool_name, step.tool_arguments)
        why = ""
        if not self.user_text:
            why = "no user turn came before it"
        elif self.proposal:
            why = f"the agent proposed something new after the user's last turn ({said!r})"
        elif self.failed_change is not None and self.failed_change != (step.tool_name, same):
            why = (
                f"it retries a failed {self.failed_change[0]} with other arguments, which the "
                f"user's last turn ({said!r}) did not see"
            )
        elif not self.detector.affirms(self.user_text):
            why = f"the user's last turn does not confirm it: {said!r}"
        if step.failed:
            self.failed_change = (step.tool_name, same)
        found = self.details.unlisted(step.tool_arguments, step.tool_result, step.failed)
        if not why and found:
            key, value = found
            detail = f"{key}={value}"
            message = f"{call} carries {detail}, which no turn named before the user's yes "
            message += f"({said!r}); the instructions require listing a change's details first"
            values = {"call": call, "detail": detail, "last_user_turn": said}
            self._hold("change_with_unlisted_detail", step, run, message, values)
        if why:
            self._hold(
                "change_without_confirmation",
                step,
                run,
                f"{call} changed the system without the user's explicit confirmation, which the "
                f"instructions require: {why}",
                {"call": call, "last_user_turn": said},
            )

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
            clauses = {
                "change_without_confirmation": self.detector.confirmation_required,
                "change_with_unlisted_detail": self.detector.confirmation_required,
                "escalation_after_refusal": self.detector.escalate_only,
                "escalation_offered_after_refusal": self.detector.escalate_only,
                "offer_before_request": self.detector.no_proactive_offer,
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
        if (
            policy.max_steps
            and self.steps > policy.max_steps
            and "step_budget" not in self.budgets_reported
        ):
            last = run.window[-1] if run.window else None
            if last is not None:
                findings.extend(
                    self._budget_finding(last, run, "step_budget", self.steps, policy.max_steps)
                )
        return findings

    def _check_call(
        self, step: Step | StepRef, mutating: bool, arguments: str, run: Run, policy: Policy
    ) -> list[Finding]:
        out = []
        for rule, message, values in breaches(step.tool_name, mutating, arguments, policy):
            out.extend(self._once(step, rule, 0.9, message, values, run))
        return out

    def _budgets(self, step: Step, run: Run, policy: Policy) -> list[Finding]:
        out = []
        if policy.max_steps and self.steps > policy.max_steps:
            out.extend(self._budget_finding(step, run, "step_budget", self.steps, policy.max_steps))
        if policy.max_tokens and self.tokens > policy.max_tokens:
            out.extend(
                self._budget_finding(step, run, "token_budget", self.tokens, policy.max_tokens)
            )
        if policy.max_seconds and run.start_ns:
            elapsed = (step.end_ns - run.start_ns) / 1e9
            if elapsed > policy.max_seconds:
                out.extend(
                    self._budget_finding(
                        step, run, "time_budget", round(elapsed, 3), policy.max_seconds
                    )
                )
        return out

    def _budget_finding(
        self, step: Step, run: Run, rule: str, used: float, budget: float
    ) -> list[Finding]:
        if rule in self.budgets_reported:
            return []
        self.budgets_reported.add(rule)
        what = rule.split("_")[0]
        return self._once(
            step,
            rule,
            0.95,
            f"the run passed its {what} budget ({used} > {budget})",
            {"used": used, "budget": budget},
            run,
        )

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
        return [self.detector.finding(step, rule, confidence, message, [step], values, run)]
