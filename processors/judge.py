"""The seam for an optional semantic judge (an LLM or an embedding model) that reads a closed
run and names the modes spans alone cannot show reliably (derailment, ignored input,
reasoning-action mismatch, incorrect verification, ...). Off by default: the deterministic
detectors never wait for it.

This module holds what is pure: the transcript a judge reads, and how its verdict becomes
findings. The client that calls an endpoint lives in `collector/judge.py`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from mast_otel.processors.conventions import MODE_CODES, MODES_BY_CODE
from mast_otel.processors.model import Finding, Step, StepKind

JUDGE_DETECTOR = "semantic_judge"


@dataclass
class JudgeConfig:
    """The optional semantic judge: an LLM asked about modes spans alone cannot show reliably."""

    # Ask the judge about every closed run (off: only the deterministic detectors run).
    enabled: bool = False
    # An OpenAI-compatible chat completions endpoint, e.g. http://127.0.0.1:8000/v1.
    endpoint: str = ""
    # The model name sent to that endpoint.
    model: str = ""
    # Read from this environment variable, never from the config file, never logged.
    api_key_env: str = "MAST_JUDGE_API_KEY"
    # The modes the judge is asked about.
    modes: list[str] = field(
        default_factory=lambda: ["FM-2.3", "FM-2.5", "FM-2.6", "FM-3.1", "FM-3.3"]
    )
    # Longest wait for one verdict; a run not judged in time keeps its deterministic findings.
    timeout_s: float = 30.0
    # Closed runs waiting for the judge; past this, runs are not judged (counted).
    max_pending_runs: int = 100
    # Steps of a run shown to the judge (the last ones), and characters per step.
    max_transcript_steps: int = 60
    # Characters of each step shown to the judge.
    max_step_chars: int = 400
    # Findings below this confidence are dropped.
    min_confidence: float = 0.5

    def validate(self) -> None:
        if self.enabled and not (self.endpoint and self.model):
            raise ValueError("judge.endpoint and judge.model are required when judge.enabled")
        unknown = [m for m in self.modes if m not in MODE_CODES]
        if unknown:
            raise ValueError(f"judge.modes: unknown mode codes {unknown}")
        if self.max_pending_runs < 1 or self.max_transcript_steps < 1 or self.timeout_s <= 0:
            raise ValueError("judge limits must be positive")


@dataclass(frozen=True)
class Transcript:
    trace_id: str
    steps: tuple[Step, ...]


class Judge(Protocol):
    """Reads a closed run's transcript and returns findings (may call a remote model)."""

    def judge(self, transcript: Transcript) -> list[Finding]: ...


def render_transcript(transcript: Transcript, config: JudgeConfig) -> str:
    """The run as numbered lines a model can cite by span id."""
    lines = []
    for step in transcript.steps[-config.max_transcript_steps :]:
        if step.kind is StepKind.LLM:
            body = f"model said: {step.output_text}"
            if step.tool_calls:
                body += f" | asked for: {', '.join(c.name for c in step.tool_calls)}"
        elif step.kind is StepKind.TOOL:
            outcome = f"error: {step.error}" if step.failed else f"result: {step.tool_result}"
            body = f"tool {step.tool_name}({step.tool_arguments}) -> {outcome}"
        elif step.kind is StepKind.HANDOFF:
            body = f"handed off to {step.target_agent}: {step.input_text}"
        elif step.kind is StepKind.HUMAN:
            body = f"user said: {step.input_text}"
        else:
            continue
        body = " ".join(body.split())[: config.max_step_chars]
        lines.append(f"[{step.span_id}] {step.agent or 'agent'}: {body}")
    return "\n".join(lines)


def prompt(transcript: Transcript, config: JudgeConfig) -> list[dict[str, str]]:
    modes = "\n".join(f"- {m}: {MODES_BY_CODE[m].name}" for m in config.modes)
    return [
        {
            "role": "system",
            "content": (
                "You audit LLM agent runs for MAST failure modes. Answer with JSON only: "
                '{"findings": [{"mode": "FM-x.y", "span_id": "<id from the transcript>", '
                '"confidence": 0.0-1.0, "reason": "..."}]}. Report only modes from this list, '
                "only when the transcript shows them:\n" + modes
            ),
        },
        {"role": "user", "content": render_transcript(transcript, config)},
    ]


def parse_verdict(text: str, transcript: Transcript, config: JudgeConfig) -> list[Finding]:
    """Findings from the judge's JSON answer; anything malformed or uncited is dropped."""
    try:
        start, end = text.index("{"), text.rindex("}") + 1
        data: Any = json.loads(text[start:end])
    except ValueError:
        return []
    items = data.get("findings") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return []
    by_span = {s.span_id: s for s in transcript.steps}
    findings = []
    for item in items:
        if not isinstance(item, dict):
            continue
        mode, span_id = item.get("mode"), item.get("span_id")
        try:
            confidence = float(item.get("confidence", 0))
        except (TypeError, ValueError):
            continue
        step = by_span.get(str(span_id))
        if mode not in config.modes or step is None or confidence < config.min_confidence:
            continue
        reason = str(item.get("reason", ""))[:500]
        findings.append(
            Finding(
                trace_id=transcript.trace_id,
                span_id=step.span_id,
                mode=str(mode),
                detector=JUDGE_DETECTOR,
                detector_version=config.model,
                rule="judge",
                confidence=min(confidence, 1.0),
                message=reason or f"the judge named {mode}",
                evidence_span_ids=(step.span_id,),
                evidence={"rule": "judge", "model": config.model, "reason": reason},
                time_ns=step.start_ns,
                service=step.service,
                agent=step.agent,
                model=step.model,
            )
        )
    return findings
