"""Code an executor agent ran, read as the writing agent's tool calls.

A group chat with a code executor (AG2's, as CaptainAgent builds its teams: the
`Computer_terminal`) runs code this way: an agent writes fenced code blocks (```python, ```sh)
in its message, and the executor, speaking next, runs the blocks of the message before its turn
and replies with the exit code and the output. AG2's tracing shows the model call that wrote
the message (its text: no tool calls), then, under the executor's agent span, a code-execution
span (operation `execute_code`, read as a TOOL step with the exit code) whose agent span's
reply is the executor's whole output. A transcript of the same chat read by the team importer
shows the writer's tool calls, one per block, each answered by that reply. So that both read
alike, the run windows call this module as they release steps in start order:

- a model answer with code blocks and no calls waits for the run's next turn (a model call or
  a tool step), however long: only that turn says whether the code ran, and the run's close
  ends the wait. If that turn is the executor running code, the answer asked for a call per
  block (`python` with the code, `bash` with the command); if an agent spoke, no one ran the
  code and it asked for no call; if nothing followed and the run's executor had run code
  before, the calls were asked for and the run ended on them (each a TOOL step without a
  result at close);
- the code-execution step waits (up to `windows.agent_wait_s`) for its executor's agent span,
  whose reply is every call's result (else the exit code and output on the span are), and is
  shown to the detectors as one TOOL step per block, the writer's, failed when the reply's
  exit code is not 0; a run of code no block of which is a call shows nothing.

Code blocks are read as the team importer reads them (`code_calls`, which it uses). Outside
group chats with an executor no answer is held for long: the next turn decides, and no call
is made up.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator

from mast_otel.processors.model import Step, StepKind, StepStatus, ToolCallRequest
from mast_otel.processors.normalize import values
from mast_otel.processors.normalize.genai_names import CODE_OPERATIONS
from mast_otel.processors.normalize.tool_status import ERROR_TEXT_MAX, mark_failed_result

CODE_BLOCK = re.compile(r"```[ \t]*(?P<lang>[A-Za-z0-9_+-]*)[^\n]*\n(?P<code>.*?)```", re.DOTALL)
EXIT_CODE = re.compile(r"exitcode:\s*(?P<code>-?\d+)", re.IGNORECASE)
# Agents that run the code others wrote (AG2's `Computer_terminal`, Magentic-One's
# `ComputerTerminal`), by name as `is_executor` folds it.
EXECUTORS = frozenset({"computer_terminal", "computerterminal", "code_executor", "executor"})
SHELL_LANGS = frozenset({"sh", "bash", "shell", "console", "zsh"})
PYTHON_LANGS = frozenset({"python", "py", "python3", ""})
FENCE = "```"
CALL_OPERATION = "execute_tool"

_LLM = StepKind.LLM
_TOOL = StepKind.TOOL


def code_calls(text: str) -> list[tuple[str, dict[str, str]]]:
    """(tool name, arguments) for every code block a message holds: `bash` with the command
    for a shell block, `python` with the code for a Python block (or one naming no language)."""
    calls = []
    for match in CODE_BLOCK.finditer(text):
        lang = match["lang"].lower()
        code = match["code"].strip()
        if not code:
            continue
        if lang in SHELL_LANGS:
            calls.append(("bash", {"command": code}))
        elif lang in PYTHON_LANGS:
            calls.append(("python", {"code": code}))
    return calls


def is_executor(agent: str, text: str) -> bool:
    """An agent that runs code others wrote: by name, or a reply that reports an exit code."""
    return agent.lower().replace(" ", "_") in EXECUTORS or bool(EXIT_CODE.match(text.lstrip()[:40]))


def is_code_run(step: Step) -> bool:
    """A code-execution step: an executor ran code."""
    return step.kind is _TOOL and step.operation in CODE_OPERATIONS


def may_ask(step: Step) -> bool:
    """A model answer that may ask an executor to run code: code blocks in its text, no calls."""
    return step.kind is _LLM and not step.tool_calls and FENCE in step.output_text


class ExecutedCode:
    """One run's code runs: the executors' replies awaited, the calls last asked for."""

    __slots__ = ("asked", "ran", "replies")

    def __init__(self) -> None:
        # An executor's agent span (the parent of a code-execution span) → its reply, None
        # until it arrives.
        self.replies: dict[str, str | None] = {}
        # The model call whose calls no run of code has answered yet.
        self.asked: Step | None = None
        self.ran = False

    def arrive(self, step: Step) -> bool:
        """A step arrived: a code run awaits its executor's reply; an executor's span brings it
        (True for the span of an executor that ran code)."""
        if step.operation in CODE_OPERATIONS:
            if step.kind is _TOOL:  # it ran code (finding none, it has nothing to wait for)
                self.replies.setdefault(step.parent_span_id, None)
            return False
        if step.span_id not in self.replies:
            return False
        if step.output_text:
            self.replies[step.span_id] = step.output_text
        return True

    def waits(self, step: Step) -> bool:
        """Whether a code run's executor's reply has yet to arrive."""
        return is_code_run(step) and self.replies.get(step.parent_span_id) is None


def next_turn(step: Step, later: Iterable[Step]) -> Step | None:
    """The first model call or tool step starting after `step`, of those given."""
    found = None
    for other in later:
        if other.kind is not _LLM and other.kind is not _TOOL:
            continue
        if other.start_ns >= step.start_ns and (found is None or other.start_ns < found.start_ns):
            found = other
    return found


def decide(step: Step, later: Iterable[Step], code: ExecutedCode | None) -> None:
    """Give a model answer with code blocks the calls they are, if an executor ran them (or the
    run ended on them after its executor had run code); see the module's docstring."""
    turn = next_turn(step, later)
    ran = is_code_run(turn) if turn is not None else code is not None and code.ran
    if not ran:
        return
    calls = code_calls(step.output_text)
    if not calls:
        return
    step.tool_calls = tuple(
        ToolCallRequest(
            name,
            json.dumps(arguments, ensure_ascii=False),
            f"{step.span_id}#code{offset}",
        )
        for offset, (name, arguments) in enumerate(calls)
    )
    if code is not None:
        code.asked = step


