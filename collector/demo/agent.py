"""The demo agent: a scripted SRE agent working a Kubernetes incident, whose every model call
and tool call is a span exported through the OpenTelemetry SDK.

The "model" is a script (a scenario's plan), so runs are repeatable; everything else is real:
tool results come from the simulated cluster, context grows with them, spans carry the
attributes of the chosen dialect and leave through a real OTLP exporter.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import Span, Status, StatusCode, Tracer

from collector.demo.cluster import Cluster
from collector.demo.dialects import (
    LlmCall,
    ToolCall,
    agent_span_name,
    describe_agent,
    describe_llm,
    describe_tool,
    llm_span_name,
    tool_span_name,
)
from processors import conventions

SYSTEM_PROMPT = (
    "You are an SRE agent. Diagnose the incident using read-only tools first, then apply the "
    "smallest fix, then verify it with tool evidence before you declare success."
)
TASK = "HighErrorRate is firing for checkout in namespace shop. Find the cause and fix it."


@dataclass(frozen=True)
class Act:
    """One decision of the scripted model: call a tool, summarize, lose context, or finish."""

    kind: str  # "tool", "summarize", "forget", "final"
    tool: str = ""
    command: str = ""
    text: str = ""


def kubectl(command: str) -> Act:
    return Act("tool", tool="kubectl", command=command)


ALERTS = Act("tool", tool="get_alerts")
PODS = kubectl("kubectl get pods -n shop")
DESCRIBE = kubectl("kubectl describe deployment checkout -n shop")
LOGS = kubectl("kubectl logs deployment/checkout -n shop")
FIX = kubectl("kubectl set resources deployment/checkout --limits=memory=256Mi -n shop")
RESTART = kubectl("kubectl rollout restart deployment/checkout -n shop")
STATUS = kubectl("kubectl rollout status deployment/checkout -n shop")


def final(text: str) -> Act:
    return Act("final", text=text)


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    expected_modes: tuple[str, ...]
    plan: tuple[Act, ...]
    outcome: str


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
        "loses its conversation history half-way and starts over",
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


class SreAgent:
    def __init__(self, tracer: Tracer, dialect: str = "genai", model: str = "gpt-4o") -> None:
        self.tracer = tracer
        self.dialect = dialect
        self.model = model
        self.name = "sre-agent"
        self._record: AgentRun  # the run in progress, set by `run`

    def run(self, scenario: Scenario, conversation: str = "") -> AgentRun:
        cluster = Cluster.incident()
        conversation = conversation or scenario.name
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": TASK},
        ]
        with self.tracer.start_as_current_span(agent_span_name(self.dialect, self.name)) as root:
            describe_agent(root, self.dialect, self.name, conversation)
            root.set_attribute(conventions.TASK_DESCRIPTION, TASK)
            root.set_attribute(conventions.RUN_OUTCOME, scenario.outcome)
            record = AgentRun(
                scenario, format(root.get_span_context().trace_id, "032x"), self.dialect
            )
            self._record = record
            for turn, act in enumerate(scenario.plan):
                if act.kind == "forget":
                    messages = messages[:2]
                elif act.kind == "summarize":
                    summary = self._summarize(messages)
                    messages = [*messages[:2], {"role": "user", "content": summary}]
                elif act.kind == "final":
                    self._llm(messages, act.text, [], "stop")
                else:
                    self._tool_turn(cluster, act, turn, messages)
            return record

    def _tool_turn(
        self, cluster: Cluster, act: Act, turn: int, messages: list[dict[str, str]]
    ) -> None:
        arguments = {"command": act.command} if act.command else {}
        call_id = f"call_{turn}"
        request = {"name": act.tool, "arguments": json.dumps(arguments), "id": call_id}
        thought = f"Next I will run {act.command or act.tool} to see the current state."
        self._llm(messages, thought, [request], "tool_calls")
        with self.tracer.start_as_current_span("tool") as span:
            self._record.tool_spans.append((act.command or act.tool, _span_id(span)))
            if act.tool == "get_alerts":
                ok, result = True, cluster.get_alerts()
            else:
                ok, result = cluster.kubectl(act.command)
            span.update_name(
                tool_span_name(self.dialect, ToolCall(act.tool, arguments, "", "", ""))
            )
            describe_tool(
                span,
                self.dialect,
                ToolCall(act.tool, arguments, result, call_id, self.name, ok),
            )
            if not ok:
                span.set_status(Status(StatusCode.ERROR, result))
        messages.append({"role": "assistant", "content": thought})
        messages.append({"role": "tool", "content": result})

    def _llm(
        self,
        messages: list[dict[str, str]],
        text: str,
        tool_calls: list[dict[str, str]],
        finish: str,
        agent: str = "",
    ) -> None:
        call = LlmCall(
            model=self.model,
            agent=agent or self.name,
            input_tokens=_tokens(messages),
            output_tokens=len(text) // 4 + 10,
            messages=list(messages),
            output_text=text,
            tool_calls=tool_calls,
            finish_reason=finish,
        )
        with self.tracer.start_as_current_span(llm_span_name(self.dialect, call)) as span:
            self._record.llm_spans.append(_span_id(span))
            describe_llm(span, self.dialect, call)

    def _summarize(self, messages: list[dict[str, str]]) -> str:
        summary = "Summary so far: checkout in shop is crash-looping, OOMKilled at 64Mi."
        with self.tracer.start_as_current_span("summarize_history") as span:
            call = LlmCall(
                model=self.model,
                agent="summarizer",
                input_tokens=_tokens(messages),
                output_tokens=len(summary) // 4,
                messages=list(messages),
                output_text=summary,
                finish_reason="stop",
            )
            describe_llm(span, self.dialect, call)
        return summary
