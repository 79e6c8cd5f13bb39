"""The names of the OpenTelemetry GenAI semantic conventions (`gen_ai.*`) that the GenAI
dialect reads: span attributes (current and deprecated), span events and their body fields,
message JSON fields and operation names. Verified against the sources named in `genai`."""

from __future__ import annotations

# Span attributes, current names.
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"
# The tools offered to the model (inference spans) or the agent (agent spans); opt-in.
TOOL_DEFINITIONS = "gen_ai.tool.definitions"
AGENT_NAME = "gen_ai.agent.name"
AGENT_ID = "gen_ai.agent.id"
CONVERSATION_ID = "gen_ai.conversation.id"
EVALUATION_NAME = "gen_ai.evaluation.name"
EVALUATION_SCORE_VALUE = "gen_ai.evaluation.score.value"
EVALUATION_SCORE_LABEL = "gen_ai.evaluation.score.label"

# Span attributes, names of v1.36 and before (deprecated, still emitted).
SYSTEM = "gen_ai.system"
PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"
COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"
PROMPT = "gen_ai.prompt"
COMPLETION = "gen_ai.completion"

# Span events. Per-message events (≤ v1.36) put their body fields on the event's attributes;
# some SDKs (Azure AI, Semantic Kernel) put the whole body as JSON under `gen_ai.event.content`.
EVENT_SYSTEM_MESSAGE = "gen_ai.system.message"
EVENT_USER_MESSAGE = "gen_ai.user.message"
EVENT_ASSISTANT_MESSAGE = "gen_ai.assistant.message"
EVENT_TOOL_MESSAGE = "gen_ai.tool.message"
EVENT_CHOICE = "gen_ai.choice"
EVENT_CONTENT_PROMPT = "gen_ai.content.prompt"
EVENT_CONTENT_COMPLETION = "gen_ai.content.completion"
EVENT_OPERATION_DETAILS = "gen_ai.client.inference.operation.details"
EVENT_EVALUATION_RESULT = "gen_ai.evaluation.result"
EVENT_BODY = "gen_ai.event.content"
BODY_CONTENT = "content"
BODY_MESSAGE = "message"
BODY_TOOL_CALLS = "tool_calls"
BODY_FINISH_REASON = "finish_reason"

# Message JSON (gen_ai.input.messages / gen_ai.output.messages).
MESSAGE_ROLE = "role"
MESSAGE_FINISH_REASON = "finish_reason"
ROLE_USER = "user"

LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
TOOL_OPERATIONS = frozenset({"execute_tool"})
# AG2's code execution (an executor agent running the code blocks of a message), and what it
# puts on the span: the exit code (absent when it found no code to run) and the output.
CODE_OPERATIONS = frozenset({"execute_code"})
CODE_EXIT_CODE = "ag2.code_execution.exit_code"
CODE_OUTPUT = "ag2.code_execution.output"
AGENT_OPERATIONS = frozenset({"invoke_agent", "create_agent"})

_INPUT_MESSAGE_EVENTS = {
    EVENT_SYSTEM_MESSAGE: "system",
    EVENT_USER_MESSAGE: ROLE_USER,
    EVENT_ASSISTANT_MESSAGE: "assistant",
    EVENT_TOOL_MESSAGE: "tool",
}
