"""Normalization of span dialects and Codex log events into `Step`."""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mast_otel.processors.ids import stable_hex
from mast_otel.processors.model import Step, StepKind, StepStatus, ToolCallRequest
from mast_otel.processors.normalize import (
    LOG_DIALECTS,
    SPAN_DIALECTS,
    codex,
    genai,
    normalize_log,
    normalize_span,
    openinference,
    openllmetry,
    values,
)
from mast_otel.processors.records import LogRecord, SpanEvent, SpanRecord

TRACE = "0af7651916cd43dd8448eb211c80319c"
SPAN = "b7ad6b7169203331"
PARENT = "00f067aa0ba902b7"


def span(
    attributes: dict[str, Any],
    *,
    name: str = "span",
    events: list[SpanEvent] | None = None,
    status_code: str = "Unset",
    status_message: str = "",
) -> SpanRecord:
    return SpanRecord(
        trace_id=TRACE,
        span_id=SPAN,
        parent_span_id=PARENT,
        name=name,
        start_ns=1_000,
        end_ns=5_000,
        status_code=status_code,
        status_message=status_message,
        service_name="sre-agent",
        attributes=attributes,
        events=events or [],
    )


def codex_log(attributes: dict[str, Any], **fields: Any) -> LogRecord:
    base: dict[str, Any] = {"time_ns": 2_000_000_000, "service_name": "codex_cli_rs"}
    base.update(fields)
    return LogRecord(attributes={"conversation.id": "conv-1", **attributes}, **base)


def must(step: Step | None) -> Step:
    assert step is not None
    return step


# --- GenAI ------------------------------------------------------------------------------------


def test_genai_llm_step_with_requested_tool_calls() -> None:
    output = [
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "The pod is crash-looping; look at it."},
                {"type": "text", "content": "I will describe the pod."},
                {
                    "type": "tool_call",
                    "id": "call_1",
                    "name": "kubectl_describe",
                    "arguments": {"pod": "checkout-7f9", "namespace": "shop"},
                },
            ],
            "finish_reason": "tool_call",
        }
    ]
    inputs = [
        {"role": "user", "parts": [{"type": "text", "content": "Why is checkout down?"}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "Looking."}]},
        {"role": "user", "parts": [{"type": "text", "content": "Namespace shop."}]},
    ]
    step = must(
        normalize_span(
            span(
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": "openai",
                    "gen_ai.request.model": "gpt-4o",
                    "gen_ai.response.model": "gpt-4o-2024-08-06",
                    "gen_ai.usage.input_tokens": 120,
                    "gen_ai.usage.output_tokens": 30,
                    "gen_ai.response.finish_reasons": ["tool_calls"],
                    "gen_ai.input.messages": json.dumps(inputs),
                    "gen_ai.output.messages": output,
                    "gen_ai.agent.name": "triage",
                    "gen_ai.conversation.id": "conv-9",
                    "mast.task.read_only": True,
                    "mast.task.allowed_tools": ["kubectl_describe", "kubectl_logs"],
                    "unrelated.attribute": "x",
                }
            )
        )
    )
    assert step.dialect == "genai"
    assert step.kind is StepKind.LLM
    assert (step.trace_id, step.span_id, step.parent_span_id) == (TRACE, SPAN, PARENT)
    assert (step.start_ns, step.end_ns, step.service) == (1_000, 5_000, "sre-agent")
    assert step.model == "gpt-4o-2024-08-06"
    assert step.operation == "chat"
    assert step.agent == "triage"
    assert step.conversation_id == "conv-9"
    assert (step.input_tokens, step.output_tokens) == (120, 30)
    assert step.input_messages == 3
    assert step.input_text == "Namespace shop."
    assert "crash-looping" in step.output_text
    assert "describe the pod" in step.output_text
    assert step.tool_calls == (
        ToolCallRequest(
            "kubectl_describe", json.dumps({"pod": "checkout-7f9", "namespace": "shop"}), "call_1"
        ),
    )
    assert step.finish_reason == "tool_calls"
    assert step.status is StepStatus.UNSET
    assert step.run_attributes == {
        "mast.task.read_only": True,
        "mast.task.allowed_tools": ["kubectl_describe", "kubectl_logs"],
    }


