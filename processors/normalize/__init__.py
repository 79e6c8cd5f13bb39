"""Normalization: decoded spans and agent log events read into the one `Step` model.

Each dialect module (`genai`, `openinference`, `openllmetry`, `codex`) is the only place that
spells its dialect's attribute names, and offers `recognises(record)` and
`to_step(record, max_text)`. Detectors read `Step`s only, so a new dialect is a new module here
and nothing else.

Span dialects are tried in a fixed order, most specific marker first:
1. OpenInference: `openinference.span.kind` is required on every OpenInference span and names
   no other dialect, so it decides alone.
2. OpenLLMetry: its LLM spans also carry GenAI names (`gen_ai.system`, `gen_ai.request.model`),
   so it must be asked before GenAI; it claims a span only on its own markers (`traceloop.*`,
   `llm.request.type`, indexed `gen_ai.prompt.<i>.*` / `gen_ai.completion.<i>.*`) and reads
   the GenAI names through `genai.build`.
3. GenAI: any remaining span with a `gen_ai.*` attribute or event.
A span no dialect knows gives None (the caller stores it untouched).
"""

from __future__ import annotations

from types import ModuleType

from mast_otel.processors.model import Step, StepKind
from mast_otel.processors.normalize import (
    codex,
    evaluation_logs,
    genai,
    openinference,
    openllmetry,
    span_fields,
)
from mast_otel.processors.normalize.handoffs import mark_handoff
from mast_otel.processors.normalize.tool_status import mark_failed_result
from mast_otel.processors.normalize.values import MAX_TEXT
from mast_otel.processors.records import LogRecord, SpanRecord

__all__ = ["LOG_DIALECTS", "MAX_TEXT", "SPAN_DIALECTS", "normalize_log", "normalize_span"]

SPAN_DIALECTS: tuple[ModuleType, ...] = (openinference, openllmetry, genai)
LOG_DIALECTS: tuple[ModuleType, ...] = (codex, evaluation_logs)


def normalize_span(record: SpanRecord, max_text: int = MAX_TEXT) -> Step | None:
    """The step for a span of a known dialect, or None; never raises.

    `max_text` caps tool arguments, tool results and output text (input text is capped lower,
    see `values.INPUT_TEXT_MAX`); a negative value lifts the caps. The readers are written not
    to raise on any attribute value; should one still fail, the span keeps a bare step of its
    dialect (ids, times, status) rather than vanishing from its run.
    """
    for dialect in SPAN_DIALECTS:
        try:
            if not dialect.recognises(record):
                continue
        except Exception:
            continue
        try:
            step: Step = dialect.to_step(record, max_text=max_text)
        except Exception:
            return _bare_step(record, dialect.DIALECT)
        return mark_failed_result(mark_handoff(_plain_apostrophes(step)))
    return None


# Typographic apostrophes in prose (U+2019 in "I\u2019m unable to"), which models write as
# often as plain ones: the detectors' patterns are written with the plain one.
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'"})


def _plain_apostrophes(step: Step) -> Step:
    """The step with plain apostrophes in its prose (what the model and the user said); tool
    arguments and results stay as sent."""
    if "\u2019" in step.output_text or "\u2018" in step.output_text:
        step.output_text = step.output_text.translate(_APOSTROPHES)
    if "\u2019" in step.input_text or "\u2018" in step.input_text:
        step.input_text = step.input_text.translate(_APOSTROPHES)
    return step


def normalize_log(record: LogRecord, max_text: int = MAX_TEXT) -> Step | None:
    """The step for an agent log event (Codex CLI `codex.*`), or None for other logs."""
    for dialect in LOG_DIALECTS:
        try:
            if dialect.recognises(record):
                step: Step = dialect.to_step(record, max_text=max_text)
                return _plain_apostrophes(step)
        except Exception:
            return None
    return None


def _bare_step(record: SpanRecord, dialect: str) -> Step | None:
    try:
        return span_fields.span_step(record, StepKind.OTHER, dialect)
    except Exception:
        return None
