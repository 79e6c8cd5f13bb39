"""A group chat as AG2's own tracing sends it, read as the team importer reads its transcript:
teammates' turns arrive as the user's messages without names, code an executor ran is a
code-execution span under the executor's agent span, and the answer that wrote the code has
no calls. The detectors must see the writer's calls, one per block, answered by the executor's
reply; the user's task as the only user's turn; the executor as a speaker when it spoke."""

from __future__ import annotations

import json
from typing import Any

from mast_otel.processors.model import Step, StepKind
from mast_otel.processors.normalize import normalize_span
from mast_otel.processors.records import SpanRecord
from mast_otel.processors.run import DetectorRun, Run
from mast_otel.processors.window import RunWindows, WindowConfig
from tests.imported import read_steps

TRACE = "ab" * 16
TASK = "How many rows does data.csv have?"
CODE = "Let me count them.\n```python\nprint(len(open('data.csv').readlines()))\n```"
REPLY = "exitcode: 1 (execution failed)\nCode output: FileNotFoundError: data.csv\n"
ANSWER = "The file is missing, so the count is unknown."
NO_CODE = "There is no code from the last 1 message for me to execute."


def _span(span: int, parent: int, attributes: dict[str, Any], status: str = "Unset") -> Step:
    record = SpanRecord(
        trace_id=TRACE,
        span_id=f"{span:016x}",
        parent_span_id=f"{parent:016x}" if parent else "",
        name=str(attributes.get("gen_ai.operation.name")),
        start_ns=span * 1_000_000_000,
        end_ns=span * 1_000_000_000 + 500,
        status_code=status,
        service_name="team",
        attributes={"ag2.span.type": "agent", **attributes},
    )
    step = normalize_span(record)
    assert step is not None
    return step


def _messages(*pairs: tuple[str, str]) -> str:
    return json.dumps([{"role": r, "parts": [{"type": "text", "content": t}]} for r, t in pairs])


def _agent(span: int, agent: str, reply: str) -> Step:
    return _span(
        span,
        1,
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "gen_ai.output.messages": _messages(("assistant", reply)),
        },
    )


def _chat(span: int, parent: int, agent: str, inputs: list[tuple[str, str]], answer: str) -> Step:
    return _span(
        span,
        parent,
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.agent.name": agent,
            "gen_ai.input.messages": _messages(*inputs),
            "gen_ai.output.messages": _messages(("assistant", answer)),
        },
    )


def _code_run(span: int, parent: int, exit_code: int | None) -> Step:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_code",
        "gen_ai.agent.name": "Computer_terminal",
    }
    if exit_code is not None:
        attributes["ag2.code_execution.exit_code"] = exit_code
        attributes["ag2.code_execution.output"] = REPLY.split("Code output: ")[1].strip()
        attributes["error.type"] = "CodeExecutionError" if exit_code else ""
    return _span(span, parent, attributes, "Error" if exit_code else "Unset")


def _root() -> Step:
    return _span(1, 0, {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "team"})


def _group_chat(ran: bool) -> list[Step]:
    """The user's task; Data_Expert writes code; the terminal runs it (or Checker speaks);
    Checker answers, its input holding the others' turns as user messages."""
    steps = [_root(), _agent(2, "Data_Expert", CODE)]
    steps.append(_chat(3, 2, "Data_Expert", [("system", ""), ("user", TASK)], CODE))
    said = REPLY if ran else NO_CODE
    speaker = "Computer_terminal" if ran else "Helper"
    steps.append(_agent(4, speaker, said))
    steps.append(_code_run(5, 4, 1) if ran else _chat(5, 4, "Helper", [("user", TASK)], NO_CODE))
    inputs = [("system", ""), ("user", TASK), ("user", CODE), ("user", said)]
    steps += [_agent(6, "Checker", ANSWER), _chat(7, 6, "Checker", inputs, ANSWER)]
    return steps


def test_an_ag2_code_run_is_a_tool_step_and_finding_no_code_is_none() -> None:
    ran = _code_run(5, 4, 1)
    assert (ran.kind, ran.failed) == (StepKind.TOOL, True)
    assert ran.tool_result == REPLY.strip()
    assert _code_run(5, 4, None).kind is StepKind.OTHER


