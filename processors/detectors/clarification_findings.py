"""The findings of FM-2.2's rules: what each says and which values it keeps."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mast_otel.processors.detectors.base import short
from mast_otel.processors.model import Finding, Step
from mast_otel.processors.run import Run

if TYPE_CHECKING:
    from mast_otel.processors.detectors.clarification import Clarification


def unasked_finding(
    detector: Clarification,
    step: Step,
    choice: tuple[str, str, list[str]],
    run: Run,
    later: bool = False,
) -> Finding:
    """`later`: the other offers came in results read after the change (it chose before
    looking)."""
    key, value, others = choice
    when = "results read after it" if later else "the results also"
    return detector.finding(
        at=step,
        rule="unasked_choice",
        confidence=0.65,
        message=(
            f"{step.tool_name} used {key}={value} without asking which: {when} "
            f"offered {', '.join(others)}, and neither the user nor the instructions named "
            f"it, nor did the agent put it to the user"
        ),
        evidence=[step],
        values={
            "argument": key,
            "value": value,
            "others": others,
            "offered_later": later,
            "action": short(step.tool_arguments),
        },
        run=run,
    )


def ambiguous_finding(detector: Clarification, step: Step, unclear: Step, run: Run) -> Finding:
    return detector.finding(
        at=step,
        rule="ambiguous_then_mutate",
        confidence=0.8,
        message=(
            f"{step.tool_name}({short(step.tool_arguments, 100)}) changed the system right "
            f"after {unclear.tool_name} left the target unclear "
            f"({short(unclear.tool_result or unclear.error, 100)!r}), without asking"
        ),
        evidence=[unclear, step],
        values={
            "unclear_result": short(unclear.tool_result or unclear.error),
            "action": short(step.tool_arguments),
        },
        run=run,
    )


def unnamed_finding(detector: Clarification, step: Step, unnamed: list[str], run: Run) -> Finding:
    return detector.finding(
        at=step,
        rule="unnamed_target",
        confidence=0.6,
        message=(
            f"{step.tool_name} changed {', '.join(unnamed)}, which neither the task nor any "
            f"input or result named"
        ),
        evidence=[step],
        values={"targets": unnamed, "action": short(step.tool_arguments)},
        run=run,
    )