def calls_run(run_of_code: Step, code: ExecutedCode) -> list[Step]:
    """The TOOL steps a code run stands for: one per call its writer asked for, with the
    executor's reply as result."""
    code.ran = True
    asked, code.asked = code.asked, None
    reply = code.replies.pop(run_of_code.parent_span_id, None) or run_of_code.tool_result
    if asked is None:
        return []
    exit_code = EXIT_CODE.search(reply[:200])
    failed = exit_code is not None and exit_code["code"] != "0"
    error = values.truncate(reply.strip(), ERROR_TEXT_MAX) if failed else ""
    return [_call_step(run_of_code, asked, call, reply, failed, error) for call in asked.tool_calls]


def unanswered(code: ExecutedCode | None) -> Iterator[Step]:
    """At close: the calls the run ended on, TOOL steps without a result."""
    if code is None or code.asked is None:
        return
    asked, code.asked = code.asked, None
    for call in asked.tool_calls:
        step = _call_step(asked, asked, call, "", False, "")
        step.start_ns = step.end_ns = asked.end_ns
        step.result_unknown = True
        yield step


def _call_step(
    span: Step, asked: Step, call: ToolCallRequest, reply: str, failed: bool, error: str
) -> Step:
    step = Step(
        trace_id=span.trace_id,
        span_id=span.span_id,
        parent_span_id=span.parent_span_id,
        name=f"{CALL_OPERATION} {call.name}",
        kind=_TOOL,
        start_ns=span.start_ns,
        end_ns=span.end_ns,
        dialect=span.dialect,
        status=StepStatus.ERROR if failed else StepStatus.UNSET,
        error=error,
        service=span.service,
        agent=asked.agent,
        operation=CALL_OPERATION,
        tool_name=call.name,
        tool_call_id=call.call_id,
        tool_arguments=call.arguments,
        tool_result=reply,
    )
    return mark_failed_result(step)


def following(
    ready: list[tuple[float, Step]], i: int, pending: list[tuple[float, Step]]
) -> Iterator[Step]:
    """The steps after the `i`th of those being released, and those still waiting."""
    for _, step in ready[i + 1 :]:
        yield step
    for _, step in pending:
        yield step


def wait_until(
    step: Step,
    ready: list[tuple[float, Step]],
    i: int,
    pending: list[tuple[float, Step]],
    code: ExecutedCode | None,
    bound: float,
) -> float:
    """Until when the `i`th step being released waits for more of its run (0: it does not): a
    model answer with code blocks until its next turn arrives, however long (only that turn
    says whether the code ran; the run's close ends the wait); a code run until its executor's
    reply arrives, or `bound`."""
    if may_ask(step):
        return 0.0 if next_turn(step, following(ready, i, pending)) is not None else math.inf
    if code is not None and code.waits(step):
        return bound
    return 0.0
