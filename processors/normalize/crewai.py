"""CrewAI's crew and task spans (openinference-instrumentation-crewai) read as what the
agents were told and what they answered.

The instrumentation marks both with `crew_key` and writes CrewAI's objects as JSON: a task's
AGENT span (`<role>._execute_core`, the agent's role as `graph.node.id`) has as input the
agent's settings, the context it was handed (the earlier tasks' answers) and its tools'
reprs, and as output the TaskOutput (the task's description, its answer `raw`, the agent's
whole conversation); the crew's CHAIN span (`<crew>.kickoff`) has the CrewOutput (`raw` and
every task's output). A task is read as its description and the context handed to it, and
answers with its `raw`; the crew answers with its `raw`. Anything else is left as sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mast_otel.processors.normalize import values

CREW_KEY = "crew_key"
TASK_KEY = "task_key"
# Keys of CrewAI's JSON: the task span's input, TaskOutput and CrewOutput.
_CONTEXT = "context"
_AGENT = "agent"
_DESCRIPTION = "description"
_RAW = "raw"


def recognises(attrs: Mapping[str, Any]) -> bool:
    """A crew's or a task's span: CrewAI's instrumentation names the crew on both."""
    return CREW_KEY in attrs


def texts(attrs: Mapping[str, Any], input_value: str, output_value: str) -> tuple[str, str]:
    """(input, output) of a crew's or a task's span: a task's description and the context it
    was handed, and the answer; the values as sent where they are not CrewAI's JSON."""
    output = values.parse_json(output_value)
    if isinstance(output, dict) and isinstance(output.get(_RAW), str):
        answer = output[_RAW]
    else:
        answer, output = output_value, None
    if TASK_KEY not in attrs:
        return input_value, answer
    given = values.parse_json(input_value)
    if not isinstance(given, dict) or _AGENT not in given:
        return input_value, answer
    told = [
        values.to_str(output.get(_DESCRIPTION)) if output is not None else "",
        values.to_str(given.get(_CONTEXT)),
    ]
    return "\n\n".join(text for text in told if text), answer
