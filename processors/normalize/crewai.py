"""CrewAI's spans (openinference-instrumentation-crewai): crews and tasks read as what the
agents were told and what they answered, tools named as the model called them.

The instrumentation marks both with `crew_key` and writes CrewAI's objects as JSON: a task's
AGENT span (`<role>._execute_core`, the agent's role as `graph.node.id`) has as input the
agent's settings, the context it was handed (the earlier tasks' answers) and its tools'
reprs, and as output the TaskOutput (the task's description, its answer `raw`, the agent's
whole conversation); the crew's CHAIN span (`<crew>.kickoff`) has the CrewOutput (`raw` and
every task's output). A task is read as its description and the context handed to it, and
answers with its `raw`; the crew answers with its `raw`. Anything else is left as sent.

A tool span carries the tool's CrewAI settings (`tool.result_as_answer`, ...) and its name as
written (`Delegate work to coworker`); the model calls it by crewai's sanitized name
(`delegate_work_to_coworker`), which the tool step takes so that a call and the request for it
agree. A delegation (a manager's, or an agent's with `allow_delegation`) runs the coworker its
arguments name under the tool's span: the step names it as its `target_agent`, whose work that
is (`ancestry`).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from mast_otel.processors.model import Step
from mast_otel.processors.normalize import values

CREW_KEY = "crew_key"
TASK_KEY = "task_key"
# Keys of CrewAI's JSON: the task span's input, TaskOutput and CrewOutput.
_CONTEXT = "context"
_AGENT = "agent"
_DESCRIPTION = "description"
_RAW = "raw"
# A CrewAI tool's own setting, on every tool span the instrumentation writes.
RESULT_AS_ANSWER = "tool.result_as_answer"
# CrewAI's tools handing work or a question to a coworker (named in the arguments).
_DELEGATIONS = frozenset({"delegate_work_to_coworker", "ask_question_to_coworker"})
_COWORKER = "coworker"
# crewai.utilities.string_utils.sanitize_tool_name, step by step.
_CAMEL_UPPER_LOWER = re.compile(r"([A-Z]+)([A-Z][a-z])")
_CAMEL_LOWER_UPPER = re.compile(r"([a-z])([A-Z])")
_QUOTES = re.compile(r"[\'\"]+")
_DISALLOWED = re.compile(r"[^a-zA-Z0-9]+")
_UNDERSCORES = re.compile(r"_+")
_TOOL_NAME_MAX = 64


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


def is_tool(attrs: Mapping[str, Any]) -> bool:
    """A CrewAI tool's span."""
    return RESULT_AS_ANSWER in attrs


def read_tool(step: Step) -> None:
    """The tool step named as the model called it; a delegation naming its coworker."""
    step.tool_name = tool_name(step.tool_name) or step.tool_name
    if step.tool_name in _DELEGATIONS:
        arguments = values.parse_json(step.tool_arguments)
        if isinstance(arguments, dict):
            step.target_agent = values.name(arguments.get(_COWORKER))


def tool_name(name: str) -> str:
    """A CrewAI tool's name as crewai offers it to the model: ASCII, camelCase split, lower
    case, runs of other characters one underscore, at most 64 characters (a longer name cut
    and ended with a hash of it)."""
    text = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    text = _CAMEL_LOWER_UPPER.sub(r"\1_\2", _CAMEL_UPPER_LOWER.sub(r"\1_\2", text))
    text = _DISALLOWED.sub("_", _QUOTES.sub("", text.lower()))
    text = _UNDERSCORES.sub("_", text).strip("_")
    if len(text) > _TOOL_NAME_MAX:
        suffix = "_" + hashlib.sha256(text.encode()).hexdigest()[:8]
        text = text[: _TOOL_NAME_MAX - len(suffix)].rstrip("_") + suffix
    return text
