"""Re-analysis of spans already stored: `mast-otel backfill`, and the piece others reuse.

Spans in `otel_traces` (written by this collector or by the OpenTelemetry Collector's ClickHouse
exporter) are read back into `SpanRecord`s and run through the same pipeline as live traffic
(normalize → window → detectors), then findings and signatures are written. Running it twice
changes nothing: a finding's id is a hash of (trace, span, mode, rule), findings already stored
are not written again, and a signature that says what the stored one says is left alone.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TextIO

from collector import queries
from collector.config import Config
from collector.exporters.clickhouse import RetryPolicy, findings_table, insert_with_retry
from collector.pipeline import Pipeline
from collector.signatures import write_signature_versions
from collector.store import Store
from processors.conventions import RUN_ATTRIBUTE_TYPES
from processors.model import Finding, RunSignature
from processors.records import AttrValue, LogRecord, SpanEvent, SpanLink, SpanRecord


def _typed_run_attribute(key: str, text: str) -> AttrValue:
    """A `mast.*` attribute as its sender typed it: stores keep every value as text."""
    kind = RUN_ATTRIBUTE_TYPES.get(key, str)
    if kind is bool:
        word = text.strip().lower()
        return True if word == "true" else False if word == "false" else text
    if kind is int or kind is float:
        try:
            return kind(text)
        except ValueError:
            return text
    if kind is list:
        try:
            value = json.loads(text)
        except ValueError:
            return text
        return value if isinstance(value, list) else text
    return text


def span_record(row: dict[str, Any]) -> SpanRecord:
    """A row of `queries.stored_spans` as the record the receivers would have produced."""
    attributes: dict[str, AttrValue] = dict(row["attributes"])
    for key in RUN_ATTRIBUTE_TYPES.keys() & attributes.keys():
        value = attributes[key]
        if isinstance(value, str):
            attributes[key] = _typed_run_attribute(key, value)
    start_ns = int(row["start_ns"])
    return SpanRecord(
        trace_id=row["trace_id"],
        span_id=row["span_id"],
        parent_span_id=row["parent_span_id"],
        name=row["name"],
        start_ns=start_ns,
        end_ns=start_ns + int(row["duration_ns"]),
        kind=row["kind"],
        trace_state=row["trace_state"],
        status_code=row["status_code"],
        status_message=row["status_message"],
        service_name=row["service_name"],
        resource_attributes=dict(row["resource_attributes"]),
        scope_name=row["scope_name"],
        scope_version=row["scope_version"],
        attributes=attributes,
        events=[
            SpanEvent(int(t), name, dict(attrs))
            for t, name, attrs in zip(
                row["event_times_ns"], row["event_names"], row["event_attributes"], strict=False
            )
        ],
        links=[
            SpanLink(trace_id, span_id, state, dict(attrs))
            for trace_id, span_id, state, attrs in zip(
                row["link_trace_ids"],
                row["link_span_ids"],
                row["link_trace_states"],
                row["link_attributes"],
                strict=False,
            )
        ],
    )


class _ResultSink:
    """Keeps what the detectors produce; the spans are already stored."""

    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.signatures: list[RunSignature] = []

    def add_spans(self, spans: list[SpanRecord]) -> None:
        return None

    def add_logs(self, logs: list[LogRecord]) -> None:
        return None

    def add_findings(self, findings: list[Finding]) -> None:
        self.findings.extend(findings)

    def add_signatures(self, signatures: list[RunSignature]) -> None:
        self.signatures.extend(signatures)

    def flush(self, now: float, force: bool = False) -> None:
        return None

    def close(self) -> None:
        return None


def analyze_stored_traces(
    store: Store, config: Config, trace_ids: list[str]
) -> tuple[list[Finding], list[RunSignature]]:
    """Run the detectors over every stored span of `trace_ids`, as one input closed at its
    end; returns the findings and one signature per run. Spans stored more than once (two
    collectors, a retried batch) count once. Writes nothing: see `write_analysis`."""
    sink = _ResultSink()
    pipeline = Pipeline(config, sink, clock=lambda: 0.0)
    rows = queries.stored_spans(store, trace_ids)
    pipeline.process_spans([span_record(row) for row in rows], now=0.0)
    pipeline.close_all()
    return sink.findings, sink.signatures


@dataclass
class WriteSummary:
    findings_written: int = 0
    findings_already_stored: int = 0
    signatures_written: int = 0
    signatures_unchanged: int = 0


def write_analysis(
    store: Store,
    findings: list[Finding],
    signatures: list[RunSignature],
    retry: RetryPolicy | None = None,
) -> WriteSummary:
    """Store what `analyze_stored_traces` found: findings not already stored (by FindingId),
    and signatures as new versions where they differ from the stored ones."""
    summary = WriteSummary()
    traces = sorted({f.trace_id for f in findings} | {s.trace_id for s in signatures})
    stored = queries.stored_finding_ids(store, traces)
    new: dict[str, Finding] = {}
    for finding in findings:
        if finding.finding_id in stored:
            summary.findings_already_stored += 1
        else:
            new.setdefault(finding.finding_id, finding)
    if new:
        insert_with_retry(
            store,
            "mast_findings",
            findings_table(list(new.values())),
            uuid.uuid4().hex,
            retry or RetryPolicy(),
        )
    summary.findings_written = len(new)
    written, unchanged = write_signature_versions(store, signatures, retry=retry)
    summary.signatures_written = written
    summary.signatures_unchanged = unchanged
    return summary


@dataclass
class BackfillSummary(WriteSummary):
    traces: int = 0
    findings_found: int = 0
    seconds: float = 0.0


def backfill(
    store: Store,
    config: Config,
    since_ns: int,
    until_ns: int,
    progress: Callable[[int, int], None] | None = None,
) -> BackfillSummary:
    """Analyse every trace that started in [since, until) and store the results, in batches of
    `storage.backfill_batch_traces` traces (what is held in memory at a time)."""
    started = time.monotonic()
    storage = config.storage
    retry = RetryPolicy.of(storage)
    trace_ids = queries.trace_ids_between(store, since_ns, until_ns)
    summary = BackfillSummary(traces=len(trace_ids))
    if progress:
        progress(0, len(trace_ids))
    for done, batch in _batches(trace_ids, storage.backfill_batch_traces):
        findings, signatures = analyze_stored_traces(store, config, batch)
        written = write_analysis(store, findings, signatures, retry)
        summary.findings_found += len(findings)
        summary.findings_written += written.findings_written
        summary.findings_already_stored += written.findings_already_stored
        summary.signatures_written += written.signatures_written
        summary.signatures_unchanged += written.signatures_unchanged
        if progress:
            progress(done, len(trace_ids))
    summary.seconds = time.monotonic() - started
    return summary


def _batches(items: list[str], size: int) -> Iterable[tuple[int, list[str]]]:
    for start in range(0, len(items), size):
        batch = items[start : start + size]
        yield start + len(batch), batch


class ProgressBar:
    """A one-line progress bar on a terminal; silent when the stream is not one (a pipe, a
    log file, CI), so scripted runs stay clean."""

    def __init__(self, stream: TextIO | None = None, width: int = 30) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        filled = self.width if total == 0 else self.width * done // total
        bar = "#" * filled + "-" * (self.width - filled)
        self.stream.write(f"\r[{bar}] {done}/{total} traces")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()