def test_genai_tool_step_with_arguments_result_and_error() -> None:
    ok = must(
        normalize_span(
            span(
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "kubectl_get",
                    "gen_ai.tool.call.id": "call_7",
                    "gen_ai.tool.call.arguments": {"resource": "pods", "namespace": "shop"},
                    "gen_ai.tool.call.result": "checkout-7f9 CrashLoopBackOff",
                },
                status_code="Ok",
            )
        )
    )
    assert ok.kind is StepKind.TOOL
    assert ok.tool_name == "kubectl_get"
    assert ok.tool_call_id == "call_7"
    assert json.loads(ok.tool_arguments) == {"resource": "pods", "namespace": "shop"}
    assert ok.tool_result == "checkout-7f9 CrashLoopBackOff"
    assert ok.status is StepStatus.OK and not ok.failed

    by_type = must(
        normalize_span(
            span(
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "kubectl_get",
                    "error.type": "TimeoutError",
                }
            )
        )
    )
    assert by_type.failed and by_type.error == "TimeoutError"

    exception = SpanEvent(
        10, "exception", {"exception.type": "ApiError", "exception.message": "forbidden"}
    )
    by_status = must(
        normalize_span(
            span(
                {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "kubectl_delete"},
                events=[exception],
                status_code="Error",
            )
        )
    )
    assert by_status.failed and by_status.error == "forbidden"

    with_message = must(
        normalize_span(
            span(
                {"gen_ai.operation.name": "execute_tool"},
                status_code="Error",
                status_message="exit status 1",
            )
        )
    )
    assert with_message.error == "exit status 1"


def test_genai_agent_step() -> None:
    step = must(
        normalize_span(
            span(
                {
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.id": "asst_1",
                    "gen_ai.agent.name": "remediator",
                    "gen_ai.conversation.id": "conv-3",
                    "gen_ai.request.model": "kimi-k2",
                    "mast.run.outcome": "failure",
                    "mast.run.score": 0.25,
                }
            )
        )
    )
    assert step.kind is StepKind.AGENT
    assert step.agent == "remediator"
    assert step.conversation_id == "conv-3"
    assert step.model == "kimi-k2"
    assert step.run_attributes == {"mast.run.outcome": "failure", "mast.run.score": 0.25}
    created = must(normalize_span(span({"gen_ai.operation.name": "create_agent"})))
    assert created.kind is StepKind.AGENT


def _compared(step: Step) -> tuple[Any, ...]:
    return (
        step.kind,
        step.model,
        step.input_tokens,
        step.output_tokens,
        step.input_messages,
        step.input_text,
        step.output_text,
        step.tool_calls,
        step.finish_reason,
    )


def test_old_and_new_genai_names_give_the_same_step() -> None:
    arguments = '{"query": "rate(http_errors[5m])"}'
    new = span(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-oss-120b",
            "gen_ai.usage.input_tokens": 50,
            "gen_ai.usage.output_tokens": 9,
            "gen_ai.response.finish_reasons": ["tool_calls"],
            "gen_ai.system_instructions": [{"type": "text", "content": "You are an SRE."}],
            "gen_ai.input.messages": [
                {"role": "system", "parts": [{"type": "text", "content": "You are an SRE."}]},
                {"role": "user", "parts": [{"type": "text", "content": "Check errors."}]},
            ],
            "gen_ai.output.messages": [
                {
                    "role": "assistant",
                    "parts": [
                        {"type": "text", "content": "Querying Prometheus."},
                        {
                            "type": "tool_call",
                            "id": "c1",
                            "name": "prom_query",
                            "arguments": json.loads(arguments),
                        },
                    ],
                    "finish_reason": "tool_call",
                }
            ],
        }
    )
    old = span(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-oss-120b",
            "gen_ai.usage.prompt_tokens": 50,
            "gen_ai.usage.completion_tokens": 9,
            "gen_ai.response.finish_reasons": ["tool_calls"],
        },
        events=[
            SpanEvent(1, "gen_ai.system.message", {"content": "You are an SRE."}),
            SpanEvent(2, "gen_ai.user.message", {"content": "Check errors."}),
            SpanEvent(
                3,
                "gen_ai.choice",
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": json.dumps({"role": "assistant", "content": "Querying Prometheus."}),
                    "tool_calls": json.dumps(
                        [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "prom_query", "arguments": arguments},
                            }
                        ]
                    ),
                },
            ),
        ],
    )
    new_step, old_step = must(normalize_span(new)), must(normalize_span(old))
    assert _compared(new_step) == _compared(old_step)
    assert new_step.input_messages == 2
    assert new_step.input_text == "Check errors."
    assert new_step.output_text == "Querying Prometheus."
    assert new_step.tool_calls == (ToolCallRequest("prom_query", arguments, "c1"),)


