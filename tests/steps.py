"""Plain step sequences for detector tests: a tiny builder for agent runs."""

from __future__ import annotations

import json
from typing import Any

from mast_otel.processors.classify import ActionClassifier
from mast_otel.processors.detectors import (
    FACTORIES,
    DetectorFactory,
    build_detectors,
    detector_factory,
)
from mast_otel.processors.detectors.config import DetectorsConfig
from mast_otel.processors.model import (
    Finding,
    RunSignature,
    Step,
    StepKind,
    StepStatus,
    ToolCallRequest,
)
from mast_otel.processors.window import RunWindows, WindowConfig, WindowOutput

TRACE = "0af7651916cd43dd8448eb211c80319c"


class RunBuilder:
    """Appends steps one second apart under one root span."""

    def __init__(self, trace_id: str = TRACE, agent: str = "sre-agent", model: str = "m1") -> None:
        self.trace_id = trace_id
        self.agent = agent
        self.model = model
        self.steps: list[Step] = []
        self.t = 1_700_000_000_000_000_000
        self.root_id = "a" * 16

    def _span_id(self) -> str:
        return f"{len(self.steps) + 1:016x}"

    def tool(
        self,
        name: str,
        args: dict[str, Any] | str,
        result: str = "ok",
        error: str = "",
        agent: str | None = None,
    ) -> Step:
        step = Step(
            trace_id=self.trace_id,
            span_id=self._span_id(),
            parent_span_id=self.root_id,
            name=f"execute_tool {name}",
            kind=StepKind.TOOL,
            start_ns=self.t,
            end_ns=self.t + 500_000_000,
            dialect="genai",
            status=StepStatus.ERROR if error else StepStatus.OK,
            error=error,
            agent=self.agent if agent is None else agent,
            tool_name=name,
            tool_arguments=args if isinstance(args, str) else json.dumps(args),
            tool_result=result,
        )
        return self._add(step)

    def llm(
        self,
        input_tokens: int | None = 1000,
        messages: int | None = None,
        name: str = "chat",
        agent: str | None = None,
        input_text: str = "",
        output: str = "",
        calls: tuple[str, ...] = (),
        finish: str = "",
    ) -> Step:
        step = Step(
            trace_id=self.trace_id,
            span_id=self._span_id(),
            parent_span_id=self.root_id,
            name=name,
            kind=StepKind.LLM,
            start_ns=self.t,
            end_ns=self.t + 800_000_000,
            dialect="genai",
            agent=self.agent if agent is None else agent,
            model=self.model,
            input_tokens=input_tokens,
            output_tokens=50,
            input_messages=messages,
            input_text=input_text,
            output_text=output,
            tool_calls=tuple(ToolCallRequest(c) for c in calls),
            finish_reason=finish or ("tool_calls" if calls else "stop" if output else ""),
        )
        return self._add(step)

    def final(self, text: str, agent: str | None = None) -> Step:
        return self.llm(output=text, agent=agent)

    def human(self, text: str) -> Step:
        """A turn of the user (a person, a simulated user or a harness re-prompting)."""
        step = Step(
            trace_id=self.trace_id,
            span_id=self._span_id(),
            parent_span_id=self.root_id,
            name="user message",
            kind=StepKind.HUMAN,
            start_ns=self.t,
            end_ns=self.t + 1000,
            dialect="genai",
            input_text=text,
        )
        return self._add(step)

    def handoff(self, target: str, message: str, agent: str | None = None) -> Step:
        step = Step(
            trace_id=self.trace_id,
            span_id=self._span_id(),
            parent_span_id=self.root_id,
            name=f"execute_tool transfer_to_{target}",
            kind=StepKind.HANDOFF,
            start_ns=self.t,
            end_ns=self.t + 1000,
            dialect="genai",
            agent=self.agent if agent is None else agent,
            tool_name=f"transfer_to_{target}",
            target_agent=target,
            input_text=message,
        )
        return self._add(step)

    def failed_agent(self, error: str) -> Step:
        step = Step(
            trace_id=self.trace_id,
            span_id=self._span_id(),
            parent_span_id=self.root_id,
            name="invoke_agent",
            kind=StepKind.AGENT,
            start_ns=self.t,
            end_ns=self.t + 1000,
            dialect="genai",
            status=StepStatus.ERROR,
            error=error,
            agent=self.agent,
        )
        return self._add(step)

    def _add(self, step: Step) -> Step:
        self.steps.append(step)
        self.t += 1_000_000_000
        return step

    def root(self, **attributes: Any) -> Step:
        return Step(
            trace_id=self.trace_id,
            span_id=self.root_id,
            parent_span_id="",
            name="invoke_agent",
            kind=StepKind.AGENT,
            start_ns=self.steps[0].start_ns - 1 if self.steps else self.t,
            end_ns=self.t,
            dialect="genai",
            agent=self.agent,
            run_attributes=dict(attributes),
        )


def analyse(
    steps: list[Step],
    config: DetectorsConfig | None = None,
    factories: tuple[DetectorFactory[Any], ...] = FACTORIES,
) -> tuple[list[Finding], list[RunSignature]]:
    """Run the steps through windows and the configured detectors; close all runs."""
    detectors = build_detectors(config or DetectorsConfig(), ActionClassifier(), factories)
    windows = RunWindows(WindowConfig(grace_s=0.0), detector_factory(detectors))
    out = WindowOutput()
    for i, step in enumerate(steps):
        out.extend(windows.add(step, now=float(i)))
        out.extend(windows.tick(float(i)))
    out.extend(windows.close_all())
    return out.findings, out.signatures


def modes(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.mode, f.rule) for f in findings]


# Calls and results several detector tests share.
GET_PODS = {"command": "kubectl get pods -n shop"}
RESTART = {"command": "kubectl rollout restart deployment/checkout -n shop"}
FIX = {"command": "kubectl set resources deployment/checkout --limits=memory=256Mi -n shop"}
PODS_BAD = "checkout-7d9 0/1 CrashLoopBackOff 5 (2m ago) 12m"
TASK = "checkout in namespace shop is failing"


def only(findings: list[Finding], mode: str) -> list[Finding]:
    return [f for f in findings if f.mode == mode]


def rules(
    steps: list[Step], config: DetectorsConfig | None = None, mode: str | None = None
) -> list[tuple[str, str]]:
    """The (mode, rule) of every finding on these steps, sorted (of one mode, if given)."""
    findings, _ = analyse(steps, config)
    return sorted((f.mode, f.rule) for f in findings if mode is None or f.mode == mode)
