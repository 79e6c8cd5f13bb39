"""Handing a run's released steps to its detectors, in start order.

The run windows (`processors.window`) decide which of a run's steps are released, and when;
this module hands them over, each in turn: its agent from its ancestors where it names none,
what its model call's input shows that no span did before it (`processors.conversation`), the
calls of code an executor ran as its writer's (`processors.code_execution`), the hand-off a
new agent acting implies, and the step itself to every detector that reads its kind. At close,
the calls the run ended on come last.
"""

from __future__ import annotations

from typing import Protocol

from mast_otel.processors import code_execution as code
from mast_otel.processors.conversation import Conversations, RecoveryStats
from mast_otel.processors.dispatch import stamp_findings
from mast_otel.processors.model import Finding, Step, StepKind
from mast_otel.processors.run import Run

# Read for every step: a module name is one lookup, an enum member read through its
# class is several. Private to this module's per-step code.
_AGENT = StepKind.AGENT
_HANDOFF = StepKind.HANDOFF
_HUMAN = StepKind.HUMAN
_LLM = StepKind.LLM
_TOOL = StepKind.TOOL


class Counts(Protocol):
    """The windows' counters this module keeps."""

    steps_late: int
    steps_trimmed: int
    recovery: RecoveryStats


def hand_over(
    run: Run, ready: list[tuple[float, Step]], counts: Counts, findings: list[Finding]
) -> None:
    """The released steps (arrival time, step), in start order, to the run's detectors."""
    window, ancestry = run.window, run.ancestry
    for i, (_, step) in enumerate(ready):
        if not step.agent:
            ancestry.fill(step)
        if window:
            if step.start_ns < window[-1].start_ns:
                counts.steps_late += 1
            if len(window) == window.maxlen:
                counts.steps_trimmed += 1
        kind = step.kind
        if kind is _LLM:
            if code.may_ask(step):
                code.decide(step, code.following(ready, i, run.pending), run.code)
            conversations = run.conversations
            if conversations is None:
                conversations = run.conversations = Conversations(counts.recovery)
            attributes_before = len(run.attributes)
            for recovered in conversations.before_call(step, run.attributes):
                dispatch(run, recovered, findings, recovered=True)
            if len(run.attributes) != attributes_before:
                run.attributes_version += 1
        elif kind is _TOOL and run.code is not None and code.is_code_run(step):
            for asked in code.calls_run(step, run.code):
                call(run, asked, findings)
            continue
        elif (kind is _TOOL or kind is _HANDOFF) and run.conversations is not None:
            run.conversations.on_tool(step)
        elif kind is _HUMAN:
            if run.conversations is None:
                run.conversations = Conversations(counts.recovery)
            run.conversations.on_human(step)
        elif kind is _AGENT and run.conversations is not None:
            # An executor's reply to code it ran (caught here too if it came first).
            ran = run.code is not None and run.code.arrive(step)
            run.conversations.on_agent(step, ran)
        dispatch(run, step, findings)
        if kind is _LLM and run.conversations is not None:
            run.conversations.after_call(step)


def at_close(run: Run, findings: list[Finding]) -> None:
    """The calls the run ended on, that nothing showed run: code an executor was asked to run,
    then calls a model asked for (`Conversations.at_close`)."""
    for asked in code.unanswered(run.code):
        call(run, asked, findings, recovered=True)
    if run.conversations is not None:
        for recovered in run.conversations.at_close():
            dispatch(run, recovered, findings, recovered=True)


def call(run: Run, step: Step, findings: list[Finding], recovered: bool = False) -> None:
    """A tool step no span of its own stands for (a call a code run answered)."""
    if run.conversations is not None:
        run.conversations.on_tool(step)
    dispatch(run, step, findings, recovered)


def dispatch(run: Run, step: Step, findings: list[Finding], recovered: bool = False) -> None:
    """One step to the detectors that read its kind (after the hand-off it implies)."""
    detectors, plan = run.detectors, run.plan
    implied = run.implied_handoff(step)
    if implied is not None:
        for i in plan[_HANDOFF]:
            produced = detectors[i].on_step(implied, run)
            if produced:
                findings.extend(stamp_findings(run, produced))
    run.record(step, recovered)
    for i in plan[step.kind]:
        produced = detectors[i].on_step(step, run)
        if produced:  # most steps produce nothing: skip the bookkeeping
            findings.extend(stamp_findings(run, produced))
