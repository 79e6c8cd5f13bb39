"""The exporter interface: where the pipeline hands what it received and what it found."""

from __future__ import annotations

from typing import Protocol

from mast_otel.processors.model import Finding, OutcomeUpdate, RunSignature
from mast_otel.processors.records import LogRecord, SpanRecord


class Exporter(Protocol):
    """Takes records and results as the pipeline produces them. `flush` is called regularly
    with `force=False` (write if a batch is due) and at shutdown with `force=True`; it returns
    True once everything handed over is stored. `full` asks the pipeline to hold off."""

    @property
    def full(self) -> bool: ...

    @property
    def failing(self) -> bool: ...

    def add_spans(self, spans: list[SpanRecord], check: bool | list[bool] = False) -> None: ...

    def add_logs(self, logs: list[LogRecord]) -> None: ...

    def add_findings(self, findings: list[Finding]) -> None: ...

    def add_signatures(self, signatures: list[RunSignature]) -> None: ...

    def add_outcomes(self, outcomes: list[OutcomeUpdate]) -> None: ...

    def flush(self, now: float, force: bool = False, idle: bool = False) -> bool: ...

    def signatures_due_at(self) -> float | None: ...

    def close(self) -> None: ...


class MemoryExporter:
    """Keeps everything in lists: for offline analysis and tests."""

    def __init__(self) -> None:
        self.spans: list[SpanRecord] = []
        self.logs: list[LogRecord] = []
        self.findings: list[Finding] = []
        self.signatures: list[RunSignature] = []
        self.outcomes: list[OutcomeUpdate] = []

    full = False
    failing = False

    def add_spans(self, spans: list[SpanRecord], check: bool | list[bool] = False) -> None:
        self.spans.extend(spans)

    def add_logs(self, logs: list[LogRecord]) -> None:
        self.logs.extend(logs)

    def add_findings(self, findings: list[Finding]) -> None:
        self.findings.extend(findings)

    def add_signatures(self, signatures: list[RunSignature]) -> None:
        self.signatures.extend(signatures)

    def add_outcomes(self, outcomes: list[OutcomeUpdate]) -> None:
        self.outcomes.extend(outcomes)

    def flush(self, now: float, force: bool = False, idle: bool = False) -> bool:
        return True

    def signatures_due_at(self) -> float | None:
        return None

    def close(self) -> None:
        return None
