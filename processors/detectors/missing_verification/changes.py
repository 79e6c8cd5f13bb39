"""FM-3.2's rules on the run's changes: one never checked, one made on a record never read.

`unverified_change`: a successful mutating call (a tool whose name says it changes something,
a command that writes, as `classification` decides) is not followed, before the run ends, by a
successful read-only call on the same resource: one whose arguments name a resource the change
named (a reservation id, a deployment, a file; compared as structured targets by
`classify.covers`: the same resource in a namespace that agrees, a pod of the changed workload,
a listing of its kind or of its pods in its namespace), or, when the read names nothing, a
tool whose name says it checks the system (alerts, health, status: `check_tool_pattern`).
When the run did read other resources after the change and then declared success, the check
looked in the wrong place: that is incorrect verification (FM-3.3), reported there instead.
A change whose own result is a structured record naming the changed resource (an API returning
the updated reservation or ticket) reported its new state: with `result_state_verifies` that
counts as its check (hand labels of a customer-service corpus never called such a change
unverified; a plain "configured" or "ok" does not count); so does one whose result gives a
record id its arguments did not (the ticket or booking it created). The run's ledger of
changes and reads (verification.py) is the detector's; this rule reads it at close.

    Fires: `kubectl rollout restart deployment/checkout -n shop` ("deployment.apps/checkout
    restarted"), then the model's answer, and the run ends: checkout was never read again.
    Near miss: the same restart, then `kubectl get pods -n shop` ("checkout-8f1 1/1 Running"):
    a listing of the pods in the changed deployment's namespace is its check. So is
    `close_ticket {"ticket_id": "T-42"}` answering `{"id": "T-42", "status": "closed"}` (the
    result is the changed record), where the same call answering "ok" is unverified.

`unchecked_record`: a mutating call acts on a record id (`reservation_id`, a nested
`payment_id`, `ticket_id`: argument keys the classifier reads as ids) that no earlier tool
result showed and no earlier successful read was asked about: the id came only from the
conversation or was made up, and the facts the change relies on were never looked at
(`check_records_read_before`; the words of earlier results are remembered up to
`max_remembered_words`).

    Fires: the user asks "Refund order 7781 to my card card_0042."; `get_order {"order_id":
    "7781"}` returns the order; `issue_refund {"order_id": "7781", "payment": {"payment_id":
    "card_0042"}}`: no result ever showed card_0042.
    Near miss: order 7781 in the same call: `get_order` was asked about it and showed it, so
    the finding names card_0042 only; a refund whose card an earlier read returned is silent.

Both are decided when the run closes, at the span of the change; at most
`max_findings_per_run` findings of each per run. The study's remedy: externalize
verification, so that tool evidence (a cleared alert, the changed state) is required before
the agent may declare success.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from functools import lru_cache

from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.missing_verification.context import MissingVerificationContext
from mast_otel.processors.detectors.verification import (
    ChangeLedger,
    created_record,
    reports_state,
)
from mast_otel.processors.model import Finding, Step, StepRef
from mast_otel.processors.run import Run

_WORD = re.compile(r"[a-z0-9][a-z0-9_.@:/-]*[a-z0-9]|[a-z0-9]")


@lru_cache(maxsize=16)
def _words_of(result: str) -> tuple[str, ...]:
    """A result's words, each once, in order (a result repeated across runs: read once)."""
    return tuple(dict.fromkeys(_WORD.findall(result.lower())))


# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_MUTATING = ActionKind.MUTATING
_READ = ActionKind.READ


class Changes:
    """Per run: the changes whose own result reported their new state, the words and ids the
    run's results and reads showed, and the changes on ids none of them did; with the run's
    ledger, which says which changes were never checked."""

    __slots__ = ("config", "context", "ledger", "self_reported", "shown", "unchecked")

    def __init__(self, context: MissingVerificationContext, ledger: ChangeLedger) -> None:
        self.context = context
        self.config = context.config
        self.ledger = ledger
        # Changes whose own result reported the changed resource's new state (span ids).
        self.self_reported: set[str] = set()
        # Words of earlier tool results and ids earlier reads were asked about.
        self.shown: set[str] = set()
        # (call, ids no earlier result showed), in run order; reported at close.
        self.unchecked: list[tuple[StepRef, str, list[str]]] = []

    def observe(self, step: Step, run: Run) -> None:
        """A tool call's step (the detector passes no other)."""
        classifier = self.context.classifier
        action = classifier.classify(step.tool_name, step.tool_arguments)
        if action.kind is _MUTATING:
            if self.config.check_records_read_before:
                ids = classifier.identifiers(step.tool_arguments)
                missing = sorted(i for i in ids if i not in self.shown)
                if missing and len(self.unchecked) < self.config.max_tracked_mutations:
                    self.unchecked.append((run.ref(step), step.tool_arguments, missing))
            if (
                self.config.result_state_verifies
                and not step.failed
                and (
                    reports_state(step.tool_result, action.targets)
                    or created_record(classifier.identifiers(step.tool_result), step.tool_arguments)
                )
            ):
                self.self_reported.add(step.span_id)
        if not step.failed:
            if action.kind is _READ:
                self._remember(classifier.identifiers(step.tool_arguments))
            self._remember(_words_of(step.tool_result))

    def _remember(self, words: Collection[str]) -> None:
        room = self.config.max_remembered_words - len(self.shown)
        if len(words) <= room:
            self.shown.update(words)  # every new one fits
            return
        for word in words:
            if room <= 0:
                return
            if word not in self.shown:
                self.shown.add(word)
                room -= 1

    def close(self, run: Run) -> list[Finding]:
        """The unverified changes (the last ones), then the changes on unchecked records (the
        first ones)."""
        report = self.context.report
        claimed = self.ledger.claims_success()
        unchecked = [
            c
            for c in self.ledger.changes
            if not c.checks
            and not (claimed and c.other_reads)
            and c.ref.span_id not in self.self_reported
        ]
        findings = []
        for change in unchecked[-self.config.max_findings_per_run :]:
            step = change.ref
            reads = [read.ref for read in change.other_reads[-5:]]
            what = ", ".join(sorted(change.targets)) or "the system"
            findings.append(
                report.finding(
                    at=step,
                    rule="unverified_change",
                    confidence=0.85 if not reads else 0.75,
                    message=(
                        f"{step.tool_name} changed {what} and the run ended without checking "
                        f"the result"
                    ),
                    evidence=[step, *reads],
                    values={
                        "tool": step.tool_name,
                        "arguments": short(change.arguments),
                        "targets": sorted(change.targets),
                        "reads_after_on_other_resources": [s.tool_name for s in reads],
                        "run_closed_by": run.closed_by,
                    },
                    run=run,
                )
            )
        for ref, arguments, missing in self.unchecked[: self.config.max_findings_per_run]:
            findings.append(
                report.finding(
                    at=ref,
                    rule="unchecked_record",
                    confidence=0.7,
                    message=(
                        f"{ref.tool_name} acted on {', '.join(missing[:5])}, which no earlier "
                        f"tool result showed: the facts the change relies on were never read"
                    ),
                    evidence=[ref],
                    values={
                        "tool": ref.tool_name,
                        "arguments": short(arguments),
                        "unread_ids": missing[:20],
                    },
                    run=run,
                )
            )
        return findings