def test_message_events_give_message_count_and_output_text() -> None:
    record = span(
        {"gen_ai.operation.name": "chat", "gen_ai.system": "az.ai.inference"},
        events=[
            SpanEvent(1, "gen_ai.system.message", {"gen_ai.event.content": '{"content": "sys"}'}),
            SpanEvent(2, "gen_ai.user.message", {"gen_ai.event.content": '{"content": "first"}'}),
            SpanEvent(3, "gen_ai.assistant.message", {"content": "ok"}),
            SpanEvent(4, "gen_ai.tool.message", {"content": "rainy", "id": "call_1"}),
            SpanEvent(5, "gen_ai.user.message", {"content": "and tomorrow?"}),
            SpanEvent(
                6,
                "gen_ai.choice",
                {
                    "gen_ai.event.content": json.dumps(
                        {"finish_reason": "stop", "message": {"content": "Sunny tomorrow."}}
                    )
                },
            ),
        ],
    )
    step = must(normalize_span(record))
    assert step.kind is StepKind.LLM
    assert step.input_messages == 5
    assert step.input_text == "and tomorrow?"
    assert step.output_text == "Sunny tomorrow."
    assert step.finish_reason == "stop"
    assert step.tool_calls == ()


def test_legacy_prompt_and_completion_attributes() -> None:
    step = must(
        normalize_span(
            span(
                {
                    "gen_ai.system": "openai",
                    "gen_ai.request.model": "gpt-4",
                    "gen_ai.prompt": json.dumps([{"role": "user", "content": "capital?"}]),
                    "gen_ai.completion": json.dumps([{"role": "assistant", "content": "Paris."}]),
                }
            )
        )
    )
    assert step.kind is StepKind.LLM  # no operation name: inferred from the model
    assert step.operation == ""
    assert (step.input_messages, step.input_text, step.output_text) == (1, "capital?", "Paris.")
    raw = must(normalize_span(span({"gen_ai.prompt": "plain text prompt", "gen_ai.system": "x"})))
    assert raw.input_text == "plain text prompt" and raw.input_messages is None


def test_genai_unknown_operation_is_still_a_step() -> None:
    step = must(normalize_span(span({"gen_ai.operation.name": "embeddings", "gen_ai.x": 1})))
    assert step.kind is StepKind.OTHER and step.dialect == "genai"
    other = must(normalize_span(span({"gen_ai.operation.name": "invoke_workflow"})))
    assert other.kind is StepKind.OTHER
    tool = must(normalize_span(span({"gen_ai.tool.name": "grep"})))
    assert tool.kind is StepKind.TOOL


def _evaluation(score: Any = None, label: Any = None, name: str = "recall") -> SpanEvent:
    attributes: dict[str, Any] = {"gen_ai.evaluation.name": name}
    if score is not None:
        attributes["gen_ai.evaluation.score.value"] = score
    if label is not None:
        attributes["gen_ai.evaluation.score.label"] = label
    return SpanEvent(9, "gen_ai.evaluation.result", attributes)


def test_evaluation_result_maps_to_run_outcome_and_score() -> None:
    step = must(normalize_span(span({}, events=[_evaluation(0.4, "fail")])))
    assert step.kind is StepKind.EVALUATION
    assert step.run_attributes == {"mast.run.score": 0.4, "mast.run.outcome": "failure"}

    explicit = must(
        normalize_span(
            span(
                {"gen_ai.operation.name": "invoke_agent", "mast.run.outcome": "success"},
                events=[_evaluation(1.0, "incorrect")],
            )
        )
    )
    assert explicit.kind is StepKind.AGENT
    assert explicit.run_attributes == {"mast.run.outcome": "success", "mast.run.score": 1.0}

    unmapped = must(normalize_span(span({}, events=[_evaluation(4.0, "relevant", "Relevance")])))
    assert unmapped.run_attributes == {
        "gen_ai.evaluation.score.value": 4.0,
        "gen_ai.evaluation.score.label": "relevant",
        "gen_ai.evaluation.name": "Relevance",
    }


# --- OpenInference ----------------------------------------------------------------------------


