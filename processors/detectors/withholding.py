"""FM-2.4 Information withholding: an agent keeps to itself what the next agent needed.

Rules, around each hand-off from one agent to another:
- `redone_after_handoff`: the receiving agent makes a read-only call the sender had already
  made successfully before handing off: the sender had the result and did not pass it on
  (once the run has changed the system, reading again is checking the change, not redoing);
- `error_not_passed_on`: the sender saw a tool call fail, and the hand-off message mentions
  neither the failure nor the failing tool; reported once the receiver's next model call shows
  what it was given (or at close), and not when that call's input holds the failure's result
  itself (or the failed call's answer, by its call id): in a team's shared conversation (a
  group chat) the receiver reads the failure. Neither rule reports a call whose result the
  receiver's model input held (`redone_after_handoff` then is a check, not a redo).

And towards the user: `unpriced_consent` (withholding_consent.py), a yes asked for a change
that names a means of payment, with no amount told.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import Detector, DetectorContext, DetectorFactory, short
from mast_otel.processors.detectors.withholding_consent import ConsentRules, Consents, Unpriced
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import DetectorRun, Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_MUTATING = ActionKind.MUTATING
_HANDOFF = StepKind.HANDOFF
_TOOL = StepKind.TOOL
_LLM = StepKind.LLM

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


@dataclass
class WithholdingConfig:
    """FM-2.4 information withholding: after a hand-off, the receiver redoes the sender's call, or
    an error is not passed on."""

    # Run this detector.
    enabled: bool = True
    # `unpriced_consent`: a model message asking the user for a yes ("" turns the rule off).
    consent_pattern: str = (
        r"\b(confirm|proceed|go ahead|would you like|do you want|shall I|should I|"
        r"is that (ok|okay|alright)|are you sure)\b"
    )
    # An argument of a change that names a means of payment.
    payment_argument_pattern: str = r"payment|billing|card|charge|pay_with|paid_with"
    # An amount told: a number with its currency, or a number right after a word of price
    # ("the upgrade costs 180", "fare difference: 105").
    amount_pattern: str = (
        r"(?:[$€£]|\b(?:USD|EUR|GBP)\s?)\s?\d[\d,]*(?:\.\d+)?|"
        r"\b\d[\d,]*(?:\.\d+)?\s?(?:USD|EUR|GBP|dollars|euros|credits)\b|"
        r"\b(?:costs?|price[ds]?|fees?|charged?|total|difference)\b[^.\n\d]{0,24}\d"
    )
    # Words telling the change costs nothing: a price told.
    free_pattern: str = (
        r"\b(no (additional |extra )?(cost|charge|fee|payment)s?|free of charge|"
        r"at no (additional |extra )?cost|(is|are|be|at) free|without (any )?(charge|cost))\b"
    )
    # Words telling money goes back to the user: no charge to decide on.
    credit_pattern: str = r"\b(refund\w*|reimburs\w*|money back|credit(ed)? back)\b"

    def validate(self) -> None:
        """Every value of this section is valid."""
        for name in (
            "consent_pattern",
            "payment_argument_pattern",
            "amount_pattern",
            "free_pattern",
            "credit_pattern",
        ):
            try:
                re.compile(getattr(self, name))
            except re.error as exc:
                raise ValueError(
                    f"detectors.withholding.{name}: invalid regular expression ({exc})"
                ) from exc
        for name in ("payment_argument_pattern", "amount_pattern"):
            if not getattr(self, name):
                raise ValueError(
                    f"detectors.withholding.{name} must not be empty (turn the rule off "
                    'with consent_pattern: "")'
                )


class Withholding(Detector):
    mode = "FM-2.4"
    name = "withholding"
    version = "1.0"
    config: WithholdingConfig

    def __init__(self, config: Any, context: DetectorContext) -> None:
        super().__init__(config, context)
        c = self.config
        self.consent = ConsentRules(
            self.classifier,
            c.consent_pattern,
            c.payment_argument_pattern,
            c.amount_pattern,
            c.free_pattern,
            c.credit_pattern,
        )

    def open(self, run: Run) -> DetectorRun:
        return _WithholdingRun(self)


class _WithholdingRun(DetectorRun):
    __slots__ = (
        "call_ids",
        "changed",
        "changed_since",
        "consents",
        "detector",
        "handed",
        "known",
        "reported",
        "reported_calls",
        "seen",
        "unseen_errors",
    )
    kinds = frozenset({StepKind.HANDOFF, StepKind.TOOL, StepKind.LLM, StepKind.HUMAN})

    def __init__(self, detector: Withholding) -> None:
        self.detector = detector
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
        self.consents = Consents(detector.consent)
        # Receiver → (error_not_passed_on finding, the failure's text, its call id) until its
        # next call.
        self.unseen_errors: dict[str, tuple[Finding, str, str]] = {}
        # A tool step's call id, by span (the reads and failures remembered name their span).
        self.call_ids: dict[str, str] = {}
        # Receiver → the call ids whose results its latest model input held.
        self.seen: dict[str, frozenset[str]] = {}

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        if step.kind is _LLM and step.agent in self.unseen_errors:
            finding, failure, call_id = self.unseen_errors.pop(step.agent)
            if not _holds(step, failure, call_id):
                return [finding, *self.on_step(step, run)]
        unpriced = self.consents.step(step, run)
        if unpriced is not None:
            return [self._unpriced(unpriced, run)]
        if step.kind is _HANDOFF and step.target_agent:
            return self._on_handoff(step, run)
        if step.kind is _LLM and step.agent in self.handed:
            self.seen[step.agent] = _results_held(step)
        if step.kind is not _TOOL or not step.tool_name:
            return ()
        if step.tool_call_id and len(self.call_ids) < _MAX_CALLS_PER_AGENT:
            self.call_ids[step.span_id] = step.tool_call_id
        knowledge = self.known.setdefault(step.agent, _Knowledge())
        classifier = self.detector.classifier
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
            self.detector.finding(
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

    def _unpriced(self, found: Unpriced, run: Run) -> Finding:
        call = found.call
        charged = ", ".join(f"{v:g}" for v in found.charged[:4])
        shown = f" (its result shows {charged} charged)" if charged else ""
        untold = (
            f"though no message told {charged}: the amounts told priced another part of the deal"
            if found.told_other
            else "without telling the user any amount"
        )
        return self.detector.finding(
            at=call,
            rule="unpriced_consent",
            confidence=0.7,
            message=(
                f"the model asked for a yes ({short(found.asked, 120)!r}) and then ran "
                f"{call.tool_name}({short(call.tool_arguments, 120)}), paid with "
                f"{found.argument}{shown}, {untold}"
            ),
            evidence=[found.consent, found.answer, call],
            values={
                "asked": short(found.asked),
                "call": f"{call.tool_name}({short(call.tool_arguments)})",
                "payment": found.argument,
                "charged": list(found.charged[:20]),
            },
            run=run,
        )

    def _on_handoff(self, step: Step, run: Run) -> list[Finding]:
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
            self.detector.finding(
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

    def on_close(self, run: Run) -> Iterable[Finding]:
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


FACTORY = DetectorFactory(
    type="withholding", mode="FM-2.4", config=WithholdingConfig, create=Withholding
)
