"""FM-2.5's two rules on what a hand-off assigned its receiver: the resources its message
names, and the calls its sender saw fail when the message says something failed.

`instruction_ignored`: the hand-off message names resources to act on (the targets the
classifier finds in it), and the receiver, having made at least `min_receiver_calls` tool
calls, never touched any of them. Judged when the receiver hands off in turn, or when the run
closes; reported at the hand-off.
- Fires: triage hands off to fixer with "checkout in shop is OOMKilled (logs). Raise the memory
  of deployment/checkout in shop.", and fixer runs `kubectl get pods -n billing` and
  `kubectl get nodes`: it never acted on checkout.
- Near miss: fixer runs `kubectl get nodes`, then `kubectl set resources deployment/checkout
  ... -n shop`: it touched what it was handed. With only `kubectl get nodes` it made one call,
  fewer than `min_receiver_calls`: too few to tell.

`repeated_failed_action`: the hand-off message says something failed ("fail", "error", "did
not work", "denied", "forbidden"), and the receiver makes the very call (canonically the
same) the sender saw fail.
- Fires: triage's `kubectl rollout restart deployment/checkout -n shop` fails ("forbidden"),
  it hands off with "restarting deployment/checkout in shop failed: forbidden", and fixer
  runs the same restart: reported at fixer's call.
- Near miss: the same failure, but the hand-off says only "restart deployment/checkout in
  shop": the message does not say it failed, so repeating it is doing as told.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.ignored_input.context import IgnoredInputContext
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_HANDOFF = StepKind.HANDOFF
_TOOL = StepKind.TOOL

_FAILURE_WORDS = ("fail", "error", "did not work", "didn't work", "denied", "forbidden")
# The receiver's first calls a finding cites; later ones are only counted.
_CITED_CALLS = 10


@dataclass(slots=True)
class _Assignment:
    handoff: Step
    targets: frozenset[str]
    failed_calls: set[str]
    calls: list[StepRef] = field(default_factory=list)
    call_count: int = 0
    touched: bool = False


class Assignments:
    """Per run: the calls each agent saw fail, and what each receiver was last handed."""

    __slots__ = ("assignments", "config", "context", "failed_by_agent", "reported")

    def __init__(self, context: IgnoredInputContext) -> None:
        self.context = context
        self.config = context.config
        self.failed_by_agent: dict[str, set[str]] = {}
        self.assignments: dict[str, _Assignment] = {}  # receiver → what it was handed
        self.reported: set[str] = set()

    def step(self, step: Step, run: Run) -> list[Finding]:
        """The findings on a hand-off or a tool call."""
        classifier = self.context.classifier
        findings: list[Finding] = []
        if step.kind is _HANDOFF and step.target_agent:
            previous = self.assignments.pop(step.agent, None)
            if previous is not None:
                findings.extend(self._judge(previous, run))
            message = step.input_text
            says_failed = any(w in message.lower() for w in _FAILURE_WORDS)
            self.assignments[step.target_agent] = _Assignment(
                handoff=step,
                targets=classifier.classify("", message).targets,
                failed_calls=set(self.failed_by_agent.get(step.agent, ()))
                if says_failed
                else set(),
            )
            return findings
        if step.kind is not _TOOL or not step.tool_name:
            return findings
        key = classifier.canonical_call(step.tool_name, step.tool_arguments)
        if step.failed:
            self.failed_by_agent.setdefault(step.agent, set()).add(key)
        assignment = self.assignments.get(step.agent)
        if assignment is None:
            return findings
        assignment.call_count += 1
        if len(assignment.calls) < _CITED_CALLS:
            assignment.calls.append(run.ref(step))
        targets = classifier.classify(step.tool_name, step.tool_arguments).targets
        if targets & assignment.targets:
            assignment.touched = True
        if key in assignment.failed_calls and f"repeat:{key}" not in self.reported:
            self.reported.add(f"repeat:{key}")
            findings.append(
                self.context.report.finding(
                    at=step,
                    rule="repeated_failed_action",
                    confidence=0.8,
                    message=(
                        f"{step.agent} repeated {step.tool_name}, which "
                        f"{assignment.handoff.agent} said had failed"
                    ),
                    evidence=[assignment.handoff, step],
                    values={
                        "sender": assignment.handoff.agent,
                        "receiver": step.agent,
                        "call": short(step.tool_arguments),
                        "handoff_message": short(assignment.handoff.input_text),
                    },
                    run=run,
                )
            )
        return findings

    def close(self, run: Run) -> list[Finding]:
        """Every receiver's last assignment, judged now the run is over."""
        findings: list[Finding] = []
        for assignment in self.assignments.values():
            findings.extend(self._judge(assignment, run))
        return findings

    def _judge(self, assignment: _Assignment, run: Run) -> list[Finding]:
        handoff = assignment.handoff
        if (
            not assignment.targets
            or assignment.touched
            or assignment.call_count < self.config.min_receiver_calls
            or handoff.span_id in self.reported
        ):
            return []
        self.reported.add(handoff.span_id)
        return [
            self.context.report.finding(
                at=handoff,
                rule="instruction_ignored",
                confidence=0.7,
                message=(
                    f"{handoff.target_agent} never acted on "
                    f"{', '.join(sorted(assignment.targets))}, which {handoff.agent} handed it"
                ),
                evidence=[handoff, *assignment.calls[:5]],
                values={
                    "sender": handoff.agent,
                    "receiver": handoff.target_agent,
                    "named_targets": sorted(assignment.targets),
                    "receiver_calls": [s.tool_name for s in assignment.calls[:10]],
                    "handoff_message": short(handoff.input_text),
                },
                run=run,
            )
        ]
