"""One run as the collector understood it: every stored span read back into its step (kind,
agent, tool or model, arguments, result, status), message events sent as log records joined to
their spans, agents named on ancestor spans given to their descendants, and the findings at
each span. `mast-otel run TRACE_ID` prints it, so a user sees at once whether their framework
was understood."""

from __future__ import annotations

import json
from typing import Any

from mast_otel.collector.pipeline import bare_step
from mast_otel.collector.store import Store, queries
from mast_otel.collector.store.queries.common import checked_trace_id
from mast_otel.collector.store.stored_spans import span_record
from mast_otel.processors.conversation import Conversations, RecoveryStats
from mast_otel.processors.model import Step, StepKind
from mast_otel.processors.normalize import genai_messages, normalize_span
from mast_otel.processors.normalize.ancestry import Ancestry
from mast_otel.processors.records import LogRecord

# How much of arguments and results the table shows (the JSON output has them whole).
SHORT = 60
# Message events read back per run at most.
MAX_EVENTS = 10_000


def _stored_events(store: Store, trace_id: str) -> list[LogRecord]:
    rows = store.query(
        f"""
        SELECT SpanId AS span_id, EventName AS event_name, Body AS body,
               LogAttributes AS attributes, toUnixTimestamp64Nano(Timestamp) AS time_ns
        FROM {store.database}.otel_logs
        WHERE TraceId = '{checked_trace_id(trace_id)}' AND SpanId != ''
        ORDER BY Timestamp
        LIMIT {MAX_EVENTS}
        """
    )
    return [
        LogRecord(
            time_ns=int(row["time_ns"]),
            trace_id=trace_id,
            span_id=row["span_id"],
            body=row["body"],
            event_name=row["event_name"],
            attributes=dict(row["attributes"]),
        )
        for row in rows
    ]


def step_view(step: Step) -> dict[str, Any]:
    """The fields of a step a person checks."""
    return {
        "kind": str(step.kind),
        "agent": step.agent,
        "tool": step.tool_name,
        "model": step.model,
        "target_agent": step.target_agent,
        "arguments": step.tool_arguments,
        "result": step.tool_result,
        "result_unknown": step.result_unknown,
        "input": step.input_text,
        "output": step.output_text,
        "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in step.tool_calls],
        "tools_offered": [spec.name for spec in step.tools_offered],
        "status": str(step.status),
        "error": step.error,
        "dialect": step.dialect,
    }


def run_steps(store: Store, trace_id: str) -> dict[str, Any] | None:
    """`queries.run_timeline` with each span's step under `step` (None for a span no dialect
    reads). None if the store has no span of the run."""
    timeline = queries.run_timeline(store, trace_id)
    if timeline is None:
        return None
    records = [span_record(row) for row in queries.stored_spans(store, [timeline["trace_id"]])]
    steps: dict[str, Step] = {}
    ancestry = Ancestry()
    for record in records:
        step = normalize_span(record)
        if step is None and not record.parent_span_id:
            # A root span no dialect reads still stands for the run (and names its agent).
            step = bare_step(record)
        if step is not None:
            steps[step.span_id] = step
            ancestry.add(step)
    for log in _stored_events(store, timeline["trace_id"]):
        message = genai_messages.message_event(log)
        if message is not None and log.span_id in steps:
            genai_messages.apply_message_event(steps[log.span_id], message[0], message[1])
    for step in steps.values():
        ancestry.fill(step)
    recovered = _recovered(list(steps.values()))
    decisive = (timeline["signature"] or {}).get("decisive_span_id", "")
    for span in timeline["spans"]:
        # The step attribution named decisive (a recovered step shown at its span counts too).
        span["decisive"] = bool(decisive) and span["span_id"] == decisive
        step = steps.get(span["span_id"])
        span["step"] = step_view(step) if step is not None else None
        span["recovered"] = [step_view(r) for r in recovered.get(span["span_id"], [])]
    return timeline


