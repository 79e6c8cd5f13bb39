"""How an instrumented agent describes its model and tool calls, per span dialect.

This is the agent's side of the wire (what instrumentations emit), used by the demo agent and
the end-to-end tests to produce the same runs in every dialect the collector reads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import Span

DIALECTS = ("genai", "genai-legacy", "openinference", "openllmetry")


@dataclass
class LlmCall:
    model: str
    agent: str
    input_tokens: int
    output_tokens: int
    messages: list[dict[str, str]]
    output_text: str
    tool_calls: list[dict[str, str]] = field(default_factory=list)
    finish_reason: str = "tool_calls"


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any]
    result: str
    call_id: str
    agent: str
    ok: bool = True


def agent_span_name(dialect: str, agent: str) -> str:
    return f"invoke_agent {agent}" if dialect.startswith("genai") else agent


def describe_agent(span: Span, dialect: str, agent: str, conversation: str) -> None:
    if dialect == "openinference":
        span.set_attributes(
            {"openinference.span.kind": "AGENT", "agent.name": agent, "session.id": conversation}
        )
    elif dialect == "openllmetry":
        span.set_attributes(
            {
                "traceloop.span.kind": "agent",
                "traceloop.entity.name": agent,
                "traceloop.workflow.name": "incident-triage",
            }
        )
    else:
        span.set_attributes(
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": agent,
                "gen_ai.conversation.id": conversation,
            }
        )


def llm_span_name(dialect: str, call: LlmCall) -> str:
    return f"chat {call.model}" if dialect != "openinference" else "ChatCompletion"


def describe_llm(span: Span, dialect: str, call: LlmCall) -> None:
    if dialect == "genai":
        output = [{"type": "text", "content": call.output_text}] + [
            {"type": "tool_call", "name": t["name"], "arguments": t["arguments"], "id": t["id"]}
            for t in call.tool_calls
        ]
        span.set_attributes(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": call.model,
                "gen_ai.response.model": call.model,
                "gen_ai.agent.name": call.agent,
                "gen_ai.usage.input_tokens": call.input_tokens,
                "gen_ai.usage.output_tokens": call.output_tokens,
                "gen_ai.response.finish_reasons": [call.finish_reason],
                "gen_ai.input.messages": json.dumps(
                    [
                        {"role": m["role"], "parts": [{"type": "text", "content": m["content"]}]}
                        for m in call.messages
                    ]
                ),
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": output, "finish_reason": call.finish_reason}]
                ),
            }
        )
    elif dialect == "genai-legacy":
        span.set_attributes(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.system": "openai",
                "gen_ai.request.model": call.model,
                "gen_ai.agent.name": call.agent,
                "gen_ai.usage.prompt_tokens": call.input_tokens,
                "gen_ai.usage.completion_tokens": call.output_tokens,
            }
        )
        for m in call.messages:
            span.add_event(f"gen_ai.{m['role']}.message", {"content": m["content"]})
        span.add_event(
            "gen_ai.choice",
            {
                "index": 0,
                "finish_reason": call.finish_reason,
                "message": json.dumps(
                    {
                        "role": "assistant",
                        "content": call.output_text,
                        "tool_calls": [
                            {
                                "id": t["id"],
                                "type": "function",
                                "function": {"name": t["name"], "arguments": t["arguments"]},
                            }
                            for t in call.tool_calls
                        ],
                    }
                ),
            },
        )
    elif dialect == "openinference":
        attributes: dict[str, Any] = {
            "openinference.span.kind": "LLM",
            "llm.model_name": call.model,
            "llm.provider": "openai",
            "agent.name": call.agent,
            "llm.token_count.prompt": call.input_tokens,
            "llm.token_count.completion": call.output_tokens,
            "output.value": call.output_text,
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": call.output_text,
        }
        for i, m in enumerate(call.messages):
            attributes[f"llm.input_messages.{i}.message.role"] = m["role"]
            attributes[f"llm.input_messages.{i}.message.content"] = m["content"]
        for j, t in enumerate(call.tool_calls):
            prefix = f"llm.output_messages.0.message.tool_calls.{j}.tool_call"
            attributes[f"{prefix}.function.name"] = t["name"]
            attributes[f"{prefix}.function.arguments"] = t["arguments"]
            attributes[f"{prefix}.id"] = t["id"]
        span.set_attributes(attributes)
    elif dialect == "openllmetry":
        attributes = {
            "llm.request.type": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": call.model,
            "gen_ai.response.model": call.model,
            "gen_ai.usage.prompt_tokens": call.input_tokens,
            "gen_ai.usage.completion_tokens": call.output_tokens,
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": call.output_text,
            "gen_ai.completion.0.finish_reason": call.finish_reason,
            "gen_ai.agent.name": call.agent,
        }
        for i, m in enumerate(call.messages):
            attributes[f"gen_ai.prompt.{i}.role"] = m["role"]
            attributes[f"gen_ai.prompt.{i}.content"] = m["content"]
        for j, t in enumerate(call.tool_calls):
            attributes[f"gen_ai.completion.0.tool_calls.{j}.name"] = t["name"]
            attributes[f"gen_ai.completion.0.tool_calls.{j}.arguments"] = t["arguments"]
            attributes[f"gen_ai.completion.0.tool_calls.{j}.id"] = t["id"]
        span.set_attributes(attributes)
    else:
        raise ValueError(f"unknown dialect {dialect!r}; expected one of {', '.join(DIALECTS)}")


def tool_span_name(dialect: str, call: ToolCall) -> str:
    if dialect.startswith("genai"):
        return f"execute_tool {call.name}"
    if dialect == "openllmetry":
        return f"{call.name}.tool"
    return call.name


def describe_tool(span: Span, dialect: str, call: ToolCall) -> None:
    arguments = json.dumps(call.arguments)
    if dialect.startswith("genai"):
        span.set_attributes(
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": call.name,
                "gen_ai.tool.type": "function",
                "gen_ai.tool.call.id": call.call_id,
                "gen_ai.tool.call.arguments": arguments,
                "gen_ai.tool.call.result": call.result,
                "gen_ai.agent.name": call.agent,
            }
        )
    elif dialect == "openinference":
        span.set_attributes(
            {
                "openinference.span.kind": "TOOL",
                "tool.name": call.name,
                "tool.parameters": arguments,
                "tool_call.id": call.call_id,
                "input.value": arguments,
                "output.value": call.result,
                "agent.name": call.agent,
            }
        )
    elif dialect == "openllmetry":
        span.set_attributes(
            {
                "traceloop.span.kind": "tool",
                "traceloop.entity.name": call.name,
                "traceloop.entity.input": json.dumps({"inputs": call.arguments}),
                "traceloop.entity.output": json.dumps({"output": call.result}),
                "gen_ai.agent.name": call.agent,
            }
        )
    else:
        raise ValueError(f"unknown dialect {dialect!r}; expected one of {', '.join(DIALECTS)}")
