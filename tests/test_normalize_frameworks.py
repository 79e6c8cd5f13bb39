"""What the framework tests found the frameworks emit, read right without the frameworks:
Kubernetes manifests as arguments, `{"args", "kwargs"}` call wrappers, LangChain ToolMessage
JSON, smolagents' final answer, the Agents SDK's hand-off span, CrewAI's task, crew and tool
spans, message events sent as log records, and content blocks in message events."""

from __future__ import annotations

import json

from mast_otel.processors.classify import ActionClassifier, ActionKind
from mast_otel.processors.model import StepKind
from mast_otel.processors.normalize import genai_messages, normalize_span, payloads
from mast_otel.processors.records import LogRecord, SpanEvent, SpanRecord

MANIFEST = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: checkout
  namespace: shop
spec:
  replicas: 3
"""


def span(name: str, attributes: dict, events: list | None = None, parent: str = "p") -> SpanRecord:
    return SpanRecord(
        trace_id="t" * 32,
        span_id="s" * 16,
        parent_span_id=parent,
        name=name,
        start_ns=1,
        end_ns=2,
        attributes=attributes,
        events=events or [],
    )


def test_a_manifest_names_its_target_and_its_api_version_names_nothing():
    classify = ActionClassifier().classify
    for arguments in (
        json.dumps({"manifest": MANIFEST}),
        MANIFEST,
        "kubectl apply -f - <<EOF\n" + MANIFEST + "EOF",
        json.dumps(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "checkout", "namespace": "shop"},
            }
        ),
    ):
        action = classify("apply_manifest", arguments)
        assert action.kind is ActionKind.MUTATING
        assert action.targets == {"checkout", "shop"}, arguments
    # Not a manifest (no metadata): `apps/v1` is still read as a reference, as before.
    assert "v1" in classify("kubectl", "kubectl get apps/v1").targets
    # A broken manifest is no crash.
    assert classify("apply_manifest", "apiVersion: v1\nkind: [").kind is ActionKind.MUTATING


def test_call_wrappers_give_the_keyword_arguments():
    wrapped = '{"args": [], "sanitize_inputs_outputs": true, "kwargs": {"deployment": "checkout"}}'
    assert json.loads(payloads.call_arguments(wrapped)) == {"deployment": "checkout"}
    assert payloads.call_arguments('{"args": ["the task"], "kwargs": {}}') == "the task"
    assert payloads.call_arguments('{"kwargs": 3, "x": 1}') == '{"kwargs": 3, "x": 1}'
    assert payloads.call_arguments("plain") == "plain"


def test_a_tool_message_gives_its_content_whatever_its_call_id():
    results = [
        payloads.tool_message_content(
            json.dumps({"type": "tool", "data": {"content": "0/3 ready", "tool_call_id": cid}})
        )
        for cid in ("call_1", "call_2")
    ]
    assert results == [("0/3 ready", "call_1"), ("0/3 ready", "call_2")]
    assert payloads.tool_message_content('{"type": "ai"}') == ('{"type": "ai"}', "")


def test_smolagents_final_answer_is_the_answer_not_a_tool_call():
    tool = normalize_span(
        span(
            "FinalAnswerTool",
            {
                "openinference.span.kind": "TOOL",
                "tool.name": "final_answer",
                "input.value": '{"args": [], "kwargs": {"answer": "fixed"}}',
                "output.value": "fixed",
            },
        )
    )
    assert tool is not None and tool.kind is StepKind.OTHER and tool.output_text == "fixed"
    llm = normalize_span(
        span(
            "OpenAIModel.generate",
            {
                "openinference.span.kind": "LLM",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": (
                    "final_answer"
                ),
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": (
                    '{"answer": "fixed"}'
                ),
            },
        )
    )
    assert llm is not None and llm.output_text == "fixed" and llm.tool_calls == ()


def test_the_agents_sdk_handoff_span_is_a_handoff_from_sender_to_receiver():
    step = normalize_span(
        span(
            "handoff to fixer",
            {"openinference.span.kind": "TOOL", "input.value": "triage", "output.value": "fixer"},
        )
    )
    assert step is not None and step.kind is StepKind.HANDOFF
    assert (step.agent, step.target_agent) == ("triage", "fixer")


def test_crewai_tasks_read_as_told_and_answered_and_the_crew_as_its_answer():
    report = "Raised checkout's limit to 512Mi."
    task_output = {"description": "Check the fix.", "raw": "Approved.", "messages": []}
    given = {"agent": {"role": "verifier"}, "context": report, "tools": ["name='get_logs'"]}
    crew = {"openinference.span.kind": "CHAIN", "crew_key": "c"}
    task = normalize_span(
        span(
            "verifier._execute_core",
            crew
            | {
                "openinference.span.kind": "AGENT",
                "task_key": "k",
                "graph.node.id": "verifier",
                "input.value": json.dumps(given),
                "output.value": json.dumps(task_output),
            },
        )
    )
    assert task is not None and task.kind is StepKind.AGENT and task.agent == "verifier"
    assert (task.input_text, task.output_text) == (f"Check the fix.\n\n{report}", "Approved.")
    output = {"raw": "Approved.", "tasks_output": [task_output]}
    kickoff = normalize_span(span("sre.kickoff", crew | {"output.value": json.dumps(output)}))
    assert kickoff is not None and kickoff.output_text == "Approved."
    # Not CrewAI's JSON (a failed task's span has no output): the values as sent.
    failed = normalize_span(
        span("fixer._execute_core", crew | {"task_key": "k", "input.value": "plain"})
    )
    assert failed is not None and (failed.input_text, failed.output_text) == ("plain", "")


def test_crewai_tools_are_named_as_the_model_called_them_and_a_delegation_names_its_coworker():
    tool = {"openinference.span.kind": "TOOL", "tool.result_as_answer": False}
    arguments = {"task": "Fix checkout.", "context": "It crashes.", "coworker": "fixer"}
    delegation = normalize_span(
        span(
            "Delegate work to coworker.run",
            tool | {"tool.name": "Delegate work to coworker", "input.value": json.dumps(arguments)},
        )
    )
    assert delegation is not None and delegation.kind is StepKind.TOOL
    assert (delegation.tool_name, delegation.target_agent) == ("delegate_work_to_coworker", "fixer")
    for name, called in (
        ("Search the internet with Serper", "search_the_internet_with_serper"),
        ("Read a file's content", "read_a_files_content"),
        ("SerperDevTool", "serper_dev_tool"),
        ("get_pod_status", "get_pod_status"),
        ("x" * 70, "x" * 55 + "_c71bd109"),  # crewai's own name for it
    ):
        step = normalize_span(span(f"{name}.run", tool | {"tool.name": name}))
        assert step is not None and step.tool_name == called and not step.target_agent
    # Another instrumentation's tool keeps its name as sent.
    other = normalize_span(
        span("run", {"openinference.span.kind": "TOOL", "tool.name": "Get Logs"})
    )
    assert other is not None and other.tool_name == "Get Logs"


def test_message_events_sent_as_log_records_fill_their_chat_step():
    chat = normalize_span(
        span("chat gpt-4o-mini", {"gen_ai.operation.name": "chat", "gen_ai.system": "openai"})
    )
    assert chat is not None and chat.output_text == ""
    for name, body in (
        ("gen_ai.system.message", {"content": "You are an SRE agent."}),
        ("gen_ai.user.message", {"content": "fix checkout"}),
        (
            "gen_ai.choice",
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {
                                "name": "get_pod_status",
                                "arguments": '{"deployment": "checkout"}',
                            },
                        }
                    ],
                },
            },
        ),
    ):
        record = LogRecord(
            time_ns=1, trace_id="t" * 32, span_id="s" * 16, body=body, event_name=name
        )
        event = genai_messages.message_event(record)
        assert event is not None
        genai_messages.apply_message_event(chat, *event)
    assert chat.input_messages == 2 and chat.input_text == "fix checkout"
    assert [c.name for c in chat.tool_calls] == ["get_pod_status"]
    assert chat.finish_reason == "tool_calls"
    # A log record without its span's ids is no message event of a span.
    assert (
        genai_messages.message_event(LogRecord(time_ns=1, event_name="gen_ai.choice", body={}))
        is None
    )


def test_content_blocks_in_message_events_are_read():
    tool = normalize_span(
        span(
            "execute_tool get_pod_status",
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_pod_status"},
            [
                SpanEvent(
                    1,
                    "gen_ai.tool.message",
                    {"role": "tool", "content": '{"deployment": "checkout"}', "id": "c1"},
                ),
                SpanEvent(2, "gen_ai.choice", {"message": '[{"text": "0/3 ready"}]', "id": "c1"}),
            ],
        )
    )
    assert tool is not None and tool.kind is StepKind.TOOL
    assert json.loads(tool.tool_arguments) == {"deployment": "checkout"}
    assert (tool.tool_result, tool.tool_call_id) == ("0/3 ready", "c1")
    chat = normalize_span(
        span(
            "chat",
            {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"},
            [
                SpanEvent(1, "gen_ai.user.message", {"content": '[{"text": "fix checkout"}]'}),
                SpanEvent(
                    2,
                    "gen_ai.choice",
                    {
                        "finish_reason": "tool_use",
                        "message": json.dumps(
                            [
                                {
                                    "toolUse": {
                                        "toolUseId": "c1",
                                        "name": "get_logs",
                                        "input": {"deployment": "checkout"},
                                    }
                                }
                            ]
                        ),
                    },
                ),
            ],
        )
    )
    assert chat is not None and chat.input_text == "fix checkout"
    assert [(c.name, json.loads(c.arguments), c.call_id) for c in chat.tool_calls] == [
        ("get_logs", {"deployment": "checkout"}, "c1")
    ]
