"""Conversation recovery: user turns, instructions and tool results that exist only inside the
model calls' inputs, read the same in every dialect and placed where they happened.

The runs here are built as instrumentations send them: a `chat` span per model call whose
input holds the conversation so far, with or without tool spans, in the GenAI, OpenInference
and OpenLLMetry spellings, and as per-message events."""

from __future__ import annotations

import json
from typing import Any

from mast_otel.processors.model import Step, StepKind, StepStatus
from mast_otel.processors.normalize import genai_messages, history, normalize_span
from mast_otel.processors.records import SpanRecord
from tests.imported import read_steps

TRACE = "ab" * 16
SYSTEM = "You are the helpdesk agent. Always confirm before changing anything."
TASK = "Please reset the VPN token for user E1187."
CALL = {"id": "call_1", "name": "get_user", "arguments": {"user_id": "E1187"}}
RESULT = '{"user_id": "E1187", "vpn": "locked"}'
CHANGE = {"id": "call_2", "name": "reset_vpn_token", "arguments": {"user_id": "E1187"}}


def _part(text: str) -> dict[str, Any]:
    return {"type": "text", "content": text}


def _call_part(call: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_call", **call}


def _response(call_id: str, text: str) -> dict[str, Any]:
    return {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": call_id, "response": text}],
    }


# The conversation, message by message, and the model's answers (GenAI message JSON).
OPENING = [
    {"role": "system", "parts": [_part(SYSTEM)]},
    {"role": "user", "parts": [_part(TASK)]},
]
ANSWER_1 = {"role": "assistant", "parts": [_call_part(CALL)]}
ANSWER_2 = {"role": "assistant", "parts": [_part("The token is locked. Shall I reset it?")]}
USER_YES = {"role": "user", "parts": [_part("Yes, go ahead.")]}
ANSWER_3 = {"role": "assistant", "parts": [_call_part(CHANGE)]}
ANSWER_4 = {"role": "assistant", "parts": [_part("Done: the token is reset.")]}
ERROR = "Error: token service unavailable"

INPUTS = [
    OPENING,
    [*OPENING, ANSWER_1, _response("call_1", RESULT)],
    [*OPENING, ANSWER_1, _response("call_1", RESULT), ANSWER_2, USER_YES],
    [
        *OPENING,
        ANSWER_1,
        _response("call_1", RESULT),
        ANSWER_2,
        USER_YES,
        ANSWER_3,
        _response("call_2", ERROR),
    ],
]
ANSWERS = [ANSWER_1, ANSWER_2, ANSWER_3, ANSWER_4]


def _span(
    number: int,
    name: str,
    attributes: dict[str, Any],
    parent: str = "f" * 16,
    start: int | None = None,
) -> SpanRecord:
    start_ns = start if start is not None else number * 1_000_000_000
    return SpanRecord(
        trace_id=TRACE,
        span_id=f"{number:016x}",
        parent_span_id=parent,
        name=name,
        start_ns=start_ns,
        end_ns=start_ns + 100_000_000,
        attributes=attributes,
    )


def _root() -> SpanRecord:
    return _span(
        0,
        "invoke_agent helpdesk",
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helpdesk"},
        parent="",
        start=0,
    )


def _genai_run(tool_spans: bool, inputs: list[list[dict[str, Any]]] | None = None) -> list[Step]:
    records = [_root()]
    number = 1
    for position, (given, answer) in enumerate(zip(inputs or INPUTS, ANSWERS, strict=True)):
        records.append(
            _span(
                number,
                "chat gpt-4o",
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.agent.name": "helpdesk",
                    "gen_ai.input.messages": json.dumps(given),
                    "gen_ai.output.messages": json.dumps([answer]),
                },
                start=(position + 1) * 10_000_000_000,
            )
        )
        number += 1
        if tool_spans:
            for part in answer["parts"]:
                if part["type"] != "tool_call":
                    continue
                result = RESULT if part["id"] == "call_1" else ERROR
                records.append(
                    _span(
                        number,
                        f"execute_tool {part['name']}",
                        {
                            "gen_ai.operation.name": "execute_tool",
                            "gen_ai.agent.name": "helpdesk",
                            "gen_ai.tool.name": part["name"],
                            "gen_ai.tool.call.id": part["id"],
                            "gen_ai.tool.call.arguments": json.dumps(part["arguments"]),
                            "gen_ai.tool.call.result": result,
                        },
                        start=(position + 1) * 10_000_000_000 + 200_000_000,
                    )
                )
                number += 1
    steps = [s for r in records if (s := normalize_span(r)) is not None]
    return steps


