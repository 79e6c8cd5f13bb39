"""FM-2.4's two rules around each hand-off from one agent to another, on what each agent knew
when it handed off: the reads it had made, and the calls it saw fail.

`redone_after_handoff`: the receiving agent makes a read-only call the sender had already made
successfully before handing off: the sender had the result and did not pass it on. Once the
run has changed the system, reading again is checking the change, not redoing; and a call
whose result the receiver's model input held (by its call id: a group chat every agent reads)
was passed on.
- Fires: triage runs `kubectl get pods -n shop` ("checkout 0/1"), hands off to fixer with
  "please fix it", and fixer runs the same `kubectl get pods -n shop`: reported at fixer's
  call, citing triage's call and the hand-off.
- Near miss: fixer first changes the deployment (`kubectl set resources ...`), then reads the
  pods: a read-back checking its change. In a group chat, a verifier runs again the code whose
  output the whole chat read: its model input held the result, so it was passed on.

`error_not_passed_on`: the sender saw a tool call fail, and the hand-off message mentions
neither the failure nor the failing tool. Reported once the receiver's next model call shows
what it was given (or at close), and not when that call's input holds the failure's result
itself (or the failed call's answer, by its call id): in a team's shared conversation the
receiver reads the failure.
- Fires: the fixer's `apply_manifest` fails ("Error: admission webhook denied the request:
  memory limit 512Mi exceeds the namespace quota") and it hands off to the verifier with
  "Raised checkout's limit to 512Mi.": "fixer handed off to verifier without mentioning that
  apply_manifest failed (...)".
- Near miss: the hand-off says "apply_manifest was denied by the quota" (the tool, or a word
  of failure: error, fail, denied, forbidden, refused, not found, timeout), or the verifier's
  next model input holds the failure's text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.withholding.context import WithholdingContext
from mast_otel.processors.model import Finding, Step, StepRef
from mast_otel.processors.run import Run

# Read for every tool call: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_MUTATING = ActionKind.MUTATING

_FAILURE_WORDS = ("error", "fail", "denied", "forbidden", "refused", "not found", "timeout")
_MAX_CALLS_PER_AGENT = 1024
# How much of a failure's text, found in the receiver's model input, shows it was passed on.
_SEEN_CHARS = 80


@dataclass(slots=True)
class _Knowledge:
    # A hash of the canonical call → where the agent first made it.
    reads: dict[int, StepRef] = field(default_factory=dict)
    # Failed calls: where, and what the failure said (cut as a finding quotes it).
    failures: list[tuple[StepRef, str]] = field(default_factory=list)


class Handoffs:
    """Per run: what each agent knew, what each receiver was handed, and what its model input
    has shown it since."""

    __slots__ = (
        "call_ids",
        "changed",
        "changed_since",
        "context",
        "handed",
        "known",
        "reported",
        "reported_calls",
        "seen",
        "unseen_errors",
    )

    def __init__(self, context: WithholdingContext) -> None:
        self.context = context
        self.known: dict[str, _Knowledge] = {}
        # Receiver → (hand-off step, what the sender had read by then).
        self.handed: dict[str, tuple[Step, dict[int, StepRef]]] = {}
        # Once anything changes the system, reading again is checking, not redoing.
        self.changed_since: set[str] = set()
        # The run changed the system: a receiver reading again what its sender read checks
        # the change (a verifier's read-back), it does not redo the sender's work.
        self.changed = False
        self.reported: set[str] = set()
        self.reported_calls: set[int] = set()
        # Receiver → (error_not_passed_on finding, the failure's text, its call id) until its
        # next call.
        self.unseen_errors: dict[str, tuple[Finding, str, str]] = {}
        # A tool step's call id, by span (the reads and failures remembered name their span).
        self.call_ids: dict[str, str] = {}
        # Receiver → the call ids whose results its latest model input held.
        self.seen: dict[str, frozenset[str]] = {}

    def unseen_error(self, step: Step) -> Finding | None:
        """For a model call of a receiver whose sender left out an error: the finding, unless
        the call's input holds the failure."""
        finding, failure, call_id = self.unseen_errors.pop(step.agent)
        return None if _holds(step, failure, call_id) else finding

    def model_call(self, step: Step) -> None:
        """A model call of an agent that was handed work: what its input holds."""
        self.seen[step.agent] = _results_held(step)

    def tool_call(self, step: Step, run: Run) -> list[Finding] | tuple[()]:
        """A tool call: a read remembered, a failure noted, a change noted, or a read the
        sender had made and did not pass on."""
        if step.tool_call_id and len(self.call_ids) < _MAX_CALLS_PER_AGENT:
            self.call_ids[step.span_id] = step.tool_call_id
        knowledge = self.known.setdefault(step.agent, _Knowledge())
        classifier = self.context.classifier
        if step.failed:
            if len(knowledge.failures) < _MAX_CALLS_PER_AGENT:
                knowledge.failures.append((run.ref(step), short(step.error or step.tool_result)))
            return ()
        action = classifier.classify(step.tool_name, step.tool_arguments)
        if action.kind is _MUTATING:
            self.changed_since.update(self.handed)
            self.changed = True
            return ()
        key = hash(classifier.canonical_call(step.tool_name, step.tool_arguments))
        handed = self.handed.get(step.agent)
        if len(knowledge.reads) < _MAX_CALLS_PER_AGENT and key not in knowledge.reads:
            knowledge.reads[key] = run.ref(step)
        if handed is None or key not in handed[1] or key in self.reported_calls:
            return ()
        if step.agent in self.changed_since:
            return ()
        handoff, sender_reads = handed
        earlier = sender_reads[key]
        if self.call_ids.get(earlier.span_id, "\x00") in self.seen.get(step.agent, ()):
            return ()  # its model input held the result: a shared conversation passed it on
        self.reported_calls.add(key)
        return [
            self.context.report.finding(
                at=step,
                rule="redone_after_handoff",
                confidence=0.7,
                message=(
                    f"{step.agent} re-ran {step.tool_name}({short(step.tool_arguments, 100)}) that "
                    f"{handoff.agent} had already run before handing off: the result was not "
                    f"passed on"
                ),
                evidence=[earlier, handoff, step],
                values={
                    "sender": handoff.agent,
                    "receiver": step.agent,
                    "call": short(step.tool_arguments),
                },
                run=run,
            )
        ]

    def handoff(self, step: Step, run: Run) -> list[Finding]:
        """A hand-off to `step.target_agent`: what the sender knew by then is handed on."""
        sender = self.known.get(step.agent, _Knowledge())
        self.handed[step.target_agent] = (step, dict(sender.reads))
        if self.changed:
            self.changed_since.add(step.target_agent)
        else:
            self.changed_since.discard(step.target_agent)
        message = step.input_text.lower()
        unmentioned = [
            f
            for f in sender.failures
            if f[0].tool_name.lower() not in message
            and not any(w in message for w in _FAILURE_WORDS)
        ]
        if not unmentioned or f"error:{step.span_id}" in self.reported:
            return []
        self.reported.add(f"error:{step.span_id}")
        failed, failure = unmentioned[-1]
        self.unseen_errors[step.target_agent] = (
            self.context.report.finding(
                at=step,
                rule="error_not_passed_on",
                confidence=0.75,
                message=(
                    f"{step.agent} handed off to {step.target_agent} without mentioning that "
                    f"{failed.tool_name} failed ({short(failure, 100)!r})"
                ),
                evidence=[failed, step],
                values={
                    "sender": step.agent,
                    "receiver": step.target_agent,
                    "error": failure,
                    "handoff_message": short(step.input_text),
                },
                run=run,
            ),
            failure,
            self.call_ids.get(failed.span_id, ""),
        )
        return []

    def close(self) -> list[Finding]:
        """The errors left out of a hand-off whose receiver made no model call after it."""
        found = [finding for finding, _, _ in self.unseen_errors.values()]
        self.unseen_errors.clear()
        return found


def _holds(step: Step, failure: str, call_id: str) -> bool:
    """Whether a model call's input holds the failure's result: its opening words, or the
    failed call's answer (a tool message with its call id, whatever text the span kept)."""
    if call_id and call_id in _results_held(step):
        return True
    words = " ".join(failure.split())[:_SEEN_CHARS]
    if not words:
        return False
    return any(words in " ".join(m.text.split()) for m in step.input_history)


def _results_held(step: Step) -> frozenset[str]:
    """The call ids of the tool results a model call's input holds."""
    return frozenset(m.call_id for m in step.input_history if m.role == "tool" and m.call_id)
