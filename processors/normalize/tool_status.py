"""A tool's result that says the call failed, where the span's status says nothing.

Function-calling harnesses (tau-bench's among them) catch a tool's exception and hand the model
its message as the result, "Error: ..."; the tool span, if there is one, keeps status Unset, and
an instrumentation without tool spans shows only that text in the next model call's input. Both
read the same: the call failed, with that text as its error. OpenInference's tool spans
(autogen-agentchat's among them) are set Ok before the result is read, and a later Error is
ignored by the SDK: there an Ok status says nothing either.
"""

from __future__ import annotations

import re

from mast_otel.processors.model import Step, StepKind, StepStatus
from mast_otel.processors.normalize import values

FAILED_RESULT = re.compile(r"\s*Error\b")
ERROR_TEXT_MAX = 500
OPENINFERENCE = "openinference"


def failed_result(text: str) -> bool:
    """Whether a tool's result says the call failed ("Error: ...")."""
    return FAILED_RESULT.match(text) is not None


def mark_failed_result(step: Step) -> Step:
    """A tool step whose status says nothing and whose result says it failed, marked failed."""
    if (
        step.kind is StepKind.TOOL
        and (
            step.status is StepStatus.UNSET
            or (step.status is StepStatus.OK and step.dialect == OPENINFERENCE)
        )
        and step.tool_result
        and failed_result(step.tool_result)
    ):
        step.status = StepStatus.ERROR
        step.error = step.error or values.truncate(step.tool_result.strip(), ERROR_TEXT_MAX)
    return step
