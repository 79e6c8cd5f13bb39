"""A step's agent from its nearest agent ancestor, also when the ancestor arrives later (a span
is exported when it ends, so an agent span comes after its model and tool spans)."""

from __future__ import annotations

from collections.abc import Iterable

from mast_otel.processors.model import Finding, Step, StepKind
from mast_otel.processors.run import DetectorRun, Run
from mast_otel.processors.window import RunWindows, WindowConfig


class Seen(DetectorRun):
    steps: list[tuple[str, str]]

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        Seen.steps.append((step.name, step.agent))
        return ()


def windows(**config: float) -> RunWindows:
    Seen.steps = []
    return RunWindows(WindowConfig(**config), lambda run: [Seen()])  # type: ignore[arg-type]


def span(name: str, span_id: str, parent: str, kind: StepKind, start: float, **fields) -> Step:
    return Step(
        trace_id="t",
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        kind=kind,
        start_ns=int(start * 1e9),
        end_ns=int(start * 1e9) + 1,
        dialect="openinference",
        **fields,
    )


def test_children_wait_for_the_agent_span_that_arrives_after_them():
    w = windows(grace_s=0.5, agent_wait_s=5.0)
    w.add(span("response", "llm", "turn", StepKind.LLM, 3), now=0.0)
    w.add(span("get_logs", "tool", "turn", StepKind.TOOL, 4), now=0.0)
    w.tick(1.0)
    w.add(span("turn", "turn", "agent", StepKind.OTHER, 2), now=1.5)
    w.tick(2.5)
    assert Seen.steps == []  # the agent span has not come yet: nothing is released
    w.add(span("triage", "agent", "root", StepKind.AGENT, 1, agent="triage"), now=3.0)
    w.add(span("workflow", "root", "", StepKind.AGENT, 0, service="crew"), now=3.0)
    w.tick(4.0)
    assert Seen.steps == [
        ("workflow", "crew"),
        ("triage", "triage"),
        ("turn", "triage"),
        ("response", "triage"),
        ("get_logs", "triage"),
    ]
    assert w.stats.agent_wait_expired == 0


def test_an_ancestor_that_never_comes_holds_steps_no_longer_than_agent_wait():
    w = windows(grace_s=0.5, agent_wait_s=2.0)
    w.add(span("get_logs", "tool", "remote-parent", StepKind.TOOL, 1), now=0.0)
    w.tick(1.0)
    assert Seen.steps == []
    w.tick(2.5)
    assert Seen.steps == [("get_logs", "")]
    assert w.stats.agent_wait_expired == 1


def test_message_events_join_their_span_before_or_after_it_arrives():
    w = windows(grace_s=0.5)

    def said(text: str):
        def join(step: Step) -> None:
            step.output_text += text

        return join

    w.join_events("t", "llm", said("early "))
    w.add(span("chat", "llm", "", StepKind.LLM, 1), now=0.0)
    w.join_events("t", "llm", said("late"))
    out = w.close_all()
    assert out.signatures and w.stats.events_joined == 2
    w.join_events("t", "llm", said("after close"))
    assert w.stats.events_after_step == 1


def test_an_agent_named_after_its_steps_were_released_stays_unnamed_for_that_run():
    # A chat span per model call, no agent on it (openai-v2); the `invoke_agent` root that
    # names the agent is exported when the run ends. Steps released before it came have no
    # agent; so do the ones under it released after: detectors keep state per agent.
    w = windows(grace_s=0.5, agent_wait_s=5.0)

    def chat(name: str, span_id: str, parent: str, start: float) -> Step:
        step = span(name, span_id, parent, StepKind.LLM, start)
        step.dialect = "genai"
        return step

    for i in range(3):
        w.add(chat(f"chat {i}", f"c{i}", "root", 1 + i), now=2.0 * i)
        w.tick(2.0 * i + 1)
    w.add(chat("chat 3", "c3", "root", 4), now=7.0)
    w.add(span("invoke_agent", "root", "", StepKind.AGENT, 0, agent="helpdesk"), now=7.0)
    # A step of another branch, whose agent span came in time, keeps its name.
    w.add(chat("chat x", "cx", "sub", 5), now=7.0)
    w.add(span("sub", "sub", "root", StepKind.AGENT, 4.5, agent="fixer"), now=7.0)
    w.close_all()
    assert Seen.steps == [
        ("chat 0", ""),
        ("chat 1", ""),
        ("chat 2", ""),
        ("invoke_agent", "helpdesk"),
        ("chat 3", ""),
        ("sub", "fixer"),
        ("chat x", "fixer"),
    ]


def test_work_under_a_delegation_is_the_coworkers_the_delegation_its_senders():
    # CrewAI's manager delegates by a tool call; the coworker's model call runs under it and
    # arrives first, the tool span and the manager's task span after it. The coworker's first
    # step is a hand-off from the manager.
    w = windows(grace_s=0.5, agent_wait_s=5.0)
    w.add(span("ChatCompletion", "coworker", "delegate", StepKind.LLM, 3), now=0.0)
    w.tick(1.0)
    assert Seen.steps == []
    delegate = span("delegate", "delegate", "task", StepKind.TOOL, 2, target_agent="fixer")
    w.add(delegate, now=1.5)
    w.add(span("ChatCompletion", "ask", "task", StepKind.LLM, 1.5), now=1.5)
    w.add(span("task", "task", "", StepKind.AGENT, 1, agent="planner"), now=2.0)
    w.tick(3.0)
    assert Seen.steps == [
        ("task", "planner"),
        ("ChatCompletion", "planner"),
        ("delegate", "planner"),
        ("handoff from planner to fixer", "planner"),
        ("ChatCompletion", "fixer"),
    ]
