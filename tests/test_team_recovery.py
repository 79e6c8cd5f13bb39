"""Conversation recovery on team runs: every agent's model input holds its teammates' turns,
and none of them may come back as a step of its own (a second copy of a teammate's code run,
a user's turn that was an agent's message)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from mast_otel.collector.importers import team
from mast_otel.processors.model import Step, StepKind
from mast_otel.processors.normalize import normalize_span
from mast_otel.processors.records import SpanRecord
from tests import corpora
from tests.imported import read_steps, steps_of

TASK = "How many rows does data.csv have?"
GROUP_CHAT: list[dict[str, Any]] = [
    {"role": "assistant", "name": "Planner_Expert", "content": f"Task: {TASK}"},
    {"role": "user", "name": "Data_Expert", "content": "```python\nprint(open('d.csv'))\n```"},
    {"role": "user", "name": "Computer_terminal", "content": "exitcode: 1 (execution failed)\n"
     "Code output: FileNotFoundError: d.csv"},
    {"role": "user", "name": "Data_Expert", "content": "```python\nprint(open('data.csv'))\n```"},
    {"role": "user", "name": "Computer_terminal", "content": "exitcode: 0 (execution "
     "succeeded)\nCode output: 42"},
    {"role": "user", "name": "Computer_terminal", "content": "There is no code to execute."},
    {"role": "user", "name": "Verification_Expert", "content": "```python\nprint(42)\n```"},
    {"role": "user", "name": "Computer_terminal", "content": "exitcode: 0 (execution "
     "succeeded)\nCode output: 42"},
    {"role": "user", "name": "Planner_Expert", "content": "The file has 42 rows. TERMINATE"},
]  # fmt: skip


def _steps(tmp_path: Path, doc: object) -> list[Step]:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    (run,) = list(team.runs(str(path)))
    return read_steps(steps_of(run))[0]


def test_teammates_turns_in_a_model_input_are_not_steps_again(tmp_path: Path) -> None:
    steps = _steps(tmp_path, {"question": TASK, "history": GROUP_CHAT})
    tools = [s for s in steps if s.kind is StepKind.TOOL]
    # One step per code block, by its writer, each once: no teammate's input repeats them.
    assert [(s.agent, s.failed) for s in tools] == [
        ("Data_Expert", True),
        ("Data_Expert", False),
        ("Verification_Expert", False),
    ]
    assert len({s.span_id for s in tools}) == 3
    humans = [s.input_text for s in steps if s.kind is StepKind.HUMAN]
    # The task is the only user's turn: the executor's and the experts' messages are not.
    assert humans == [TASK]


def test_a_magentic_task_said_twice_is_one_user_turn(tmp_path: Path) -> None:
    history = [
        {"role": "human", "content": f"{TASK} The file is in the working folder."},
        {"role": "Orchestrator (-> Assistant)", "content": "Count the rows of data.csv."},
        {"role": "Assistant", "content": "It has 42 rows."},
    ]
    steps = _steps(tmp_path, {"question": TASK, "history": history})
    assert [s.kind for s in steps].count(StepKind.HUMAN) == 1


def _chat(span: int, agent: str, inputs: list[dict[str, Any]], answer: str) -> Step:
    """A live AG2-style model call: each agent sees its teammates' turns as named user
    messages (GenAI `gen_ai.input.messages` with `name`)."""
    record = SpanRecord(
        trace_id="cd" * 16,
        span_id=f"{span:016x}",
        parent_span_id="",
        name=f"chat {agent}",
        start_ns=span * 1_000_000_000,
        end_ns=span * 1_000_000_000 + 500,
        service_name="team",
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.agent.name": agent,
            "gen_ai.input.messages": json.dumps(inputs),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]
            ),
        },
    )
    step = normalize_span(record)
    assert step is not None
    return step


def _text(role: str, text: str, name: str = "") -> dict[str, Any]:
    message: dict[str, Any] = {"role": role, "parts": [{"type": "text", "content": text}]}
    if name:
        message["name"] = name
    return message


def test_named_teammates_messages_are_no_user_turns() -> None:
    task = _text("user", TASK)
    planner_1 = "Data_Expert, please count the rows."
    counter = "The file has 42 rows."
    steps = [
        _chat(1, "Planner", [task], planner_1),
        _chat(2, "Data_Expert", [task, _text("user", planner_1, "Planner")], counter),
        _chat(
            3,
            "Planner",
            [
                task,
                _text("assistant", planner_1),
                _text("user", counter, "Data_Expert"),
                _text("user", "Also count the columns, please."),
            ],
            "Data_Expert, count the columns too.",
        ),
    ]
    seen = read_steps(steps)[0]
    humans = [s.input_text for s in seen if s.kind is StepKind.HUMAN]
    # The user's two turns; the teammate's answer in the planner's input is not one.
    assert humans == [TASK, "Also count the columns, please."]


def test_no_who_and_when_run_gains_a_copy_of_a_step() -> None:
    for path in sorted(corpora.who_and_when_dir().glob("*/*.json")):
        (run,) = list(team.runs(str(path)))
        raw = steps_of(run)
        seen = read_steps(raw)[0]
        sent = Counter(s.kind for s in raw)
        shown = Counter(s.kind for s in seen)
        assert shown[StepKind.TOOL] == sent[StepKind.TOOL], path
        # The task, once.
        assert shown[StepKind.HUMAN] == 1, path