def _shape(steps: list[Step]) -> list[tuple[str, str]]:
    out = []
    for step in steps:
        if step.kind is StepKind.HUMAN:
            out.append(("human", step.input_text))
        elif step.kind is StepKind.TOOL:
            out.append(("tool", f"{step.tool_name} {step.status} {step.tool_result[:12]}"))
        elif step.kind is StepKind.LLM:
            out.append(("llm", ""))
    return out


EXPECTED = [
    ("human", TASK),
    ("llm", ""),
    ("tool", f"get_user unset {RESULT[:12]}"),
    ("llm", ""),
    ("human", "Yes, go ahead."),
    ("llm", ""),
    ("tool", f"reset_vpn_token error {ERROR[:12]}"),
    ("llm", ""),
]


def test_user_turns_and_the_task_come_from_the_inputs():
    steps, attributes = read_steps(_genai_run(tool_spans=True))
    assert _shape(steps) == EXPECTED
    assert attributes["mast.task.description"] == f"{SYSTEM}\n\n{TASK}"
    human = next(s for s in steps if s.input_text == "Yes, go ahead.")
    # Shown at the model call whose input first held it.
    assert human.span_id == f"{4:016x}" and human.agent == "helpdesk"


def test_without_tool_spans_the_inputs_give_the_calls_and_their_results():
    steps, _ = read_steps(_genai_run(tool_spans=False))
    assert _shape(steps) == EXPECTED
    failed = next(s for s in steps if s.tool_name == "reset_vpn_token")
    assert failed.failed and failed.error.startswith("Error: token service")
    # A recovered call points at the model call that asked for it.
    assert failed.span_id == f"{3:016x}"
    assert json.loads(failed.tool_arguments) == {"user_id": "E1187"}


def test_a_run_that_sets_its_task_keeps_it():
    steps = _genai_run(tool_spans=True)
    steps[0].run_attributes["mast.task.description"] = "Reset tokens only when asked."
    _, attributes = read_steps(steps)
    assert attributes["mast.task.description"] == "Reset tokens only when asked."


def test_an_input_that_keeps_only_recent_messages_is_read_after_the_last_answer():
    # A sliding window: the opening falls out of later inputs; the previous answer is found.
    cut = [INPUTS[0], INPUTS[1][-2:], INPUTS[2][-3:], INPUTS[3][-3:]]
    steps, attributes = read_steps(_genai_run(tool_spans=False, inputs=cut))
    assert _shape(steps) == EXPECTED
    assert attributes["mast.task.description"] == f"{SYSTEM}\n\n{TASK}"


def test_a_user_turn_sent_as_its_own_span_is_not_read_twice():
    steps = _genai_run(tool_spans=True)
    turn = _span(90, "user message", {}, start=25_000_000_000)
    turn.events = []
    from mast_otel.processors.records import SpanEvent

    turn.events.append(
        SpanEvent(25_000_000_000, "gen_ai.user.message", {"content": "Yes, go ahead."})
    )
    human = normalize_span(turn)
    assert human is not None and human.kind is StepKind.HUMAN
    read, _ = read_steps([*steps, human])
    assert [s.input_text for s in read if s.kind is StepKind.HUMAN] == [TASK, "Yes, go ahead."]


def test_a_call_the_run_ended_on_is_shown_at_close_without_a_result():
    inputs = INPUTS[:3]
    records = _genai_run(tool_spans=False, inputs=[*inputs, INPUTS[3]])[:-1]  # no last call
    steps, _ = read_steps(records)
    last = steps[-1]
    assert last.kind is StepKind.TOOL and last.tool_name == "reset_vpn_token"
    assert last.tool_result == "" and last.status is StepStatus.UNSET


