"""Spans, findings and signatures built by hand for storage tests."""

from __future__ import annotations

from pathlib import Path

from mast_otel.collector.store import ChdbStore
from mast_otel.processors.ids import stable_hex
from mast_otel.processors.model import Cost, Finding, RunSignature
from mast_otel.processors.records import SpanEvent, SpanLink, SpanRecord

T0 = 1_700_000_000_000_000_000  # 2023-11-14 22:13:20 UTC, on a minute boundary + 20 s
MINUTE = 60_000_000_000

EXPORTER_TRACES_SQL = Path(__file__).parent / "fixtures" / "otel_exporter_traces.sql"


def trace_id(n: int) -> str:
    return stable_hex("trace", str(n), length=32)


def span_id(trace: int, n: int) -> str:
    return stable_hex("span", str(trace), str(n), length=16)


def span(
    trace: int, n: int, start_ns: int, parent: int | None = None, **attrs: object
) -> SpanRecord:
    return SpanRecord(
        trace_id=trace_id(trace),
        span_id=span_id(trace, n),
        parent_span_id="" if parent is None else span_id(trace, parent),
        name=f"step-{n}",
        start_ns=start_ns,
        end_ns=start_ns + 2_000_000,
        kind="Client",
        status_code="Ok",
        service_name="svc",
        resource_attributes={"service.name": "svc"},
        scope_name="tests",
        attributes=dict(attrs),  # type: ignore[arg-type]
        events=[SpanEvent(start_ns + 1, "note", {"k": "v"})],
        links=[SpanLink(trace_id(trace + 1000), span_id(trace + 1000, 0), "", {"why": "x"})],
    )


def finding(
    trace: int, n: int, mode: str, time_ns: int, model: str = "m1", service: str = "svc"
) -> Finding:
    return Finding(
        trace_id=trace_id(trace),
        span_id=span_id(trace, n),
        mode=mode,
        detector="test",
        detector_version="1",
        rule="rule",
        confidence=0.5,
        message=f"{mode} at {n}",
        evidence_span_ids=(span_id(trace, n),),
        evidence={"rule": "rule", "n": n},
        time_ns=time_ns,
        cost=Cost(seconds=1.5, llm_calls=1, tool_calls=2, input_tokens=10, output_tokens=5),
        service=service,
        agent="agent",
        model=model,
    )


def signature(
    trace: int, end_ns: int, modes: dict[str, int], outcome: str = "", model: str = "m1"
) -> RunSignature:
    return RunSignature(
        trace_id=trace_id(trace),
        service="svc",
        agent="agent",
        model=model,
        start_ns=end_ns - MINUTE // 2,
        end_ns=end_ns,
        close_reason="root_ended",
        steps=5,
        llm_calls=2,
        tool_calls=3,
        errors=0,
        input_tokens=100,
        output_tokens=20,
        mode_counts=modes,
        outcome=outcome,
        score=None,
    )


def run_sql_file(store: ChdbStore, path: Path) -> None:
    text = path.read_text()
    for statement in text.split(";\n"):
        lines = [line for line in statement.splitlines() if not line.strip().startswith("--")]
        sql = "\n".join(lines).strip().rstrip(";")
        if sql:
            store.execute(sql)
