"""Re-analysis of spans already stored: `mast-otel backfill`.

Spans in `otel_traces` (written by this collector or by the OpenTelemetry Collector's ClickHouse
exporter) are read back and run through the same pipeline as live traffic (normalize → window →
detectors: `whole_traces.analyze_stored_traces`), then findings and signatures are written
(`write_analysis`). Running it twice changes nothing: a finding's id is a hash of
(trace, span, mode, rule), findings already stored are not written again, and a signature that
says what the stored one says is left alone.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TextIO

from mast_otel.collector.config import Config
from mast_otel.collector.reanalysis.whole_traces import analyze_stored_traces
from mast_otel.collector.store import queries
from mast_otel.collector.store.arrow import findings_table
from mast_otel.collector.store.backends import Store
from mast_otel.collector.store.retry import RetryPolicy, insert_with_retry
from mast_otel.collector.store.signatures import write_signature_versions
from mast_otel.processors.model import Finding, RunSignature

__all__ = ["BackfillSummary", "ProgressBar", "WriteSummary", "analyze_stored_traces", "backfill"]


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
