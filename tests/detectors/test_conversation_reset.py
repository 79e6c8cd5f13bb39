"""FM-2.1 conversation reset.

The detector's rules on plain step sequences: each where it should fire, and its near
misses, which must stay silent."""

from __future__ import annotations

from tests.steps import RunBuilder, rules


def test_fm21_messages_fall_back_to_the_opening():
    run = RunBuilder()
    for n in (2, 4, 6, 8):
        run.llm(input_tokens=None, messages=n)
    run.llm(input_tokens=None, messages=2)
    assert rules(run.steps, mode="FM-2.1") == [("FM-2.1", "back_to_opening")]
    assert rules(run.steps, mode="FM-1.4") == []  # a reset, not a partial loss


def test_fm21_a_context_that_keeps_growing_is_no_reset():
    run = RunBuilder()
    for n in (2, 4, 6, 8, 10):
        run.llm(input_tokens=None, messages=n)
    assert rules(run.steps, mode="FM-2.1") == []


def test_fm21_a_small_fall_before_the_context_grew_is_no_reset():
    run = RunBuilder()
    for n in (2, 3):
        run.llm(input_tokens=None, messages=n)
    run.llm(input_tokens=None, messages=2)
    assert rules(run.steps, mode="FM-2.1") == []
