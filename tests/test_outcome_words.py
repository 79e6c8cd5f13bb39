"""One outcome vocabulary: a run's outcome reads the same whether it arrives as the
`mast.run.outcome` attribute or as the label of a GenAI evaluation event; yes/no words count
only where the value is the run's outcome itself."""

from __future__ import annotations

import pytest

from mast_otel.processors import conventions
from mast_otel.processors.normalize import normalize_span
from mast_otel.processors.records import SpanEvent, SpanRecord
from mast_otel.processors.run import run_outcome

WORDS = sorted(conventions.RUN_SUCCESS_WORDS | conventions.RUN_FAILURE_WORDS)
# Labels that say nothing of success, and spellings of vocabulary words.
OTHER = ["relevant", "partial", "maybe", "Passed", " FAILED "]


def _evaluated(label: str) -> SpanRecord:
    event = SpanEvent(
        9,
        "gen_ai.evaluation.result",
        {"gen_ai.evaluation.name": "judge", "gen_ai.evaluation.score.label": label},
    )
    return SpanRecord(
        trace_id="0af7651916cd43dd8448eb211c80319c",
        span_id="b7ad6b7169203331",
        parent_span_id="",
        name="evaluate",
        start_ns=1_000,
        end_ns=5_000,
        status_code="Unset",
        status_message="",
        service_name="agent",
        attributes={},
        events=[event],
    )


@pytest.mark.parametrize("word", WORDS + OTHER)
def test_an_evaluation_label_and_the_outcome_attribute_read_the_same(word: str) -> None:
    from_attribute, _ = run_outcome({conventions.RUN_OUTCOME: word})
    step = normalize_span(_evaluated(word))
    assert step is not None
    from_evaluation, _ = run_outcome(step.run_attributes)
    assert from_evaluation == from_attribute


@pytest.mark.parametrize(
    "word", sorted(conventions.RUN_SUCCESS_BOOLEANS | conventions.RUN_FAILURE_BOOLEANS)
)
def test_a_yes_no_label_of_an_evaluation_is_not_the_runs_outcome(word: str) -> None:
    """ "toxicity: false" is good news about one question, not a failed run."""
    assert run_outcome({conventions.RUN_OUTCOME: word})[0] in ("success", "failure")
    step = normalize_span(_evaluated(word))
    assert step is not None
    assert run_outcome(step.run_attributes)[0] == ""
    assert step.run_attributes.get("gen_ai.evaluation.score.label") == word


def test_the_vocabulary_says_success_or_failure_and_nothing_else_does() -> None:
    assert conventions.RUN_SUCCESS_WORDS.isdisjoint(conventions.RUN_FAILURE_WORDS)
    for word in conventions.RUN_SUCCESS_WORDS:
        assert conventions.outcome_of(word.upper()) == "success"
    for word in conventions.RUN_FAILURE_WORDS:
        assert conventions.outcome_of(f" {word} ") == "failure"
    assert conventions.outcome_of("relevant") == ""
    # Words only one path knew before it had one vocabulary.
    assert run_outcome({conventions.RUN_OUTCOME: "correct"})[0] == "success"
    assert run_outcome({conventions.RUN_OUTCOME: "ok"})[0] == "success"
    step = normalize_span(_evaluated("successful"))
    assert step is not None and run_outcome(step.run_attributes)[0] == "success"