def test_the_code_the_executor_ran_is_the_writers_calls_answered_by_its_reply() -> None:
    seen = read_steps(_group_chat(ran=True))[0]
    writer = next(s for s in seen if s.kind is StepKind.LLM and s.agent == "Data_Expert")
    assert [c.name for c in writer.tool_calls] == ["python"]
    assert json.loads(writer.tool_calls[0].arguments) == {
        "code": "print(len(open('data.csv').readlines()))"
    }
    (tool,) = [s for s in seen if s.kind is StepKind.TOOL]
    assert (tool.agent, tool.tool_name, tool.failed) == ("Data_Expert", "python", True)
    assert tool.tool_result == REPLY  # the executor's reply as its agent span showed it
    assert tool.tool_call_id == writer.tool_calls[0].call_id
    # The teammates' turns in the checker's input are theirs: the task is the only user's.
    assert [s.input_text for s in seen if s.kind is StepKind.HUMAN] == [TASK]
    checker = next(s for s in seen if s.kind is StepKind.LLM and s.agent == "Checker")
    assert checker.input_text == TASK


def test_code_another_agent_spoke_after_asked_for_nothing() -> None:
    seen = read_steps(_group_chat(ran=False))[0]
    writer = next(s for s in seen if s.kind is StepKind.LLM and s.agent == "Data_Expert")
    assert writer.tool_calls == ()
    assert not [s for s in seen if s.kind is StepKind.TOOL]


class _Recorder(DetectorRun):
    __slots__ = ("steps",)

    def __init__(self) -> None:
        self.steps: list[Step] = []

    def on_step(self, step: Step, run: Run) -> tuple[()]:
        self.steps.append(step)
        return ()


def test_a_live_answer_with_code_waits_for_the_executor_and_the_run_for_its_reply() -> None:
    recorders: list[_Recorder] = []

    def open_detectors(run: Run) -> list[DetectorRun]:
        recorders.append(_Recorder())
        return [recorders[-1]]

    windows = RunWindows(WindowConfig(grace_s=0.5, agent_wait_s=5.0), open_detectors)
    root, agent, chat, executor, ran, *rest = _group_chat(ran=True)
    windows.add(chat, 0.0)
    windows.add(agent, 0.0)
    windows.tick(2.0)
    # The answer with code waits for the next turn (spans are exported as they end).
    assert [s.kind for s in recorders[0].steps] == [StepKind.AGENT]
    windows.add(ran, 2.5)
    windows.tick(3.5)
    # The answer is shown; the code run waits for its executor's reply.
    assert [s.kind for s in recorders[0].steps] == [StepKind.AGENT, StepKind.HUMAN, StepKind.LLM]
    windows.add(executor, 3.6)
    for step in rest:
        windows.add(step, 3.6)
    windows.add(root, 3.7)
    windows.tick(4.5)
    windows.close_all()
    shown = recorders[0].steps
    (writer,) = [s for s in shown if s.kind is StepKind.LLM and s.agent == "Data_Expert"]
    assert [c.name for c in writer.tool_calls] == ["python"]
    (tool,) = [s for s in shown if s.kind is StepKind.TOOL]
    assert (tool.agent, tool.tool_result) == ("Data_Expert", REPLY)


def test_an_executor_that_spoke_is_a_speaker_and_one_that_only_ran_code_is_not() -> None:
    def speakers(steps: list[Step]) -> set[str]:
        found: list[set[str]] = []

        class Speakers(DetectorRun):
            __slots__ = ()

            def on_close(self, run: Run) -> tuple[()]:
                found.append(set(run.speakers))
                return ()

        windows = RunWindows(WindowConfig(), lambda run: [Speakers()])
        for step in steps:
            windows.add(step, 0.0)
        windows.close_all()
        return found[0]

    said = [_root(), _agent(2, "Data_Expert", TASK)]
    said.append(_chat(3, 2, "Data_Expert", [("user", TASK)], CODE))
    said += [_agent(4, "Computer_terminal", REPLY), _code_run(5, 4, 1)]
    answered = [_agent(6, "Data_Expert", ANSWER)]
    inputs = [("user", TASK), ("assistant", CODE), ("user", REPLY)]
    answered.append(_chat(7, 6, "Data_Expert", inputs, ANSWER))
    assert speakers(said + answered) == {"Data_Expert"}
    spoke = [_agent(4, "Computer_terminal", NO_CODE), _code_run(5, 4, None)]
    inputs = [("user", TASK), ("assistant", ANSWER), ("user", NO_CODE)]
    spoke.append(_chat(7, 6, "Data_Expert", inputs, ANSWER))
    opening = [_root(), _agent(2, "Data_Expert", ANSWER)]
    opening.append(_chat(3, 2, "Data_Expert", [("user", TASK)], ANSWER))
    assert speakers(opening + spoke + [_agent(6, "Data_Expert", ANSWER)]) == {
        "Data_Expert",
        "Computer_terminal",
    }
