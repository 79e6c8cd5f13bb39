"""The GenAI evaluation event sent as an OTLP log record (`gen_ai.evaluation.result`).

Evaluators usually finish after the run: their verdict arrives as a log record carrying the
evaluated run's trace id. It becomes an EVALUATION step of that run whose run attributes hold
the outcome and score (`mast.run.outcome`, `mast.run.score`), so an open run's signature gets
them at close and a closed run's signature is updated.
"""

from __future__ import annotations

from typing import Any

from mast_otel.processors.ids import stable_hex
from mast_otel.processors.model import Step, StepKind
from mast_otel.processors.normalize import genai, values
from mast_otel.processors.records import LogRecord

DIALECT = "genai"
EVENT_NAME_ATTRIBUTE = "event.name"


def _event_name(record: LogRecord) -> str:
    return record.event_name or values.name(
        values.mapping(record.attributes).get(EVENT_NAME_ATTRIBUTE)
    )


def recognises(record: LogRecord) -> bool:
    return bool(record.trace_id) and _event_name(record) == genai.EVENT_EVALUATION_RESULT


def to_step(record: LogRecord, max_text: int = values.MAX_TEXT) -> Step:
    attrs = values.mapping(record.attributes)
    run: dict[str, Any] = values.run_attributes(attrs)
    genai.apply_evaluations(run, [(genai.EVENT_EVALUATION_RESULT, attrs)])
    time_ns = record.time_ns or record.observed_time_ns
    return Step(
        trace_id=record.trace_id,
        span_id=stable_hex("evaluation", record.trace_id, record.span_id, str(time_ns), length=16),
        # Never the run's root: an evaluation must not close the run it judges.
        parent_span_id=record.span_id
        or stable_hex("evaluation-parent", record.trace_id, length=16),
        name=genai.EVENT_EVALUATION_RESULT,
        kind=StepKind.EVALUATION,
        start_ns=time_ns,
        end_ns=time_ns,
        dialect=DIALECT,
        service=record.service_name,
        run_attributes=run,
    )