def test_openinference_and_openllmetry_inputs_read_alike():
    oi = _span(
        1,
        "ChatCompletion",
        {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": SYSTEM,
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.content": TASK,
            "llm.input_messages.2.message.role": "assistant",
            "llm.input_messages.2.message.tool_calls.0.tool_call.id": "call_1",
            "llm.input_messages.2.message.tool_calls.0.tool_call.function.name": "get_user",
            "llm.input_messages.2.message.tool_calls.0.tool_call.function.arguments": "{}",
            "llm.input_messages.3.message.role": "tool",
            "llm.input_messages.3.message.tool_call_id": "call_1",
            "llm.input_messages.3.message.content": RESULT,
        },
    )
    ll = _span(
        2,
        "openai.chat",
        {
            "llm.request.type": "chat",
            "gen_ai.prompt.0.role": "system",
            "gen_ai.prompt.0.content": SYSTEM,
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": TASK,
            "gen_ai.prompt.2.role": "assistant",
            "gen_ai.prompt.2.tool_calls.0.id": "call_1",
            "gen_ai.prompt.2.tool_calls.0.name": "get_user",
            "gen_ai.prompt.2.tool_calls.0.arguments": "{}",
            "gen_ai.prompt.3.role": "tool",
            "gen_ai.prompt.3.tool_call_id": "call_1",
            "gen_ai.prompt.3.content": RESULT,
        },
    )
    for record in (oi, ll):
        step = normalize_span(record)
        assert step is not None
        assert [(m.role, m.text, m.call_id) for m in step.input_history] == [
            ("system", SYSTEM, ""),
            ("user", TASK, ""),
            ("assistant", "", ""),
            ("tool", RESULT, "call_1"),
        ]
        assert [c.name for c in step.input_history[2].calls] == ["get_user"]


def test_message_events_build_the_same_input():
    step = normalize_span(_span(1, "chat gpt-4o", {"gen_ai.operation.name": "chat"}))
    assert step is not None
    for event, body in (
        ("gen_ai.system.message", {"content": SYSTEM}),
        ("gen_ai.user.message", {"content": TASK}),
        (
            "gen_ai.assistant.message",
            {
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_user", "arguments": "{}"},
                    }
                ]
            },
        ),
        ("gen_ai.tool.message", {"content": RESULT, "id": "call_1"}),
    ):
        genai_messages.apply_message_event(step, event, body)
    assert [(m.role, m.call_id) for m in step.input_history] == [
        ("system", ""),
        ("user", ""),
        ("assistant", ""),
        ("tool", "call_1"),
    ]
    assert step.input_history[3].text == RESULT and step.input_messages == 4


def test_inputs_are_bounded_and_hostile_values_do_not_raise():
    many = [{"role": "system", "content": SYSTEM}] + [
        {"role": "user" if i % 2 else "assistant", "content": "x" * 100_000} for i in range(5000)
    ]
    read = history.from_messages(many, 16_384)
    assert len(read) <= history.HEAD_MAX + history.TAIL_MAX
    assert read[0].role == "system" and all(len(m.text) < 20_000 for m in read)
    hostile: list[Any] = [
        None,
        3,
        [],
        {"role": ["user"]},
        {"role": "user", "content": {"a": [1]}},
        {"role": "tool", "parts": "nope"},
        {"role": "assistant", "tool_calls": 7},
    ]
    assert [m.role for m in history.from_messages(hostile, 100)] == ["user", "tool", "assistant"]


def test_a_receiving_agents_first_input_repeats_the_run_and_adds_nothing():
    steps = _genai_run(tool_spans=False)
    handed = _span(
        50,
        "chat gpt-4o",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.agent.name": "fixer",
            "gen_ai.input.messages": json.dumps([*INPUTS[3], ANSWER_4, USER_YES]),
            "gen_ai.output.messages": json.dumps([ANSWER_4]),
        },
        start=60_000_000_000,
    )
    receiver = normalize_span(handed)
    assert receiver is not None
    read, _ = read_steps([*steps, receiver])
    assert _shape(read) == [*EXPECTED, ("llm", "")]


def test_tool_results_sent_in_a_user_message_are_tool_messages():
    # pydantic-ai puts a model request's tool returns in a `user` message.
    read = history.from_messages(
        [
            {
                "role": "user",
                "parts": [
                    {"type": "tool_call_response", "id": "call_1", "response": RESULT},
                    {"type": "text", "content": "and also check the mail quota"},
                ],
            }
        ],
        1000,
    )
    assert [(m.role, m.text, m.call_id) for m in read] == [
        ("tool", RESULT, "call_1"),
        ("user", "and also check the mail quota", ""),
    ]
