"""FM-3.1's rules on how the run ended, decided when it closes from what the run did (its
`Course`): at most one of them, the first that applies in the order below.

`empty_answer`: the run ended on a model response with neither text nor a tool call (nor
output tokens), in a run whose responses do record content.
- Fires: a coding agent runs the tests ("1 failed") and its last response is empty.
- Near miss: every response of the run is blank, calls and answers alike: the instrumentation
  records no content, and a blank response says nothing.

`after_failed_call`: the run's last tool call failed and nothing after it recovered (no
successful tool call followed), and no user turn came after it.
- Fires: `close_ticket` fails ("Error: T-1 is locked by billing"), the agent says "T-1 is
  locked by billing, so I cannot close it. Shall I ask billing?", and the run ends.
- Near miss: the user answers "No, leave it, thanks." and the run ends: a user told of the
  failure who ends the conversation made that choice.

`announced_only`: the last sentence of the final answer only announces what the agent would do
next (`announcement_pattern`: "I will now check the logs.", "Let me look into it."), with no
call after it.
- Fires: "I see two charges on INV-7. Let me check the payment log for the second one."
- Near miss: "Let me check the payment log." with its call, then "The second charge was a
  retry after a timeout. Let me know if you want a refund.": "let me know" announces nothing.

`no_tool_call`: the run ended after `min_answers_without_tools` answers without a single tool
call: the request was answered from words alone, never acted on or looked up; reported at the
first answer. A run whose agent handed work to another (a hand-off the instrumentation sent)
acted through it.
- Fires: "What is the balance on my gift cards?", "I'm unable to provide gift card balances.
  Please check your profile.", "ok thanks", "You're welcome!".
- Near miss: the same run with `min_answers_without_tools: 0`; or a run that made one call.

`parked_on_user`: the run changed nothing (no successful mutating call) and its final answer
leaves the request waiting until the user comes back with something (`deferral_pattern`:
"once you have the reservation ID", "whenever you have the order number"): the agent stopped
instead of finding it.
- Fires: a helpdesk agent looks up dana.k (devices LT-0412 and LT-0977), reads LT-0412 (a
  phone) and ends "Once you have the asset tag of the laptop, send it and I will start the
  re-image." (it could have read LT-0977).
- Near miss: "Work order W-1 is open. Once you have a backup, tell me." after opening the work
  order: the request was acted on. "If you have any questions, let me know." and "when you
  have a moment" wait for nothing.

`pending_steps`: the final answer itself says work remains (`signals.pending_pattern`: "next
steps:", "still need to", "not yet verified", ...).
- Fires: after the alerts, pods and logs, "checkout is OOMKilled at 64Mi. Next steps: raise
  the memory limit and verify."
- Near miss: the agent raises the limit, checks the pods and alerts, and says it is resolved.

`no_deliverable`: the task requires a deliverable (`required_final_pattern`, e.g. "root
cause") and the final answer does not contain it.
- Fires: with `required_final_pattern: "root cause"`, the run lists the pods and ends
  "checkout pods listed."
- Near miss: it ends "The root cause is a 64Mi memory limit."
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from mast_otel.processors.detectors.base import short
from mast_otel.processors.detectors.premature_termination.context import (
    PrematureTerminationContext,
)
from mast_otel.processors.detectors.signals import is_final_answer
from mast_otel.processors.model import Finding, Step
from mast_otel.processors.run import Run

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


class Course:
    """What a run did, as far as the rules on its ending read it (kept by the detector's
    per-run state as the steps come)."""

    __slots__ = (
        "answers",
        "calls",
        "changed",
        "content_seen",
        "delegated",
        "first_answer",
        "human_after_tool",
        "last_model",
        "last_tool",
    )

    def __init__(self) -> None:
        self.last_tool: Step | None = None
        self.last_model: Step | None = None
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


class Ending:
    """The rules on a run's ending; one for the detector, reading each run's `Course`."""

    __slots__ = ("config", "context")

    def __init__(self, context: PrematureTerminationContext) -> None:
        self.context = context
        self.config = context.config

    def judge(self, course: Course, run: Run) -> Iterable[Finding]:
        tool, model = course.last_tool, course.last_model
        report = self.context.report
        final = model if model is not None and is_final_answer(model, run) else None
        ended_on_model = model is not None and (tool is None or model.start_ns >= tool.start_ns)
        if ended_on_model and model is not None and course.content_seen and blank(model):
            return [
                report.finding(
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
            and not course.human_after_tool
            and (model is None or model.start_ns >= tool.start_ns)
        ):
            return [
                report.finding(
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
        if self.context.announcement.search(last_sentence):
            return [
                report.finding(
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
        first = course.first_answer
        if (
            minimum
            and course.calls == 0
            and not course.delegated
            and course.answers >= minimum
            and first is not None
        ):
            return [
                report.finding(
                    at=first,
                    rule="no_tool_call",
                    confidence=0.6,
                    message=(
                        f"the run ended after {course.answers} answers without a single tool "
                        f"call: the request was never looked up or acted on; first answer: "
                        f"{short(first.output_text, 120)!r}"
                    ),
                    evidence=[first, final],
                    values={
                        "answers": course.answers,
                        "first_answer": short(first.output_text, 300),
                        "final_answer": short(final.output_text, 300),
                    },
                    run=run,
                )
            ]
        deferral = self.context.deferral
        waits = deferral.search(final.output_text) if deferral and not course.changed else None
        if waits is not None:
            return [
                report.finding(
                    at=final,
                    rule="parked_on_user",
                    confidence=0.65,
                    message=(
                        f"the run changed nothing and ended waiting for the user to come back "
                        f"({short(_sentence_of(final.output_text, waits.start()), 140)!r}) "
                        f"after {course.calls} tool call{'s' if course.calls != 1 else ''}"
                    ),
                    evidence=[final],
                    values={"final_answer": short(final.output_text, 300), "calls": course.calls},
                    run=run,
                )
            ]
        if self.context.signals.pending.found(final.output_text):
            return [
                report.finding(
                    at=final,
                    rule="pending_steps",
                    confidence=0.7,
                    message="the final answer says work remains, and the run ended there",
                    evidence=[final],
                    values={"final_answer": short(final.output_text, 300)},
                    run=run,
                )
            ]
        required = self.context.required
        if required is not None and not required.search(final.output_text):
            return [
                report.finding(
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


def blank(step: Step) -> bool:
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