def test_openinference_llm_indexed_messages_and_tool_calls() -> None:
    step = must(
        normalize_span(
            span(
                {
                    "openinference.span.kind": "LLM",
                    "llm.model_name": "gemini-3-flash",
                    "llm.provider": "google",
                    "llm.token_count.prompt": "812",
                    "llm.token_count.completion": 40,
                    "llm.input_messages.0.message.role": "system",
                    "llm.input_messages.0.message.content": "You are an SRE.",
                    "llm.input_messages.1.message.role": "user",
                    "llm.input_messages.1.message.content": "Alert: HighLatency on cart",
                    "llm.input_messages.2.message.role": "assistant",
                    "llm.input_messages.2.message.content": "Looking",
                    "llm.input_messages.10.message.role": "user",
                    "llm.input_messages.10.message.contents.0.message_content.type": "text",
                    "llm.input_messages.10.message.contents.0.message_content.text": "Go on.",
                    "llm.output_messages.0.message.role": "assistant",
                    "llm.output_messages.0.message.content": "Restarting the cart pod.",
                    "llm.output_messages.0.message.tool_calls.0.tool_call.id": "t1",
                    "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": (
                        "kubectl_rollout_restart"
                    ),
                    "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": (
                        '{"deployment": "cart"}'
                    ),
                    "session.id": "sess-1",
                    "agent.name": "remediator",
                    "mast.task.max_steps": 30,
                },
                status_code="Ok",
            )
        )
    )
    assert step.dialect == "openinference"
    assert step.kind is StepKind.LLM
    assert step.model == "gemini-3-flash"
    assert (step.input_tokens, step.output_tokens) == (812, 40)
    assert step.input_messages == 4
    assert step.input_text == "Go on."
    assert step.output_text == "Restarting the cart pod."
    assert step.tool_calls == (
        ToolCallRequest("kubectl_rollout_restart", '{"deployment": "cart"}', "t1"),
    )
    assert step.conversation_id == "sess-1"
    assert step.agent == "remediator"
    assert step.status is StepStatus.OK
    assert step.run_attributes == {"mast.task.max_steps": 30}


def test_openinference_tool_step() -> None:
    step = must(
        normalize_span(
            span(
                {
                    "openinference.span.kind": "TOOL",
                    "tool.name": "get_logs",
                    "tool.parameters": '{"type": "object"}',
                    "tool_call.id": "t9",
                    "input.value": '{"pod": "cart-1"}',
                    "output.value": "connection refused",
                },
                status_code="Error",
                status_message="tool raised",
            )
        )
    )
    assert step.kind is StepKind.TOOL
    assert (step.tool_name, step.tool_call_id) == ("get_logs", "t9")
    assert step.tool_arguments == '{"pod": "cart-1"}'
    assert step.tool_result == "connection refused"
    assert step.failed and step.error == "tool raised"
    fallback = must(
        normalize_span(
            span({"openinference.span.kind": "TOOL", "tool.parameters": {"a": 1}, "tool.id": "x"})
        )
    )
    assert fallback.tool_arguments == '{"a": 1}' and fallback.tool_call_id == "x"


def test_openinference_agent_chain_and_evaluator() -> None:
    agent = must(
        normalize_span(
            span(
                {
                    "openinference.span.kind": "AGENT",
                    "graph.node.id": "diagnose_0",
                    "input.value": "Find why checkout is slow",
                    "output.value": "Root cause: DB pool exhausted",
                }
            )
        )
    )
    assert agent.kind is StepKind.AGENT
    assert agent.agent == "diagnose_0"
    assert agent.input_text == "Find why checkout is slow"
    assert agent.output_text == "Root cause: DB pool exhausted"
    chain = must(normalize_span(span({"openinference.span.kind": "CHAIN"})))
    assert chain.kind is StepKind.OTHER
    evaluator = must(normalize_span(span({"openinference.span.kind": "EVALUATOR"})))
    assert evaluator.kind is StepKind.EVALUATION
    # OpenInference wins over GenAI names on the same span.
    record = span({"openinference.span.kind": "LLM", "gen_ai.system": "x"})
    assert openinference.recognises(record) and genai.recognises(record)
    assert must(normalize_span(record)).dialect == "openinference"


# --- OpenLLMetry ------------------------------------------------------------------------------


def test_openllmetry_llm_indexed_prompt_and_completion() -> None:
    step = must(
        normalize_span(
            span(
                {
                    "gen_ai.system": "openai",
                    "gen_ai.request.model": "gpt-4o",
                    "gen_ai.response.model": "gpt-4o-2024-08-06",
                    "llm.request.type": "chat",
                    "gen_ai.usage.prompt_tokens": 300,
                    "gen_ai.usage.completion_tokens": 20,
                    "gen_ai.prompt.0.role": "system",
                    "gen_ai.prompt.0.content": "You are an SRE.",
                    "gen_ai.prompt.1.role": "user",
                    "gen_ai.prompt.1.content": json.dumps(
                        [{"type": "text", "text": "Scale the api to 3."}]
                    ),
                    "gen_ai.completion.0.role": "assistant",
                    "gen_ai.completion.0.content": "Scaling now.",
                    "gen_ai.completion.0.finish_reason": "tool_calls",
                    "gen_ai.completion.0.tool_calls.0.id": "call_s",
                    "gen_ai.completion.0.tool_calls.0.name": "kubectl_scale",
                    "gen_ai.completion.0.tool_calls.0.arguments": '{"replicas": 3}',
                    "traceloop.association.properties.session_id": "chat-42",
                    "mast.agent.allowed_tools": ["kubectl_get"],
                }
            )
        )
    )
    assert step.dialect == "openllmetry"
    assert step.kind is StepKind.LLM
    assert step.model == "gpt-4o-2024-08-06"
    assert (step.input_tokens, step.output_tokens) == (300, 20)
    assert step.input_messages == 2
    assert step.input_text == "Scale the api to 3."
    assert step.output_text == "Scaling now."
    assert step.tool_calls == (ToolCallRequest("kubectl_scale", '{"replicas": 3}', "call_s"),)
    assert step.finish_reason == "tool_calls"
    assert step.conversation_id == "chat-42"
    assert step.operation == "chat"
    assert step.run_attributes == {"mast.agent.allowed_tools": ["kubectl_get"]}