def _recovered(steps: list[Step]) -> dict[str, list[Step]]:
    """The steps model calls' inputs showed that no span did (user turns, tool results), by
    the span they are shown at, read as the run windows read them."""
    conversations = Conversations(RecoveryStats())
    attributes: dict[str, Any] = {}
    out: dict[str, list[Step]] = {}
    for step in sorted(steps, key=lambda s: (s.start_ns, s.end_ns)):
        found: list[Step] = []
        if step.kind is StepKind.LLM:
            found = conversations.before_call(step, attributes)
            conversations.after_call(step)
        elif step.kind in (StepKind.TOOL, StepKind.HANDOFF):
            conversations.on_tool(step)
        elif step.kind is StepKind.HUMAN:
            conversations.on_human(step)
        elif step.kind is StepKind.AGENT:
            conversations.on_agent(step)
        for item in found:
            out.setdefault(item.span_id, []).append(item)
    for item in conversations.at_close():
        out.setdefault(item.span_id, []).append(item)
    return out


def short(text: str, limit: int = SHORT) -> str:
    """One line of at most `limit` characters; JSON arguments shown compactly."""
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        parsed = None
    if isinstance(parsed, dict | list):
        text = json.dumps(parsed, separators=(",", ":"), ensure_ascii=False)
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def render(timeline: dict[str, Any]) -> list[str]:
    """The run as lines of text: a header, then one line per span with its step."""
    sig = timeline["signature"] or {}
    blamed = ""
    if sig.get("decisive_span_id"):
        agent = sig.get("responsible_agent") or "-"
        blamed = f"  decisive step {sig.get('decisive_step', -1)} ({agent})"
    lines = [
        f"run {timeline['trace_id']}  outcome {sig.get('outcome') or '-'}  "
        f"modes {', '.join(sig.get('modes', [])) or '-'}{blamed}",
        f"{'offset':>9} {'kind':<8} {'agent':<14} {'tool/model':<18} {'status':<6} "
        f"arguments -> result",
    ]
    for span in timeline["spans"]:
        step = span.get("step")
        indent = "  " * span["depth"]
        for read in span.get("recovered", []):
            # What the model call's input showed (a user's turn, a result no span carried).
            if read["kind"] == "human":
                what, detail = "user", short(read["input"])
            else:
                result = short(read["result"])
                if read.get("result_unknown"):
                    result = "(no result: the run ended before one was shown)"
                what, detail = read["tool"], f"{short(read['arguments'])} -> {result}"
            lines.append(
                f"{'':>9} {read['kind']:<8} {short(read['agent'], 14):<14} {short(what, 18):<18} "
                f"{read['status'][:6]:<6} {indent}{detail} (from the model's input)"
            )
        if step is None:
            lines.append(
                f"{span['offset_ms']:>7.0f}ms {'-':<8} {'':<14} {'':<18} "
                f"{span['status'][:6]:<6} {indent}{span['name']} (not read)"
            )
        else:
            what = step["tool"] or step["model"] or step["target_agent"] or ""
            if step["kind"] == "handoff" and step["target_agent"]:
                what = f"-> {step['target_agent']}"
            if step["tool"]:
                detail = f"{short(step['arguments'])} -> {short(step['result'])}"
            elif step["tool_calls"]:
                calls = ", ".join(c["name"] for c in step["tool_calls"])
                detail = f"asks for {short(calls)}"
            else:
                detail = short(step["output"] or step["input"]) or span["name"]
            lines.append(
                f"{span['offset_ms']:>7.0f}ms {step['kind']:<8} {short(step['agent'], 14):<14} "
                f"{short(what, 18):<18} {step['status'][:6]:<6} {indent}{detail}"
            )
        if span.get("decisive"):
            lines.append(f"{'':>10}  >> decisive step: {_chain_text(sig)}")
        for finding in span["findings"]:
            lines.append(f"{'':>10}  ^ {finding['mode']} {finding['message']}")
    return lines


def _chain_text(sig: dict[str, Any]) -> str:
    """The responsible agent, why, and the chain back from the finding, in one line."""
    try:
        links = json.loads(sig.get("attribution_chain") or "[]")
    except ValueError:
        links = []
    parts = []
    for link in links if isinstance(links, list) else []:
        if not isinstance(link, dict):
            continue
        if "finding" in link:
            parts.append(f"{link.get('mode', '')} {link.get('rule', '')}")
        else:
            parts.append(
                f"step {link.get('step', '')} {link.get('agent', '')} ({link.get('why', '')})"
            )
    agent = sig.get("responsible_agent") or "-"
    return f"{agent} responsible; " + " <- ".join(parts) if parts else f"{agent} responsible"
