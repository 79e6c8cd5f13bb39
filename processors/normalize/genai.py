"""OpenTelemetry GenAI semantic conventions (`gen_ai.*`) read into a `Step`.

Covers the current names (v1.37+: `gen_ai.provider.name`, `gen_ai.input.messages` /
`gen_ai.output.messages` with typed parts, `gen_ai.tool.call.*`) and the older ones that
instrumentations on v1.36 and before still emit (`gen_ai.system`, `gen_ai.usage.prompt_tokens`,
`gen_ai.prompt` / `gen_ai.completion`, and the per-message span events). Both spellings of a
field land in the same `Step` field, so detectors never see which generation a sender used.

Names verified against open-telemetry/semantic-conventions: model/gen-ai/registry.yaml,
model/gen-ai/deprecated/registry-deprecated.yaml, model/gen-ai/deprecated/events-deprecated.yaml
and docs/gen-ai/gen-ai-{input,output}-messages.json.

The names are in `genai_names`; reading input and output messages (and message events sent as
log records) in `genai_messages`. Here: recognising a GenAI span, its kind, its step, and the
outcome its evaluation events give the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mast_otel.processors.conventions import RUN_OUTCOME, RUN_SCORE, outcome_of
from mast_otel.processors.model import Step, StepKind
from mast_otel.processors.normalize import span_fields, tool_definitions, values
from mast_otel.processors.normalize.genai_messages import (
    _finish_reason,
    _inputs,
    _outputs,
    _tool_from_events,
)
from mast_otel.processors.normalize.genai_names import (
    AGENT_ID,
    AGENT_NAME,
    AGENT_OPERATIONS,
    CODE_EXIT_CODE,
    CODE_OPERATIONS,
    CODE_OUTPUT,
    COMPLETION_TOKENS,
    CONVERSATION_ID,
    EVALUATION_NAME,
    EVALUATION_SCORE_LABEL,
    EVALUATION_SCORE_VALUE,
    EVENT_EVALUATION_RESULT,
    EVENT_USER_MESSAGE,
    FINISH_REASONS,
    INPUT_MESSAGES,
    INPUT_TOKENS,
    LLM_OPERATIONS,
    OPERATION,
    OUTPUT_TOKENS,
    PROMPT_TOKENS,
    REQUEST_MODEL,
    RESPONSE_MODEL,
    TOOL_CALL_ARGUMENTS,
    TOOL_CALL_ID,
    TOOL_CALL_RESULT,
    TOOL_DEFINITIONS,
    TOOL_NAME,
    TOOL_OPERATIONS,
)
from mast_otel.processors.normalize.values import MAX_TEXT
from mast_otel.processors.records import SpanRecord

DIALECT = "genai"
PREFIX = "gen_ai."


def recognises(record: SpanRecord) -> bool:
    """A span with any `gen_ai.*` attribute or event."""
    attrs = values.mapping(getattr(record, "attributes", None))
    if values.has_prefix(attrs, PREFIX):
        return True
    return any(event.startswith(PREFIX) for event, _ in span_fields.events_of(record))


def to_step(record: SpanRecord, max_text: int = MAX_TEXT) -> Step:
    """The step for a GenAI span; fields the span does not carry stay empty."""
    return build(record, max_text=max_text, dialect=DIALECT)


def build(record: SpanRecord, *, max_text: int = MAX_TEXT, dialect: str = DIALECT) -> Step:
    """Read every `gen_ai.*` field; OpenLLMetry reuses this for the GenAI names it emits."""
    attrs = values.mapping(getattr(record, "attributes", None))
    events = span_fields.events_of(record)
    operation = values.name(attrs.get(OPERATION)).lower()

    step = span_fields.span_step(record, _kind(operation, attrs, events), dialect)
    step.operation = operation
    step.model = values.first_name(attrs, RESPONSE_MODEL, REQUEST_MODEL)
    step.agent = values.first_name(attrs, AGENT_NAME, AGENT_ID)
    step.conversation_id = values.name(attrs.get(CONVERSATION_ID))
    step.tool_name = values.name(attrs.get(TOOL_NAME))
    step.tool_call_id = values.name(attrs.get(TOOL_CALL_ID))
    arguments = attrs.get(TOOL_CALL_ARGUMENTS)
    if arguments is not None:  # absent stays "", as rendering None gives
        step.tool_arguments = values.truncate(values.render(arguments), max_text)
    result = attrs.get(TOOL_CALL_RESULT)
    if result is not None:
        step.tool_result = values.truncate(values.render(result), max_text)
    step.input_tokens = values.first_count(attrs, INPUT_TOKENS, PROMPT_TOKENS)
    step.output_tokens = values.first_count(attrs, OUTPUT_TOKENS, COMPLETION_TOKENS)

    if step.kind is StepKind.TOOL and events and arguments is None and result is None:
        _tool_from_events(step, events, max_text)
    if operation in CODE_OPERATIONS and step.kind is StepKind.TOOL:
        step.tool_result = values.truncate(_code_reply(attrs), max_text)

    count, last_user, messages = _inputs(attrs, events, max_text)
    step.input_messages = count
    step.input_history = messages
    step.input_text = values.truncate(last_user, min(max_text, values.INPUT_TEXT_MAX))

    text, calls, finish = _outputs(attrs, events, max_text)
    step.output_text = values.truncate(text, max_text)
    step.tool_calls = tuple(calls)
    step.finish_reason = _finish_reason(attrs.get(FINISH_REASONS)) or finish
    definitions = attrs.get(TOOL_DEFINITIONS)
    if definitions is not None:
        step.tools_offered = tool_definitions.from_document(definitions)

    _apply_evaluations(step.run_attributes, events)
    return step


def _kind(operation: str, attrs: Mapping[str, Any], events: list[tuple[str, Any]]) -> StepKind:
    """Kind from the operation name; without one, from what the span carries.

    Instrumentations before v1.27 sent no operation name, so a missing one is inferred (tool
    fields → TOOL, a model or token usage → LLM, only an evaluation → EVALUATION, only a user
    message event → HUMAN). An operation name we do not know stays OTHER.
    """
    if operation in LLM_OPERATIONS:
        return StepKind.LLM
    if operation in TOOL_OPERATIONS:
        return StepKind.TOOL
    if operation in CODE_OPERATIONS:
        # Code an executor ran is a tool's run; finding no code to run, it ran nothing.
        return (
            StepKind.TOOL
            if values.to_int(attrs.get(CODE_EXIT_CODE)) is not None
            else StepKind.OTHER
        )
    if operation in AGENT_OPERATIONS:
        return StepKind.AGENT
    if operation:
        return StepKind.OTHER
    if values.first(attrs, TOOL_NAME, TOOL_CALL_ID) is not None:
        return StepKind.TOOL
    llm_markers = (REQUEST_MODEL, RESPONSE_MODEL, INPUT_TOKENS, PROMPT_TOKENS, INPUT_MESSAGES)
    if values.first(attrs, *llm_markers) is not None:
        return StepKind.LLM
    if any(name == EVENT_EVALUATION_RESULT for name, _ in events):
        return StepKind.EVALUATION
    if any(name == EVENT_USER_MESSAGE for name, _ in events):
        return StepKind.HUMAN  # a span that only carries a user's message: the user's turn
    return StepKind.OTHER


def _code_reply(attrs: Mapping[str, Any]) -> str:
    """An executor's reply to code it ran, as AG2 words it, from the exit code and the output
    on its code-execution span (the output as the span holds it: stripped, maybe cut)."""
    code = values.to_int(attrs.get(CODE_EXIT_CODE)) or 0
    status = "execution succeeded" if code == 0 else "execution failed"
    return f"exitcode: {code} ({status})\nCode output: {values.render(attrs.get(CODE_OUTPUT))}"


# --- evaluation -------------------------------------------------------------------------------


def _apply_evaluations(run: dict[str, Any], events: list[tuple[str, Any]]) -> None:
    """Outcome and score from `gen_ai.evaluation.result` events, into run attributes.

    A score in [0, 1] becomes `mast.run.score` and a label that plainly says pass or fail
    becomes `mast.run.outcome`, unless the span set those explicitly (explicit wins, then the
    first evaluation). Values that do not map (a 1-5 score, a label such as "relevant") are
    kept under their GenAI names so the outcome stage can still see them.
    """
    for event, event_attrs in events:
        if event != EVENT_EVALUATION_RESULT:
            continue
        score_raw = event_attrs.get(EVALUATION_SCORE_VALUE)
        label_raw = event_attrs.get(EVALUATION_SCORE_LABEL)
        score = values.to_float(score_raw)
        label = values.name(label_raw)
        unmapped = False
        if score is not None and 0.0 <= score <= 1.0:
            run.setdefault(RUN_SCORE, score)
        elif values.present(score_raw):
            run.setdefault(EVALUATION_SCORE_VALUE, score if score is not None else score_raw)
            unmapped = True
        outcome = outcome_of(label, booleans=False)
        if outcome:
            run.setdefault(RUN_OUTCOME, outcome)
        elif label:
            run.setdefault(EVALUATION_SCORE_LABEL, label)
            unmapped = True
        evaluation = values.name(event_attrs.get(EVALUATION_NAME))
        if unmapped and evaluation:
            run.setdefault(EVALUATION_NAME, evaluation)


apply_evaluations = _apply_evaluations