def test_openllmetry_prompt_attributes_without_request_type_still_claimed() -> None:
    step = must(
        normalize_span(
            span(
                {
                    "gen_ai.system": "anthropic",
                    "gen_ai.prompt.0.role": "user",
                    "gen_ai.prompt.0.content": "hi",
                    "gen_ai.completion.0.function_call.name": "lookup",
                    "gen_ai.completion.0.function_call.arguments": "{}",
                }
            )
        )
    )
    assert step.dialect == "openllmetry" and step.kind is StepKind.LLM
    assert step.tool_calls == (ToolCallRequest("lookup", "{}", ""),)


def test_openllmetry_decorator_spans() -> None:
    tool = must(
        normalize_span(
            span(
                {
                    "traceloop.span.kind": "tool",
                    "traceloop.entity.name": "restart_pod",
                    "traceloop.entity.input": '{"args": [], "kwargs": {"pod": "api-1"}}',
                    "traceloop.entity.output": '"restarted"',
                    "traceloop.workflow.name": "incident",
                }
            )
        )
    )
    assert tool.dialect == "openllmetry" and tool.kind is StepKind.TOOL
    assert tool.tool_name == "restart_pod"
    # The decorator's `{"args", "kwargs"}` wrapper and JSON-quoted return value, read through.
    assert tool.tool_arguments == '{"pod": "api-1"}'
    assert tool.tool_result == "restarted"
    agent = must(
        normalize_span(
            span(
                {
                    "traceloop.span.kind": "agent",
                    "traceloop.entity.name": "planner",
                    "traceloop.entity.input": "plan the fix",
                    "mast.run.end": True,
                }
            )
        )
    )
    assert agent.kind is StepKind.AGENT and agent.agent == "planner"
    assert agent.input_text == "plan the fix"
    assert agent.run_attributes == {"mast.run.end": True}
    workflow = must(normalize_span(span({"traceloop.span.kind": "workflow"})))
    assert workflow.kind is StepKind.OTHER


def test_plain_modern_genai_span_is_not_claimed_by_openllmetry() -> None:
    record = span({"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"})
    assert not openllmetry.recognises(record)
    assert must(normalize_span(record)).dialect == "genai"


# --- Codex ------------------------------------------------------------------------------------


def test_codex_tool_result_without_trace_id() -> None:
    record = codex_log(
        {
            "event.name": "codex.tool_result",
            "tool_name": "shell",
            "call_id": "call_A",
            "arguments": '{"command": ["kubectl", "get", "pods"]}',
            "duration_ms": 250,
            "success": "true",
            "output": "NAME READY",
            "model": "gpt-5-codex",
            "mast.task.read_only": "true",
        }
    )
    step = must(normalize_log(record))
    assert step.dialect == "codex" and step.kind is StepKind.TOOL
    assert step.trace_id == stable_hex("codex", "conv-1", length=32)
    assert step.span_id == stable_hex("conv-1", "codex.tool_result", "call_A", length=16)
    assert step.parent_span_id and not step.is_root
    assert (step.start_ns, step.end_ns) == (2_000_000_000 - 250_000_000, 2_000_000_000)
    assert step.tool_name == "shell" and step.tool_call_id == "call_A"
    assert step.tool_arguments == '{"command": ["kubectl", "get", "pods"]}'
    assert step.tool_result == "NAME READY"
    assert step.status is StepStatus.OK
    assert step.model == "gpt-5-codex"
    assert step.conversation_id == "conv-1"
    assert step.service == "codex_cli_rs"
    assert step.run_attributes == {"mast.task.read_only": "true"}
    assert must(normalize_log(record)) == step  # same event, same ids

    failed = must(
        normalize_log(
            codex_log(
                {"tool_name": "shell", "success": False, "output": "permission denied"},
                event_name="codex.tool_result",
            )
        )
    )
    assert failed.failed and failed.error == "permission denied"


