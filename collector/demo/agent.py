"""The demo agent: a scripted SRE agent (or a crew of them) working a Kubernetes incident,
whose every model call and tool call is a span exported through the OpenTelemetry SDK.

The "model" is a script (a scenario's plan), so runs are repeatable; everything else is real:
tool results come from the simulated cluster, context grows with them, spans carry the
attributes of the chosen dialect and leave through a real OTLP exporter.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import Span, Status, StatusCode, Tracer

from mast_otel.collector.demo.cluster import Cluster
from mast_otel.collector.demo.dialects import (
    LlmCall,
    ToolCall,
    agent_span_name,
    describe_agent,
    describe_llm,
    describe_tool,
    llm_span_name,
    tool_span_name,
)
from mast_otel.processors import conventions

SYSTEM_PROMPT = (
    "You are an SRE agent. Diagnose the incident using read-only tools first, then apply the "
    "smallest fix, then verify it with tool evidence before you declare success."
)
TASK = "HighErrorRate is firing for checkout in namespace shop. Find the cause and fix it."


@dataclass(frozen=True)
class Act:
    """One decision of the scripted model.

    kind: "tool" (call `tool` with `command`/`arguments`; `say` overrides the reasoning),
    "final" (answer `text`), "forget" (lose the middle of the history), "reset" (start over
    from the opening prompt), "summarize" (a summarizer compacts the history), "handoff"
    (hand the work to agent `target` with message `text` through a `transfer_to_<target>`
    tool), "delegate" (invoke agent `target` as a sub-agent with message `text`, no hand-off
    tool: the collector infers the hand-off), "ask" (ask the user `text`, who
    answers `answer`), "limit" (the framework stops the run with error `text`).
    """

    kind: str
    tool: str = ""
    command: str = ""
    arguments: tuple[tuple[str, Any], ...] = ()
    text: str = ""
    say: str = ""
    target: str = ""
    answer: str = ""


def kubectl(command: str, say: str = "") -> Act:
    return Act("tool", tool="kubectl", command=command, say=say)


def final(text: str) -> Act:
    return Act("final", text=text)


ALERTS = Act("tool", tool="get_alerts")
PODS = kubectl("kubectl get pods -n shop")
DESCRIBE = kubectl("kubectl describe deployment checkout -n shop")
LOGS = kubectl("kubectl logs deployment/checkout -n shop")
FIX = kubectl("kubectl set resources deployment/checkout --limits=memory=256Mi -n shop")
RESTART = kubectl("kubectl rollout restart deployment/checkout -n shop")
STATUS = kubectl("kubectl rollout status deployment/checkout -n shop")


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    expected_modes: tuple[str, ...]
    plan: tuple[Act, ...]
    outcome: str
    # mast.* attributes on the run's root span (task policy).
    attributes: tuple[tuple[str, Any], ...] = ()
    # Per agent: mast.* attributes on that agent's span (role policy).
    agent_attributes: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()
    cluster: str = ""


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "healthy_fix",
        "diagnoses, raises the memory limit, re-checks pods and alerts",
        (),
        (
            ALERTS,
            PODS,
            DESCRIBE,
            LOGS,
            FIX,
            PODS,
            ALERTS,
            final("Raised memory limit; alert cleared."),
        ),
        "success",
    ),
    Scenario(
        "stuck_loop",
        "keeps listing the same pods without learning anything new",
        ("FM-1.3",),
        (ALERTS, PODS, PODS, PODS, PODS, LOGS, final("Pods are crash-looping; cause unknown.")),
        "failure",
    ),
    Scenario(
        "amnesia",
        "loses most of its conversation history half-way",
        ("FM-1.4",),
        (ALERTS, PODS, LOGS, DESCRIBE, Act("forget"), PODS, final("checkout looks unhealthy.")),
        "failure",
    ),
    Scenario(
        "blind_fix",
        "changes the deployment and declares success without checking",
        ("FM-3.2",),
        (ALERTS, PODS, LOGS, FIX, final("Fixed: memory limit raised.")),
        "failure",
    ),
    Scenario(
        "summarized_context",
        "near miss: its context shrinks because a summarizer compacted it on purpose",
        (),
        (
            ALERTS,
            PODS,
            LOGS,
            DESCRIBE,
            Act("summarize"),
            FIX,
            PODS,
            ALERTS,
            final("Raised memory limit; alert cleared."),
        ),
        "success",
    ),
    Scenario(
        "rollout_polling",
        "near miss: restarts, then polls a rollout whose status changes, then checks pods",
        (),
        (ALERTS, PODS, LOGS, RESTART, STATUS, STATUS, STATUS, PODS, final("Restarted checkout.")),
        "failure",
    ),
)
SCENARIOS_BY_NAME = {s.name: s for s in SCENARIOS}


def tracer_provider(
    exporter: SpanExporter, service: str = "sre-agent", also: SpanExporter | None = None
) -> TracerProvider:
    """An SDK provider exporting in batches to `exporter` (and, for tests, to `also`)."""
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=200))
    if also is not None:
        provider.add_span_processor(SimpleSpanProcessor(also))
    return provider


def _span_id(span: Span) -> str:
    return format(span.get_span_context().span_id, "016x")


def _tokens(messages: list[dict[str, str]]) -> int:
    """A rough token count (4 characters a token, plus per-message overhead)."""
    return sum(len(m["content"]) // 4 + 8 for m in messages)


@dataclass
class AgentRun:
    """What the agent did, by span id: where findings are expected to point."""

    scenario: Scenario
    trace_id: str
    dialect: str
    tool_spans: list[tuple[str, str]] = field(default_factory=list)  # (command, span id)
    llm_spans: list[str] = field(default_factory=list)
    handoff_spans: list[str] = field(default_factory=list)
    root_span: str = ""


class SreAgent:
    def __init__(self, tracer: Tracer, dialect: str = "genai", model: str = "gpt-4o") -> None:
        self.tracer = tracer
        self.dialect = dialect
        self.model = model
        self.name = "sre-agent"

    def run(self, scenario: Scenario, conversation: str = "") -> AgentRun:
        cluster = Cluster.incident(scenario.cluster)
        conversation = conversation or scenario.name
        agent_attributes = {name: dict(attrs) for name, attrs in scenario.agent_attributes}
        with self.tracer.start_as_current_span(agent_span_name(self.dialect, self.name)) as root:
            describe_agent(root, self.dialect, self.name, conversation)
            root.set_attribute(conventions.TASK_DESCRIPTION, TASK)
            root.set_attribute(conventions.RUN_OUTCOME, scenario.outcome)
            for key, value in scenario.attributes:
                root.set_attribute(key, value)
            for key, value in agent_attributes.get(self.name, {}).items():
                root.set_attribute(key, value)
            record = AgentRun(
                scenario, format(root.get_span_context().trace_id, "032x"), self.dialect
            )
            record.root_span = _span_id(root)
            turn = _Turn(self, cluster, record, self.name)
            acts = list(scenario.plan)
            while acts:
                act = acts.pop(0)
                if act.kind in ("handoff", "delegate"):
                    if act.kind == "handoff":
                        turn.handoff(act)
                    # The receiving agent works inside its own agent span until it hands back.
                    own = []
                    while acts and acts[0].kind not in ("handoff", "delegate"):
                        own.append(acts.pop(0))
                    turn = turn.delegate(
                        act, own, agent_attributes.get(act.target, {}), conversation
                    )
                    continue
                if act.kind == "limit":
                    root.set_status(Status(StatusCode.ERROR, act.text))
                    break
                turn.play(act)
            return record


class _Turn:
    """One agent's side of the conversation: its history and how it acts."""

    def __init__(self, agent: SreAgent, cluster: Cluster, record: AgentRun, name: str) -> None:
        self.agent = agent
        self.cluster = cluster
        self.record = record
        self.name = name
        self.messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": TASK},
        ]

    def delegate(
        self, act: Act, acts: list[Act], attributes: dict[str, Any], conversation: str
    ) -> _Turn:
        """Run `acts` as the receiving agent, inside its agent span; returns its turn."""
        agent = self.agent
        receiver = _Turn(agent, self.cluster, self.record, act.target)
        receiver.messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": act.text},
        ]
        with agent.tracer.start_as_current_span(agent_span_name(agent.dialect, act.target)) as span:
            describe_agent(span, agent.dialect, act.target, conversation)
            for key, value in attributes.items():
                span.set_attribute(key, value)
            for own in acts:
                if own.kind == "limit":
                    span.set_status(Status(StatusCode.ERROR, own.text))
                    break
                receiver.play(own)
        return receiver

    def play(self, act: Act) -> None:
        if act.kind == "forget":
            self.messages = [*self.messages[:2], *self.messages[-2:]]
        elif act.kind == "reset":
            self.messages = self.messages[:2]
        elif act.kind == "summarize":
            summary = self._summarize()
            self.messages = [*self.messages[:2], {"role": "user", "content": summary}]
        elif act.kind == "final":
            self._llm(act.text, [], "stop")
        elif act.kind == "ask":
            self._llm(act.text, [], "stop")
            self.messages.append({"role": "assistant", "content": act.text})
            self.messages.append({"role": "user", "content": act.answer})
        elif act.kind == "tool":
            self._tool_turn(act)
        else:
            raise ValueError(f"unknown act {act.kind!r}")

    def handoff(self, act: Act) -> None:
        """Call the hand-off tool (`transfer_to_<agent>`) with the message."""
        self._tool_turn(
            Act(
                "tool",
                tool=f"transfer_to_{act.target}",
                arguments=(("message", act.text),),
                say=f"Handing over to {act.target}.",
            ),
            handoff=True,
        )

    def _tool_turn(self, act: Act, handoff: bool = False) -> None:
        agent = self.agent
        arguments: dict[str, Any] = dict(act.arguments)
        if act.command:
            arguments["command"] = act.command
        turn = len(self.record.tool_spans) + len(self.record.handoff_spans)
        call_id = f"call_{turn}"
        request = {"name": act.tool, "arguments": json.dumps(arguments), "id": call_id}
        thought = act.say or f"Next I will run {act.command or act.tool} to see the current state."
        self._llm(thought, [request], "tool_calls")
        with agent.tracer.start_as_current_span("tool") as span:
            if handoff:
                self.record.handoff_spans.append(_span_id(span))
            else:
                self.record.tool_spans.append((act.command or act.tool, _span_id(span)))
            ok, result = self._execute(act, arguments)
            call = ToolCall(act.tool, arguments, result, call_id, self.name, ok)
            span.update_name(tool_span_name(agent.dialect, call))
            describe_tool(span, agent.dialect, call)
            if not ok:
                span.set_status(Status(StatusCode.ERROR, result))
        self.messages.append({"role": "assistant", "content": thought})
        self.messages.append({"role": "tool", "content": result})

    def _execute(self, act: Act, arguments: dict[str, Any]) -> tuple[bool, str]:
        if act.tool == "get_alerts":
            return True, self.cluster.get_alerts()
        if act.tool == "find_deployment":
            return True, self.cluster.find_deployment(str(arguments.get("name", "")))
        if act.tool.startswith("transfer_to_"):
            return True, f"handed over to {act.tool.removeprefix('transfer_to_')}"
        return self.cluster.kubectl(act.command)

    def _llm(
        self,
        text: str,
        tool_calls: list[dict[str, str]],
        finish: str,
        agent: str = "",
    ) -> None:
        call = LlmCall(
            model=self.agent.model,
            agent=agent or self.name,
            input_tokens=_tokens(self.messages),
            output_tokens=len(text) // 4 + 10,
            messages=list(self.messages),
            output_text=text,
            tool_calls=tool_calls,
            finish_reason=finish,
        )
        dialect = self.agent.dialect
        with self.agent.tracer.start_as_current_span(llm_span_name(dialect, call)) as span:
            self.record.llm_spans.append(_span_id(span))
            describe_llm(span, dialect, call)

    def _summarize(self) -> str:
        summary = "Summary so far: checkout in shop is crash-looping, OOMKilled at 64Mi."
        dialect = self.agent.dialect
        with self.agent.tracer.start_as_current_span("summarize_history") as span:
            call = LlmCall(
                model=self.agent.model,
                agent="summarizer",
                input_tokens=_tokens(self.messages),
                output_tokens=len(summary) // 4,
                messages=list(self.messages),
                output_text=summary,
                finish_reason="stop",
            )
            describe_llm(span, dialect, call)
        return summary
