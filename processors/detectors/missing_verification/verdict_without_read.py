"""FM-3.2's `verdict_without_read`: the agent rules on the user's case having read nothing.

The agent tells the user a verdict on their own case ("you are eligible", "your booking cannot
be refunded", "neither condition applies to your order") or offers compensation for it ("I can
offer a certificate"): `verdict_pattern`, as a fact (no
condition, no question, no intention to check in the sentence: `verdict_hedge_pattern`), at a
point where the run has made no successful read-only call at all: the facts the verdict rests
on came from the user's words or nowhere. Only in runs that call tools (an agent with no tools
has nothing to read). Decided when the run closes; one finding per run.

    Fires: the user writes "I bought the annual plan last week, refund me. I'm acct-118."; the
    agent answers "Good news: you are eligible for a full refund." and only then calls
    `open_ticket`: nothing had been read.
    Near miss: the same answer after `get_subscription {"account_id": "acct-118"}` returned
    the plan (a read came first); "You may be eligible for a refund." (a hedge); the same
    answer from an agent that calls no tool at all (it has nothing to read).
"""

from __future__ import annotations

import re

from mast_otel.processors.classify import ActionKind
from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.missing_verification.context import MissingVerificationContext
from mast_otel.processors.model import Finding, Step, StepKind, StepRef
from mast_otel.processors.run import Run

_READ = ActionKind.READ
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL
_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?](?!\d)|\n|$)")


class Verdicts:
    """Per run: whether anything was read yet, and the first verdict given before any read."""

    __slots__ = ("called", "context", "read", "verdict")

    def __init__(self, context: MissingVerificationContext) -> None:
        self.context = context
        self.read = False
        self.called = False
        self.verdict: tuple[StepRef, str] | None = None

    def observe(self, step: Step, run: Run) -> None:
        if step.kind is _TOOL and step.tool_name:
            self.called = True
            if not self.read and not step.failed:
                action = self.context.classifier.classify(step.tool_name, step.tool_arguments)
                self.read = action.kind is _READ
            return
        pattern = self.context.verdict
        if (
            step.kind is not _LLM
            or self.read
            or self.verdict is not None
            or pattern is None
            or not step.output_text
        ):
            return
        for sentence in _SENTENCE.findall(step.output_text[:20_000]):
            if sentence.rstrip().endswith("?") or self.context.verdict_hedge.search(sentence):
                continue
            if pattern.search(sentence):
                self.verdict = (run.ref(step), short(sentence.strip(), 200))
                return

    def close(self, run: Run) -> list[Finding]:
        if self.verdict is None or not self.called:
            return []
        ref, said = self.verdict
        return [
            self.context.report.finding(
                at=ref,
                rule="verdict_without_read",
                confidence=0.7,
                message=(
                    f"the agent ruled on the user's case ({said!r}) before any tool read "
                    f"anything: the facts it rests on were never checked"
                ),
                evidence=[ref],
                values={"said": said},
                run=run,
            )
        ]