def test_codex_tool_result_with_trace_id() -> None:
    record = codex_log(
        {"event.name": "codex.tool_result", "tool_name": "apply_patch", "call_id": "c2"},
        trace_id=TRACE,
        span_id=SPAN,
    )
    step = must(normalize_log(record))
    assert step.trace_id == TRACE
    assert step.parent_span_id == SPAN
    assert step.span_id != SPAN
    assert step.status is StepStatus.UNSET


def test_codex_other_events() -> None:
    prompt = must(
        normalize_log(codex_log({"event.name": "codex.user_prompt", "prompt": "fix the build"}))
    )
    assert prompt.kind is StepKind.HUMAN and prompt.input_text == "fix the build"

    completed = must(
        normalize_log(
            codex_log(
                {
                    "event.name": "codex.sse_event",
                    "event.kind": "response.completed",
                    "input_token_count": "1200",
                    "output_token_count": 80,
                }
            )
        )
    )
    assert completed.kind is StepKind.LLM
    assert (completed.input_tokens, completed.output_tokens) == (1200, 80)
    assert completed.status is StepStatus.OK

    delta = codex_log({"event.name": "codex.sse_event", "event.kind": "response.output_item.done"})
    assert normalize_log(delta) is None
    assert normalize_log(codex_log({"event.name": "codex.api_request", "attempt": 1})) is None
    failed = must(
        normalize_log(
            codex_log({"event.name": "codex.api_request", "http.response.status_code": 429})
        )
    )
    assert failed.kind is StepKind.LLM and failed.failed and failed.error == "HTTP 429"

    decision = must(
        normalize_log(
            codex_log(
                {
                    "event.name": "codex.tool_decision",
                    "tool_name": "shell",
                    "call_id": "c3",
                    "decision": "denied",
                    "source": "user",
                }
            )
        )
    )
    assert decision.kind is StepKind.OTHER
    assert (decision.tool_name, decision.tool_call_id, decision.output_text) == (
        "shell",
        "c3",
        "denied",
    )
    start = must(normalize_log(codex_log({"event.name": "codex.conversation_starts"})))
    assert start.kind is StepKind.AGENT and not start.is_root


def test_codex_time_falls_back_to_event_timestamp() -> None:
    record = codex_log(
        {"event.name": "codex.user_prompt", "event.timestamp": "2025-10-01T12:00:00.500Z"},
        time_ns=0,
        observed_time_ns=99,
    )
    step = must(normalize_log(record))
    assert step.end_ns == 1_759_320_000_500_000_000


def test_non_codex_logs_give_none() -> None:
    assert normalize_log(LogRecord(time_ns=1, body="hello")) is None
    assert normalize_log(LogRecord(time_ns=1, event_name="claude_code.tool_result")) is None
    assert normalize_log(LogRecord(time_ns=1, attributes={"event.name": "codex.unknown"})) is None


# --- unknown and hostile input ----------------------------------------------------------------


def test_unknown_span_gives_none() -> None:
    assert normalize_span(span({"http.method": "GET", "db.system": "postgresql"})) is None
    assert normalize_span(span({})) is None


def test_huge_values_are_truncated_with_a_marker() -> None:
    huge = "x" * 10_000_000
    step = must(
        normalize_span(
            span(
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": huge,
                    "gen_ai.tool.call.arguments": huge,
                    "gen_ai.tool.call.result": huge,
                }
            )
        )
    )
    assert len(step.tool_result) < 17_000
    assert step.tool_result.endswith(f"…[truncated {10_000_000 - 16384} chars]")
    assert len(step.tool_arguments) < 17_000
    assert len(step.tool_name) < 1_100
    small = must(
        normalize_span(
            span({"openinference.span.kind": "TOOL", "output.value": "abcdef"}), max_text=3
        )
    )
    assert small.tool_result == "abc…[truncated 3 chars]"
    prompt = must(normalize_span(span({"gen_ai.prompt": huge, "gen_ai.system": "x"})))
    assert len(prompt.input_text) < 4_200


def test_wrong_types_leave_fields_empty() -> None:
    nested: dict[str, Any] = {"a": {"b": [1, None, {"c": b"\xff"}]}}
    step = must(
        normalize_span(
            span(
                {
                    "gen_ai.operation.name": ["chat"],
                    "gen_ai.request.model": nested,
                    "gen_ai.response.model": None,
                    "gen_ai.usage.input_tokens": "not a number",
                    "gen_ai.usage.prompt_tokens": 7.0,
                    "gen_ai.usage.output_tokens": float("inf"),
                    "gen_ai.input.messages": "[{broken json",
                    "gen_ai.output.messages": [1, "two", None, {"parts": "x"}, {"parts": [5]}],
                    "gen_ai.response.finish_reasons": {"x": 1},
                    "gen_ai.tool.call.arguments": nested,
                    "gen_ai.agent.name": 12,
                },
                events=[SpanEvent(1, "gen_ai.choice", {"message": 5, "tool_calls": "[{"})],
            )
        )
    )
    assert step.kind is StepKind.LLM  # operation unreadable: inferred from the model key
    assert step.operation == ""
    assert step.model == ""
    assert step.input_tokens == 7
    assert step.output_tokens is None
    assert step.input_messages is None
    assert step.output_text == "two\n5"
    assert step.finish_reason == ""
    assert step.agent == "12"
    assert json.loads(step.tool_arguments) == {"a": {"b": [1, None, {"c": "\ufffd"}]}}


def test_deep_and_cyclic_values_do_not_raise() -> None:
    deep: Any = "leaf"
    for _ in range(5_000):
        deep = [deep]
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    for dialect_attrs in (
        {"gen_ai.operation.name": "chat", "gen_ai.output.messages": deep},
        {"gen_ai.tool.call.result": cyclic, "gen_ai.tool.name": "t"},
        {"openinference.span.kind": "TOOL", "input.value": deep, "output.value": cyclic},
        {"traceloop.span.kind": "tool", "traceloop.entity.input": cyclic},
    ):
        assert isinstance(normalize_span(span(dialect_attrs)), Step)


def test_none_and_garbage_record_fields_do_not_raise() -> None:
    record = SpanRecord(
        trace_id=None,  # type: ignore[arg-type]
        span_id=5,  # type: ignore[arg-type]
        parent_span_id="",
        name=b"n",  # type: ignore[arg-type]
        start_ns="x",  # type: ignore[arg-type]
        end_ns=None,  # type: ignore[arg-type]
        status_code=None,  # type: ignore[arg-type]
        attributes={"gen_ai.system": "x"},
        events=[None, SpanEvent(1, None, None)],  # type: ignore[list-item, arg-type]
    )
    step = must(normalize_span(record))
    assert (step.trace_id, step.span_id, step.start_ns) == ("", "5", 0)
    garbage_log = LogRecord(time_ns=None, attributes=None, event_name="codex.tool_result")  # type: ignore[arg-type]
    assert isinstance(normalize_log(garbage_log), Step)


def test_value_coercion() -> None:
    assert values.to_int("12") == 12 and values.to_int(True) is None
    assert values.to_int("1e999") is None and values.to_int("9" * 5000) is None
    assert values.to_count(-1) is None
    assert values.to_bool("False") is False and values.to_bool("maybe") is None
    assert values.render({"a": b"\x00"}) == '{"a": "\\u0000"}'
    assert values.truncate("abcdef", 4) == "ab" + "cd" + "…[truncated 2 chars]"
    assert values.indexed({"p.1.x": 1, "p.0.y": 2, "p.².z": 3, "p.a.b": 4}, "p") == {
        0: {"y": 2},
        1: {"x": 1},
    }


# --- property: no attribute values make normalization raise -----------------------------------


def _names(module: ModuleType, dotted: bool = True) -> list[str]:
    """The attribute and event names a dialect module spells (its upper-case constants)."""
    return sorted(
        {
            value
            for key, value in vars(module).items()
            if key.isupper() and isinstance(value, str) and ("." in value or not dotted)
        }
    )


_INDEXED_KEYS = [
    "llm.input_messages.0.message.role",
    "llm.input_messages.0.message.content",
    "llm.input_messages.1.message.contents.0.message_content.text",
    "llm.output_messages.0.message.content",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.name",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments",
    "llm.prompts.0.prompt.text",
    "llm.choices.0.completion.text",
    "gen_ai.prompt.0.role",
    "gen_ai.prompt.0.content",
    "gen_ai.completion.0.content",
    "gen_ai.completion.0.finish_reason",
    "gen_ai.completion.0.tool_calls.0.name",
    "gen_ai.completion.0.tool_calls.0.arguments",
    "gen_ai.completion.0.function_call.name",
    "traceloop.association.properties.session_id",
    "mast.run.score",
    "mast.task.read_only",
    "error.type",
]
_MARKERS: dict[str, dict[str, Any]] = {
    "genai": {"gen_ai.operation.name": "chat"},
    "openinference": {"openinference.span.kind": "LLM"},
    "openllmetry": {"llm.request.type": "chat"},
}

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.binary(max_size=16),
    st.sampled_from(
        [
            "chat",
            "execute_tool",
            "TOOL",
            "LLM",
            "AGENT",
            "tool",
            "agent",
            "response.completed",
            "-1",
            "1e999",
            "true",
            '{"role": "user", "parts": [{"type": "tool_call", "name": 5}]}',
            '[{"role": "user", "content": [{"type": "text", "text": 1}]}]',
            '[{"parts": [{"type": "tool_call", "function": {"name": []}}]}',
            "[{",
        ]
    ),
)
_attr_values = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=5,
)


def _span_strategy(dialect: ModuleType) -> st.SearchStrategy[SpanRecord]:
    keys = _names(dialect) + _names(genai) + _INDEXED_KEYS
    events = st.builds(
        SpanEvent,
        time_ns=st.integers(min_value=0, max_value=2**63),
        name=st.sampled_from([*_names(genai), "exception", "other"]),
        attributes=st.dictionaries(st.sampled_from(keys), _attr_values, max_size=6),
    )
    return st.builds(
        SpanRecord,
        trace_id=st.just(TRACE),
        span_id=st.just(SPAN),
        parent_span_id=st.sampled_from(["", PARENT]),
        name=st.text(max_size=20),
        start_ns=st.integers(min_value=0, max_value=2**63),
        end_ns=st.integers(min_value=0, max_value=2**63),
        status_code=st.sampled_from(["Unset", "Ok", "Error", "", "garbage"]),
        status_message=st.text(max_size=20),
        attributes=st.builds(
            lambda marker, extra: {**marker, **extra},
            st.just(_MARKERS[dialect.DIALECT]),
            st.dictionaries(st.sampled_from(keys), _attr_values, max_size=10),
        ),
        events=st.lists(events, max_size=3),
    )


_FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("dialect", SPAN_DIALECTS, ids=lambda d: d.DIALECT)
def test_random_attributes_never_raise(dialect: ModuleType) -> None:
    @_FAST
    @given(record=_span_strategy(dialect))
    def check(record: SpanRecord) -> None:
        assert dialect.recognises(record)
        direct = dialect.to_step(record, max_text=256)  # the reader itself, no safety net
        assert isinstance(direct, Step) and direct.dialect == dialect.DIALECT
        assert len(direct.tool_result) <= 256 + 40 and len(direct.output_text) <= 256 + 40
        assert isinstance(normalize_span(record), Step)

    check()


@_FAST
@given(
    event=st.sampled_from(
        [
            "codex.tool_result",
            "codex.user_prompt",
            "codex.sse_event",
            "codex.api_request",
            "codex.tool_decision",
            "codex.conversation_starts",
            "codex.other",
            "",
        ]
    ),
    attributes=st.dictionaries(
        st.sampled_from([*_names(codex, dotted=False), "mast.run.end"]),
        _attr_values,
        max_size=10,
    ),
    time_ns=st.one_of(st.integers(min_value=0, max_value=2**63), st.just(0)),
    trace_id=st.sampled_from(["", TRACE]),
)
def test_random_codex_events_never_raise(
    event: str, attributes: dict[str, Any], time_ns: int, trace_id: str
) -> None:
    record = LogRecord(time_ns=time_ns, trace_id=trace_id, event_name=event, attributes=attributes)
    for dialect in LOG_DIALECTS:
        if dialect.recognises(record):
            assert isinstance(dialect.to_step(record), Step)
    result = normalize_log(record)
    assert result is None or isinstance(result, Step)


def test_prose_gets_plain_apostrophes_and_tool_fields_stay_as_sent() -> None:
    # Models write "I\u2019m unable to" as often as "I'm unable to"; the detectors' patterns use the
    # plain apostrophe. Tool arguments and results are not prose: they stay byte for byte.
    llm = must(
        normalize_span(
            span(
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": "gpt-4o",
                    "gen_ai.output.messages": json.dumps(
                        [
                            {
                                "role": "assistant",
                                "parts": [
                                    {
                                        "type": "text",
                                        "content": "I\u2019m unable to \u2018cancel\u2019",
                                    }
                                ],
                            }
                        ]
                    ),
                }
            )
        )
    )
    assert llm.output_text == "I'm unable to 'cancel'"
    tool = must(
        normalize_span(
            span(
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "note",
                    "gen_ai.tool.call.arguments": '{"text": "it\u2019s"}',
                    "gen_ai.tool.call.result": "it\u2019s saved",
                }
            )
        )
    )
    assert tool.tool_arguments == '{"text": "it\u2019s"}' and tool.tool_result == "it\u2019s saved"
